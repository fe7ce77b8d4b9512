//===- MixedPrecisionTest.cpp - bf16-mixed against f32 and pure bf16 ------===//
//
// `dtype: bf16-mixed` computes in bf16 like `bfloat16`, but its AdamW keeps
// an fp32 master of every parameter and fp32 moments. The f32 run of the
// same model from the same weights on the same batches is the reference:
// bf16-mixed must stay closer to it than pure bf16 over many steps; every
// layout must match the dense bf16-mixed run within the bf16 bound
// (executor/Validation.h); a checkpoint must resume exactly on its layout
// and within that bound on tp 2 or in f32; and the plan must hold the
// extra bytes the analytic count gives.
//
//===----------------------------------------------------------------------===//

#include "executor/Checkpoint.h"
#include "executor/Validation.h"
#include "planner/MemoryReport.h"
#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace sharc;
using namespace sharc::testing;

namespace {

/// models/<model> with its dtype replaced, compiled with `pipeline`.
plan::Plan compileWithDtype(const std::string &model, const std::string &dtype,
                            const PipelineOptions &pipeline,
                            bool emitLogits = false) {
  std::ifstream in(std::string(SHARC_SOURCE_DIR) + "/models/" + model);
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  size_t at = yaml.find("dtype: float32");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, 14, "dtype: " + dtype);
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("sharc-mixed-" + std::to_string(::getpid()) + "-" + model);
  std::ofstream(path) << yaml;
  plan::Plan plan = compilePlanFile(path.string(), pipeline, emitLogits);
  std::filesystem::remove(path);
  return plan;
}

/// One fixed batch (a repeating pattern the model learns), so the loss
/// falls over the steps and precision shows in how it falls.
std::vector<int32_t> patternBatch(const plan::Plan &plan) {
  std::vector<int32_t> tokens(plan.batchSize * plan.seqLen);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((7 * i + i / 5) % plan.vocabSize);
  return tokens;
}

std::vector<double> trainSteps(exec::Runtime &runtime, const plan::Plan &plan,
                               int steps) {
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    REQUIRE(runtime.setBatch(patternBatch(plan)).isOk());
    auto stats = runtime.step();
    REQUIRE(stats.isOk());
    losses.push_back(stats->loss);
  }
  return losses;
}

/// Relative L2 distance of two runs' parameters, over every tensor.
double paramDistance(const plan::TensorFile &run,
                     const plan::TensorFile &reference) {
  double error = 0, norm = 0;
  for (const plan::NamedTensor &want : reference.tensors) {
    const plan::NamedTensor *have = run.find(want.name);
    REQUIRE(have);
    std::vector<double> a = valuesOf(*have), b = valuesOf(want);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      error += (a[i] - b[i]) * (a[i] - b[i]);
      norm += b[i] * b[i];
    }
  }
  return std::sqrt(error / norm);
}

struct PrecisionRun {
  std::vector<double> losses;
  plan::TensorFile params;
};

PrecisionRun trainDense(const std::string &dtype, int steps) {
  plan::Plan plan = compileWithDtype("tiny.yaml", dtype, {});
  auto runtime = makeRuntime(plan);
  REQUIRE(runtime->initParams(7).isOk());
  PrecisionRun run;
  run.losses = trainSteps(*runtime, plan, steps);
  auto params = runtime->gatherParams();
  REQUIRE(params.isOk());
  run.params = std::move(*params);
  return run;
}

} // namespace

TEST_CASE("bf16-mixed tracks the f32 run closer than pure bf16",
          "[numerics][mixed]") {
  constexpr int kSteps = 60;
  PrecisionRun f32 = trainDense("float32", kSteps);
  PrecisionRun bf16 = trainDense("bfloat16", kSteps);
  PrecisionRun mixed = trainDense("bf16-mixed", kSteps);
  // The model learns the batch: the runs are compared while the loss moves.
  REQUIRE(f32.losses.back() < 0.5 * f32.losses.front());

  // Mean |loss - f32 loss| over the second half of the run.
  auto meanGap = [&](const PrecisionRun &run) {
    double gap = 0;
    for (int step = kSteps / 2; step < kSteps; ++step)
      gap += std::abs(run.losses[step] - f32.losses[step]);
    return gap / (kSteps - kSteps / 2);
  };
  double bf16Gap = meanGap(bf16), mixedGap = meanGap(mixed);
  double bf16Distance = paramDistance(bf16.params, f32.params);
  double mixedDistance = paramDistance(mixed.params, f32.params);
  INFO("loss after " << kSteps << " steps: f32 " << f32.losses.back()
                     << ", bf16 " << bf16.losses.back() << ", bf16-mixed "
                     << mixed.losses.back() << "; mean loss gap to f32 (last "
                     << kSteps / 2 << " steps): bf16 " << bf16Gap
                     << ", bf16-mixed " << mixedGap
                     << "; parameters' relative L2 to f32: bf16 "
                     << bf16Distance << ", bf16-mixed " << mixedDistance);
  // The master is f32 (gatherParams gives it): its distance to the f32
  // run is the bf16 compute's noise only, not the bf16 updates' rounding.
  REQUIRE(mixed.params.tensors.front().dtype == DType::F32);
  // Measured: gaps 1.1e-3 and 0.118, distances 4.5e-3 and 2.6e-2.
  REQUIRE(mixedGap < 0.1 * bf16Gap);
  REQUIRE(mixedGap < 0.01 * f32.losses.back());
  REQUIRE(mixedDistance < 0.25 * bf16Distance);
  // And bf16-mixed still computes in bf16: it is not the f32 run.
  REQUIRE(mixedDistance > 0);
}

namespace {

void requireMixedParity(const std::string &model, const std::string &mode,
                        int64_t size, int64_t cpSize = 1) {
  PipelineOptions layout;
  layout.keepGradients = true;
  REQUIRE(applyModePreset(mode, size, layout));
  layout.cpSize = cpSize;
  PipelineOptions dense;
  dense.keepGradients = true;
  plan::Plan sharded = compileWithDtype(model, "bf16-mixed", layout, true);
  plan::Plan reference = compileWithDtype(model, "bf16-mixed", dense, true);
  auto report = exec::validateAgainstDense(sharded, reference, {});
  INFO(model << " " << mode << " size " << size << " cp " << cpSize);
  if (!report.isOk())
    FAIL(report.status().message());
  INFO(exec::formatReport(*report));
  REQUIRE(report->afterSteps.size() == reference.params.size());
  REQUIRE(report->passed);
}

} // namespace

TEST_CASE("every layout under bf16-mixed matches the dense bf16-mixed run",
          "[numerics][mixed]") {
  for (const char *mode :
       {"tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"})
    requireMixedParity("tiny.yaml", mode, 2);
  requireMixedParity("tiny.yaml", "ddp", 2);
  requireMixedParity("tiny-tp4.yaml", "tp_sp_async_vp", 4);
  // Context parallelism alone and beside tp (the sequence split over cp).
  requireMixedParity("tiny.yaml", "cp", 2, 2);
  requireMixedParity("tiny-tp4.yaml", "tp_sp_async_vp", 2, 2);
}

TEST_CASE("a bf16-mixed checkpoint holds the f32 masters and resumes exactly",
          "[numerics][mixed]") {
  plan::Plan plan = compileWithDtype("tiny.yaml", "bf16-mixed", {});
  std::string path = (std::filesystem::temp_directory_path() /
                      ("sharc-mixed-" + std::to_string(::getpid()) + ".ckpt"))
                         .string();
  auto whole = makeRuntime(plan);
  REQUIRE(whole->initParams(7).isOk());
  trainSteps(*whole, plan, 3);
  REQUIRE(exec::saveCheckpoint(*whole, path).isOk());
  std::vector<double> uninterrupted = trainSteps(*whole, plan, 4);
  auto wholeParams = whole->gatherParams();
  REQUIRE(wholeParams.isOk());

  auto file = plan::readSafeTensors(path);
  REQUIRE(file.isOk());
  int64_t numParams = 0;
  for (const plan::ParamEntry &param : plan.params) {
    if (!param.tiedTo.empty())
      continue;
    ++numParams;
    const plan::NamedTensor *weights = file->find(param.name);
    REQUIRE(weights);
    // The master, of which the bf16 parameter is the rounding.
    REQUIRE(weights->dtype == DType::F32);
    for (const char *suffix : {".exp_avg", ".exp_avg_sq"}) {
      const plan::NamedTensor *moment = file->find(param.name + suffix);
      REQUIRE(moment);
      REQUIRE(moment->dtype == DType::F32);
    }
  }
  REQUIRE(static_cast<int64_t>(file->tensors.size()) == 3 * numParams);

  // A fresh runtime with other weights, resumed from the file.
  auto resumed = makeRuntime(plan);
  REQUIRE(resumed->initParams(99).isOk());
  REQUIRE(exec::loadCheckpoint(*resumed, path).isOk());
  REQUIRE(resumed->nextStep() == 4);
  std::vector<double> continued = trainSteps(*resumed, plan, 4);
  auto resumedParams = resumed->gatherParams();
  REQUIRE(resumedParams.isOk());
  std::filesystem::remove(path);
  for (size_t step = 0; step < continued.size(); ++step) {
    INFO("step " << step + 4);
    REQUIRE(continued[step] == uninterrupted[step]);
  }
  for (const plan::NamedTensor &want : wholeParams->tensors) {
    const plan::NamedTensor *have = resumedParams->find(want.name);
    REQUIRE(have);
    INFO(want.name);
    REQUIRE(have->bytes == want.bytes);
  }
}

TEST_CASE("a dense bf16-mixed checkpoint resumes on tp 2 and in f32",
          "[numerics][mixed]") {
  // The checkpoint holds global f32 masters and moments: a tp plan slices
  // them, an f32 plan takes them as its parameters and moments.
  plan::Plan dense = compileWithDtype("tiny.yaml", "bf16-mixed", {});
  PipelineOptions layout;
  REQUIRE(applyModePreset("tp_sp_async", 2, layout));
  plan::Plan tp = compileWithDtype("tiny.yaml", "bf16-mixed", layout);
  plan::Plan f32 = compileWithDtype("tiny.yaml", "float32", {});
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("sharc-mixed-tp-" + std::to_string(::getpid()) + ".ckpt"))
          .string();
  auto whole = makeRuntime(dense);
  REQUIRE(whole->initParams(7).isOk());
  trainSteps(*whole, dense, 3);
  REQUIRE(exec::saveCheckpoint(*whole, path).isOk());
  std::vector<double> uninterrupted = trainSteps(*whole, dense, 3);
  for (auto [name, other] :
       {std::pair{"tp_sp_async 2", &tp}, std::pair{"float32", &f32}}) {
    auto resumed = makeRuntime(*other);
    REQUIRE(exec::loadCheckpoint(*resumed, path).isOk());
    std::vector<double> losses = trainSteps(*resumed, *other, 3);
    for (size_t step = 0; step < losses.size(); ++step) {
      INFO(name << " step " << step + 4 << ": " << losses[step] << " vs "
                << uninterrupted[step]);
      // The bf16 bound (Validation.h): bf16 rounding alone.
      REQUIRE(std::abs(losses[step] - uninterrupted[step]) <=
              1e-2 * uninterrupted[step]);
    }
  }
  std::filesystem::remove(path);
}

TEST_CASE("the memory report counts the f32 masters and moments",
          "[numerics][mixed]") {
  PipelineOptions layout;
  REQUIRE(applyModePreset("tp_sp_async", 2, layout));
  plan::Plan bf16 = compileWithDtype("tiny.yaml", "bfloat16", layout);
  plan::Plan mixed = compileWithDtype("tiny.yaml", "bf16-mixed", layout);
  // The analytic count: each rank's parameter elements (their local
  // shards), 2 bytes each as bf16; pure bf16 adds two bf16 moments, mixed
  // an f32 master and two f32 moments.
  int64_t elements = 0, numState = 0;
  for (const plan::ParamEntry &param : mixed.params) {
    int64_t numel = 1;
    for (int64_t size : mixed.buffers[param.buffer].shape)
      numel *= size;
    elements += numel;
    numState += static_cast<int64_t>(param.state.size());
    REQUIRE(param.state.size() == 3);
  }
  MemoryReport bf16Report = buildMemoryReport(bf16);
  MemoryReport mixedReport = buildMemoryReport(mixed);
  INFO(formatReport(mixed, mixedReport));
  REQUIRE(mixedReport.parameterBytes == bf16Report.parameterBytes);
  REQUIRE(mixedReport.masterBytes == 4 * elements);
  REQUIRE(bf16Report.masterBytes == 0);
  // Each state buffer starts on an alignment boundary: at most one
  // alignment's padding per buffer.
  int64_t padding = numState * 256;
  REQUIRE(mixedReport.optimizerBytes >= 12 * elements);
  REQUIRE(mixedReport.optimizerBytes < 12 * elements + padding);
  REQUIRE(bf16Report.optimizerBytes >= 4 * elements);
  REQUIRE(bf16Report.optimizerBytes < 4 * elements + padding);
  REQUIRE(mixedReport.totalBytes - bf16Report.totalBytes ==
          mixedReport.optimizerBytes - bf16Report.optimizerBytes);
  REQUIRE(formatReport(mixed, mixedReport).find("of which fp32 master") !=
          std::string::npos);
  REQUIRE(reportJson(mixed, mixedReport)
              .find("\"master_bytes\": " + std::to_string(4 * elements) +
                    ",") != std::string::npos);
}

TEST_CASE("a bf16-mixed parameter is drawn once, as its master rounded",
          "[numerics][mixed]") {
  // The bf16 weights of a bf16-mixed run are its f32 masters rounded; they
  // must be the very bits a pure bf16 run draws, in every layout: where
  // the master's slice is the parameter's (dense, tp) the runtime rounds
  // the master instead of drawing again; under ZeRO-1 it draws again.
  plan::Plan pure = compileWithDtype("tiny.yaml", "bfloat16", {});
  auto pureRuntime = makeRuntime(pure);
  REQUIRE(pureRuntime->initParams(7).isOk());
  auto drawn = pureRuntime->gatherParams();
  REQUIRE(drawn.isOk());

  struct Layout {
    const char *mode;
    int64_t size, zero;
  };
  for (Layout layout : {Layout{"dense", 1, 0}, Layout{"tp_sp_async_vp", 2, 0},
                        Layout{"ddp", 2, 1}}) {
    INFO(layout.mode << " zero " << layout.zero);
    PipelineOptions options;
    if (layout.size > 1)
      REQUIRE(applyModePreset(layout.mode, layout.size, options));
    options.zeroStage = layout.zero;
    plan::Plan mixed = compileWithDtype("tiny.yaml", "bf16-mixed", options);
    auto runtime = makeRuntime(mixed);
    REQUIRE(runtime->initParams(7).isOk());
    int64_t compared = 0;
    for (const plan::ParamEntry &param : mixed.params) {
      if (!param.tiedTo.empty())
        continue;
      const plan::NamedTensor *want = drawn->find(param.name);
      REQUIRE(want);
      // The bf16 weights themselves, not the master gatherParams gives.
      auto have = runtime->gatherSaved(
          {.spec = {param.name, DType::BF16, param.globalShape},
           .buffer = param.buffer,
           .sharding = param.sharding,
           .isState = false});
      REQUIRE(have.isOk());
      REQUIRE(mixed.buffers[param.buffer].dtype == DType::BF16);
      // Vocabulary padding rows (tp_vp) are compared where both have them.
      size_t bytes = std::min(have->bytes.size(), want->bytes.size());
      REQUIRE(bytes > 0);
      REQUIRE(std::equal(have->bytes.begin(), have->bytes.begin() + bytes,
                         want->bytes.begin()));
      ++compared;
    }
    REQUIRE(compared == static_cast<int64_t>(drawn->tensors.size()));
  }
}
