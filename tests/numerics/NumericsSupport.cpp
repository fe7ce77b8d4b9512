//===- NumericsSupport.cpp - helpers for end-to-end numerics tests --------===//

#include "tests/numerics/NumericsSupport.h"

#include "mlir/IR/Diagnostics.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;

namespace {

plan::Plan compileWith(CompileOptions options) {
  mlir::MLIRContext context;
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return mlir::success();
  });
  auto result = compileModel(context, options);
  if (auto *error = std::get_if<CompileError>(&result))
    FAIL("compile failed: " << error->message << diagnostics);
  return std::get<plan::Plan>(std::move(result));
}

std::string modelPath(const std::string &file) {
  return std::string(SHARC_SOURCE_DIR) + "/models/" + file;
}

} // namespace

plan::Plan testing::compilePlan(const std::string &modelFile, bool emitLogits,
                                bool withOptimizer,
                                const std::string &runFile) {
  CompileOptions options;
  options.modelPath = modelPath(modelFile);
  if (!runFile.empty())
    options.runPath = modelPath(runFile);
  options.emitLogits = emitLogits;
  options.pipeline.withOptimizer = withOptimizer;
  return compileWith(options);
}

plan::Plan testing::compilePlanFile(const std::string &path,
                                    const PipelineOptions &pipeline) {
  CompileOptions options;
  options.modelPath = path;
  options.pipeline = pipeline;
  return compileWith(options);
}

plan::Plan testing::compilePlan(const std::string &modelFile,
                                const PipelineOptions &pipeline,
                                bool emitLogits) {
  CompileOptions options;
  options.modelPath = modelPath(modelFile);
  options.pipeline = pipeline;
  options.emitLogits = emitLogits;
  return compileWith(options);
}

std::unique_ptr<exec::Runtime> testing::makeRuntime(const plan::Plan &plan) {
  exec::RunOptions options;
  options.poisonActivations = true;
  options.checkHazards = true;
  auto runtime = exec::Runtime::create(plan, options);
  if (!runtime.isOk())
    FAIL("runtime set-up failed: " << runtime.status().message());
  return std::move(runtime.value());
}

std::string testing::fixturePath(const std::string &name) {
  return std::string(SHARC_SOURCE_DIR) + "/tests/golden/" + name;
}

double testing::maxAbs(const std::vector<double> &values) {
  double result = 0.0;
  for (double value : values)
    result = std::max(result, std::fabs(value));
  return result;
}

double testing::maxAbsError(const std::vector<double> &actual,
                            const std::vector<double> &expected) {
  REQUIRE(actual.size() == expected.size());
  double result = 0.0;
  for (size_t i = 0; i < actual.size(); ++i)
    result = std::max(result, std::fabs(actual[i] - expected[i]));
  return result;
}

double testing::relativeL2(const std::vector<double> &actual,
                           const std::vector<double> &expected) {
  REQUIRE(actual.size() == expected.size());
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    err += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    ref += expected[i] * expected[i];
  }
  return std::sqrt(err) / (std::sqrt(ref) + 1e-30);
}
