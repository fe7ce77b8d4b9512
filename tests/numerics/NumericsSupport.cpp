//===- NumericsSupport.cpp - helpers for end-to-end numerics tests --------===//

#include "tests/numerics/NumericsSupport.h"

#include "kernels/TensorView.h"
#include "mlir/IR/Diagnostics.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

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

plan::Plan testing::compileDecodePlan(const std::string &modelFile,
                                      int64_t prefillRows) {
  CompileOptions options;
  options.modelPath = modelPath(modelFile);
  options.decode = true;
  options.prefillRows = prefillRows;
  options.mode = "decode";
  return compileWith(options);
}

plan::Plan testing::compilePlanFile(const std::string &path,
                                    const PipelineOptions &pipeline,
                                    bool emitLogits) {
  CompileOptions options;
  options.modelPath = path;
  options.pipeline = pipeline;
  options.emitLogits = emitLogits;
  return compileWith(options);
}

plan::Plan testing::compilePlan(const std::string &modelFile,
                                const PipelineOptions &pipeline,
                                bool emitLogits, const std::string &runFile) {
  CompileOptions options;
  options.modelPath = modelPath(modelFile);
  if (!runFile.empty())
    options.runPath = modelPath(runFile);
  options.pipeline = pipeline;
  options.emitLogits = emitLogits;
  return compileWith(options);
}

plan::Plan testing::compileEdited(
    const std::string &modelFile,
    const std::vector<std::pair<std::string, std::string>> &edits,
    const PipelineOptions &pipeline, bool emitLogits,
    const std::string &runFile) {
  std::ifstream in(modelPath(modelFile));
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  for (const auto &[from, to] : edits) {
    size_t at = yaml.find(from);
    INFO(modelFile << " has no '" << from << "'");
    REQUIRE(at != std::string::npos);
    yaml.replace(at, from.size(), to);
  }
  static int numEdited = 0;
  std::string path = (std::filesystem::temp_directory_path() /
                      ("sharc-edited-" + std::to_string(getpid()) + "-" +
                       std::to_string(numEdited++) + ".yaml"))
                         .string();
  std::ofstream(path) << yaml;
  CompileOptions options;
  options.modelPath = path;
  if (!runFile.empty())
    options.runPath = modelPath(runFile);
  options.pipeline = pipeline;
  options.emitLogits = emitLogits;
  // Removed before a failing compile ends the test.
  struct Remove {
    std::string path;
    ~Remove() { std::filesystem::remove(path); }
  } remove{path};
  return compileWith(options);
}

plan::Plan testing::compileTinyBatch(int64_t batch, int64_t count,
                                     const PipelineOptions &pipeline) {
  std::ifstream in(modelPath("tiny.yaml"));
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  std::string from = "micro_batch_size: 2";
  size_t at = yaml.find(from);
  REQUIRE(at != std::string::npos);
  yaml.replace(at, from.size(),
               "micro_batch_size: " + std::to_string(batch / count) +
                   "\n  num_microbatches: " + std::to_string(count));
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("sharc-batch-" + std::to_string(getpid()) + "-" +
        std::to_string(batch) + "x" + std::to_string(count) + ".yaml"))
          .string();
  std::ofstream(path) << yaml;
  plan::Plan plan = compilePlanFile(path, pipeline);
  std::filesystem::remove(path);
  return plan;
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

std::vector<double> testing::valuesOf(const plan::NamedTensor &tensor) {
  std::vector<double> values(tensor.bytes.size() / dtypeSize(tensor.dtype));
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = kernels::loadElement({tensor.bytes.data(), tensor.dtype},
                                     static_cast<int64_t>(i));
  return values;
}

int testing::compareTensors(const plan::TensorFile &actual,
                            const plan::TensorFile &reference,
                            const std::string &prefix, double tolerance) {
  int compared = 0;
  for (const plan::NamedTensor &want : reference.tensors) {
    if (want.name.rfind(prefix, 0) != 0)
      continue;
    const plan::NamedTensor *have = actual.find(want.name);
    REQUIRE(have);
    std::vector<double> expected = valuesOf(want), got = valuesOf(*have);
    REQUIRE(got.size() == expected.size());
    INFO(want.name << ": max |error| " << maxAbsError(got, expected)
                   << ", max |dense| " << maxAbs(expected));
    REQUIRE(maxAbsError(got, expected) <= tolerance * maxAbs(expected));
    ++compared;
  }
  return compared;
}

namespace {

/// The shifted labels of `tokens` ([B, S]), -100 where trainOnRandomTokens
/// says.
std::vector<int32_t> scatterLabels(const std::vector<int32_t> &tokens,
                                   int64_t batch, int64_t seqLen,
                                   std::mt19937 &rng) {
  std::vector<int32_t> labels(tokens.size(), -100);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s + 1 < seqLen; ++s) {
      bool dropped = static_cast<int64_t>(rng() % batch) < b ||
                     (b % 2 == 1 && s < seqLen / 2);
      if (!dropped)
        labels[b * seqLen + s] = tokens[b * seqLen + s + 1];
    }
  return labels;
}

} // namespace

testing::TrainedRun testing::trainOnRandomTokens(const plan::Plan &plan,
                                                 int steps, uint64_t paramSeed,
                                                 uint32_t dataSeed,
                                                 bool scatteredLabels) {
  auto runtime = makeRuntime(plan);
  REQUIRE(runtime->initParams(paramSeed).isOk());
  TrainedRun run;
  std::mt19937 rng(dataSeed);
  for (int step = 0; step < steps; ++step) {
    std::vector<int32_t> tokens(plan.batchSize * plan.seqLen);
    for (int32_t &id : tokens)
      id = static_cast<int32_t>(rng() % plan.vocabSize);
    if (scatteredLabels)
      REQUIRE(runtime
                  ->setBatch(tokens, scatterLabels(tokens, plan.batchSize,
                                                   plan.seqLen, rng))
                  .isOk());
    else
      REQUIRE(runtime->setBatch(tokens).isOk());
    auto stats = runtime->step();
    REQUIRE(stats.isOk());
    run.losses.push_back(stats->loss);
    run.gradNorms.push_back(stats->gradNorm);
    if (step == 0) {
      auto outputs = runtime->gatherOutputs();
      REQUIRE(outputs.isOk());
      run.firstOutputs = std::move(*outputs);
    }
  }
  auto params = runtime->gatherParams();
  REQUIRE(params.isOk());
  run.params = std::move(*params);
  return run;
}

void testing::requireLossesMatch(const TrainedRun &run,
                                 const TrainedRun &dense) {
  REQUIRE(run.losses.size() == dense.losses.size());
  for (size_t step = 0; step < dense.losses.size(); ++step) {
    INFO("step " << step << ": " << run.losses[step] << " vs "
                 << dense.losses[step]);
    REQUIRE(std::abs(run.losses[step] - dense.losses[step]) <=
            1e-5 * std::abs(dense.losses[step]));
  }
}

void testing::requireParamsMatchByMean(const TrainedRun &run,
                                       const TrainedRun &dense) {
  REQUIRE(run.params.tensors.size() == dense.params.tensors.size());
  for (const plan::NamedTensor &reference : dense.params.tensors) {
    const plan::NamedTensor *tensor = run.params.find(reference.name);
    REQUIRE(tensor);
    std::vector<double> want = valuesOf(reference);
    std::vector<double> have = valuesOf(*tensor);
    REQUIRE(have.size() >= want.size());
    have.resize(want.size());
    double meanError = 0, meanDense = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      meanError += std::abs(have[i] - want[i]) / want.size();
      meanDense += std::abs(want[i]) / want.size();
    }
    INFO(reference.name << ": mean |error| " << meanError << ", mean |dense| "
                        << meanDense);
    REQUIRE(meanError <= 1e-4 * meanDense);
  }
}

void testing::requireTrainsLikeDense(const TrainedRun &split,
                                     const TrainedRun &whole,
                                     double paramTolerance) {
  int numParams = static_cast<int>(whole.params.tensors.size());
  REQUIRE(compareTensors(split.firstOutputs, whole.firstOutputs,
                         "grad:", 1e-5) == numParams);
  requireLossesMatch(split, whole);
  if (paramTolerance > 0)
    REQUIRE(compareTensors(split.params, whole.params, "", paramTolerance) ==
            numParams);
}

void testing::requireStageActivationUnits(
    const StageActivationBytes &stageBytes, int64_t numStages) {
  std::vector<int64_t> two = stageBytes(2, "gpipe"),
                       three = stageBytes(3, "gpipe"),
                       gpipe = stageBytes(8, "gpipe"),
                       oneFOneB = stageBytes(8, "1f1b");
  REQUIRE(two.size() == static_cast<size_t>(numStages));
  for (int64_t r = 0; r < numStages; ++r) {
    int64_t unit = three[r] - two[r], base = two[r] - 2 * unit;
    INFO("stage " << r << ": unit " << unit << " B, base " << base
                  << " B, gpipe x8 " << gpipe[r] << " B, 1f1b x8 "
                  << oneFOneB[r] << " B");
    REQUIRE(unit > 0);
    auto near = [&](int64_t actual, int64_t units) {
      return std::abs(static_cast<double>(actual - (base + units * unit))) <
             0.5 * static_cast<double>(unit);
    };
    REQUIRE(near(gpipe[r], 8));
    REQUIRE(near(oneFOneB[r], std::min<int64_t>(numStages - r, 8)));
  }
}
