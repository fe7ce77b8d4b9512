//===- GradClipTest.cpp - clipping by the global norm, every layout -------===//
//
// `grad_clip` in the run file (models/tiny-clip.run.yaml) scales every
// step's gradients by min(1, max_norm / (norm + 1e-6)), where norm is the
// L2 norm of all the parameters' gradients together. The dense step is
// checked against the host: the norm of its kept gradients and an AdamW
// update computed from them. Every layout then has to find the dense norm,
// counting each parameter once whether it is sharded or replicated, and
// train like dense (also on a mesh with a cp axis, with fused projections,
// with microbatches, and on pipeline stages, where each stage's share of
// the norm is summed over the stages). The run file's eps is near the clipped
// gradients' size, so that a wrong factor moves the parameters (Adam alone
// would hide it).
//
//===----------------------------------------------------------------------===//

#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

using namespace sharc;
using namespace sharc::testing;

namespace {

constexpr const char *kRunFile = "tiny-clip.run.yaml";
constexpr int kSteps = 3;

const plan::Instruction &firstAdamW(const plan::Plan &plan) {
  for (const plan::Instruction &instr : plan.instructions)
    if (instr.op == "adamw")
      return instr;
  FAIL("the plan has no adamw");
  return plan.instructions.front();
}

/// One torch.optim.AdamW step (the first) from p with gradient g, in double.
std::vector<double> adamwFirstStep(const std::vector<double> &param,
                                   const std::vector<double> &grad,
                                   double scale, const plan::Instruction &hp) {
  double lr = hp.getFloat("lr"), beta1 = hp.getFloat("beta1");
  double beta2 = hp.getFloat("beta2"), eps = hp.getFloat("eps");
  double decay = 1 - lr * hp.getFloat("weight_decay");
  std::vector<double> result(param.size());
  for (size_t i = 0; i < param.size(); ++i) {
    double g = grad[i] * scale;
    double m = (1 - beta1) * g, v = (1 - beta2) * g * g;
    result[i] = param[i] * decay -
                lr / (1 - beta1) * m / (std::sqrt(v / (1 - beta2)) + eps);
  }
  return result;
}

} // namespace

TEST_CASE("the dense step clips by the norm of its gradients",
          "[numerics][clip]") {
  PipelineOptions dense;
  dense.keepGradients = true;
  plan::Plan plan = compilePlan("tiny.yaml", dense, false, kRunFile);
  const plan::Instruction &hp = firstAdamW(plan);
  double maxNorm = hp.getFloat("max_norm");
  REQUIRE(maxNorm == 0.1);
  auto runtime = makeRuntime(plan);
  REQUIRE(runtime->initParams(7).isOk());
  auto before = runtime->gatherParams();
  REQUIRE(before.isOk());
  std::mt19937 rng(11);
  std::vector<int32_t> tokens(plan.batchSize * plan.seqLen);
  for (int32_t &id : tokens)
    id = static_cast<int32_t>(rng() % plan.vocabSize);
  REQUIRE(runtime->setBatch(tokens).isOk());
  auto stats = runtime->step();
  REQUIRE(stats.isOk());
  auto outputs = runtime->gatherOutputs();
  auto after = runtime->gatherParams();
  REQUIRE(outputs.isOk());
  REQUIRE(after.isOk());

  // The norm on the host, from the kept (unclipped) gradients.
  double sumSquares = 0;
  int numGrads = 0;
  for (const plan::NamedTensor &tensor : outputs->tensors)
    if (tensor.name.rfind("grad:", 0) == 0) {
      for (double value : valuesOf(tensor))
        sumSquares += value * value;
      ++numGrads;
    }
  REQUIRE(numGrads == static_cast<int>(before->tensors.size()));
  double norm = std::sqrt(sumSquares);
  INFO("host norm " << norm << ", step's " << stats->gradNorm);
  REQUIRE(norm > 2 * maxNorm); // clipping acts
  REQUIRE(std::abs(stats->gradNorm - norm) <= 1e-6 * norm);
  const plan::NamedTensor *normSq = outputs->find("grad_norm_sq");
  REQUIRE(normSq);
  REQUIRE(std::abs(valuesOf(*normSq)[0] - sumSquares) <= 1e-6 * sumSquares);

  double scale = std::min(1.0, maxNorm / (norm + 1e-6));
  for (const plan::NamedTensor &start : before->tensors) {
    std::vector<double> param = valuesOf(start);
    std::vector<double> grad = valuesOf(*outputs->find("grad:" + start.name));
    std::vector<double> have = valuesOf(*after->find(start.name));
    std::vector<double> clipped = adamwFirstStep(param, grad, scale, hp);
    std::vector<double> unclipped = adamwFirstStep(param, grad, 1.0, hp);
    double error = maxAbsError(have, clipped);
    double unclippedError = maxAbsError(have, unclipped);
    INFO(start.name << ": max |error| " << error << ", against the unclipped "
                    << "update " << unclippedError);
    // fp32 arithmetic on O(1) values: a few ulps.
    REQUIRE(error <= 1e-6 * std::max(1.0, maxAbs(param)));
    // The test can tell: without clipping the update is another.
    REQUIRE(unclippedError > 100 * std::max(error, 1e-9));
  }
}

namespace {

/// The layout's run against the dense one, both from the same weights and
/// tokens: every step clips, and norm, loss and parameters match.
void requireClipParity(const plan::Plan &layoutPlan,
                       const plan::Plan &densePlan) {
  TrainedRun sharded = trainOnRandomTokens(layoutPlan, kSteps, 7, 11);
  TrainedRun dense = trainOnRandomTokens(densePlan, kSteps, 7, 11);
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step << ": norm " << sharded.gradNorms[step] << " vs "
                 << dense.gradNorms[step] << ", loss " << sharded.losses[step]
                 << " vs " << dense.losses[step]);
    REQUIRE(dense.gradNorms[step] > 2 * 0.1); // every step clips
    // Each parameter counted once: a replicated one counted twice, or a
    // shard left out, would be off by far more than fp32 noise.
    REQUIRE(std::abs(sharded.gradNorms[step] - dense.gradNorms[step]) <=
            1e-5 * dense.gradNorms[step]);
    REQUIRE(std::abs(sharded.losses[step] - dense.losses[step]) <=
            1e-5 * std::abs(dense.losses[step]));
  }
  requireParamsMatchByMean(sharded, dense);
}

/// `layout` (the pipeline and context axes set directly) against dense.
void requireClipParity(const std::string &model,
                       const PipelineOptions &layout) {
  INFO(model << ": dp " << layout.dpSize << " pp " << layout.ppSize << " ("
             << layout.ppSchedule << ") cp " << layout.cpSize << " ("
             << layout.cpComm << ") tp " << layout.tpSize);
  plan::Plan plan = compilePlan(model, layout, false, kRunFile);
  REQUIRE(plan.worldSize() ==
          layout.dpSize * layout.ppSize * layout.cpSize * layout.tpSize);
  requireClipParity(plan,
                    compilePlan(model, PipelineOptions{}, false, kRunFile));
}

void requireClipParity(const std::string &model, const std::string &mode,
                       int64_t size, int64_t extraDp = 1, int64_t cpSize = 1) {
  PipelineOptions layout;
  REQUIRE(applyModePreset(mode, size, layout));
  if (extraDp > 1)
    layout.dpSize = extraDp;
  if (cpSize > 1)
    layout.extraAxes.push_back({"cp", cpSize});
  INFO(model << " " << mode << " size " << size << " dp " << extraDp << " cp "
             << cpSize);
  requireClipParity(compilePlan(model, layout, false, kRunFile),
                    compilePlan(model, PipelineOptions{}, false, kRunFile));
}

} // namespace

TEST_CASE("every tp=2 mode clips like dense", "[numerics][clip]") {
  for (const char *mode :
       {"tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"})
    requireClipParity("tiny.yaml", mode, 2);
}

TEST_CASE("ddp and dp=2 x tp=2 clip like dense", "[numerics][clip]") {
  requireClipParity("tiny.yaml", "ddp", 2);
  requireClipParity("tiny.yaml", "tp_sp_async_vp", 2, /*extraDp=*/2);
  requireClipParity("tiny-tied.yaml", "tp", 2, /*extraDp=*/2);
}

TEST_CASE("a dp2 x cp2 x tp2 mesh clips like dense", "[numerics][clip]") {
  // cp holds every value alike: its gradients count 1/2 on each cp rank.
  requireClipParity("tiny.yaml", "tp_sp_async_vp", 2, /*extraDp=*/2,
                    /*cpSize=*/2);
}

TEST_CASE("pp=2 alone, with dp=2 and with tp=2 clips like dense",
          "[numerics][clip][pipeline]") {
  // Each stage sums its own parameters' squares (pp adds no replica: the
  // stages hold different parameters) and one all_reduce over pp adds the
  // stages' sums; every stage's ranks run it and clip by the same norm.
  for (const char *schedule : {"gpipe", "1f1b"}) {
    PipelineOptions layout;
    REQUIRE(applyModePreset("pp", 2, layout));
    layout.ppSchedule = schedule;
    requireClipParity("tiny.yaml", layout);
    layout.dpSize = 2;
    requireClipParity("tiny.yaml", layout);
  }
  // tp's shards counted once, its replicated norms 1/2 on each tp rank.
  for (const char *mode : {"tp_pp", "tp_cp_pp"}) {
    PipelineOptions layout;
    REQUIRE(applyModePreset(mode, 2, layout));
    layout.sequenceParallel = true;
    layout.cpComm = "all_gather"; // tiny's one KV head a tp rank
    requireClipParity("tiny.yaml", layout);
  }
}

TEST_CASE("pp=2 x cp=2 with each exchange clips like dense",
          "[numerics][clip][pipeline][cp]") {
  for (const char *exchange : {"a2a", "all_gather"}) {
    PipelineOptions layout;
    REQUIRE(applyModePreset("pp_cp", 2, layout));
    layout.cpComm = exchange;
    requireClipParity("tiny.yaml", layout);
  }
}

TEST_CASE("a tied embedding under pp counts once in the norm",
          "[numerics][clip][pipeline]") {
  // It lives on the first stage, and the last stage's LM-head gradient is
  // summed into it there: no second copy to count on the last stage.
  PipelineOptions layout;
  REQUIRE(applyModePreset("pp", 2, layout));
  requireClipParity("tiny-tied.yaml", layout);
  REQUIRE(applyModePreset("tp_pp", 2, layout));
  layout.vocabParallel = true;
  layout.ppSchedule = "1f1b";
  requireClipParity("tiny-tied.yaml", layout);
}

TEST_CASE("fused projections and microbatches clip like dense",
          "[numerics][clip]") {
  // A fused weight's gradient is its parameters' rows: each counted once.
  PipelineOptions fused;
  REQUIRE(applyModePreset("tp_sp_async_vp", 2, fused));
  fused.fuseProjections = true;
  requireClipParity(
      compilePlan("tiny.yaml", fused, false, kRunFile),
      compilePlan("tiny.yaml", PipelineOptions{}, false, kRunFile));
  // Two microbatches of one sequence against one of two: the norm of the
  // accumulated gradient, not of a microbatch's.
  std::string path = (std::filesystem::temp_directory_path() /
                      ("sharc-clip-" + std::to_string(getpid()) + ".yaml"))
                         .string();
  std::ofstream(path) << "model: {name: tiny, hidden_size: 64, "
                         "num_hidden_layers: 2, num_attention_heads: 4, "
                         "num_key_value_heads: 2, vocab_size: 128}\n"
                         "run: {seq_len: 16, micro_batch_size: 1, "
                         "num_microbatches: 2, optimizer: {lr: 1.0e-3, "
                         "eps: 1.0e-4, grad_clip: 0.1}}\n";
  plan::Plan microbatched = compilePlanFile(path, PipelineOptions{});
  // And on two 1F1B stages: the stages clip by the norm of the step's sum.
  PipelineOptions piped;
  REQUIRE(applyModePreset("pp", 2, piped));
  piped.ppSchedule = "1f1b";
  plan::Plan pipelined = compilePlanFile(path, piped);
  std::filesystem::remove(path);
  REQUIRE(microbatched.batchSize == 2);
  plan::Plan dense =
      compilePlan("tiny.yaml", PipelineOptions{}, false, kRunFile);
  requireClipParity(microbatched, dense);
  REQUIRE(pipelined.axisSize(plan::kStageAxis) == 2);
  requireClipParity(pipelined, dense);
}
