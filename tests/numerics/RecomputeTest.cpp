//===- RecomputeTest.cpp - full recompute against keeping the activations -===//
//
// `--recompute full` (sharc-recompute{policy=full}) keeps only each layer's
// input into the backward and runs the layer's forward again right before
// the layer's backward reads it. A copy runs the same kernel on the same
// inputs as its original, so the reference is the same layout without
// recompute, from the same weights on the same tokens: every loss and every
// parameter after four steps must be bit for bit equal, in every layout
// the copies meet (collectives of tp, sp and vp; cp's exchanges, the ring
// included; pipeline stages under each schedule with their transfers; dp
// buckets and ZeRO-3's gathers; microbatches; tied embeddings; bf16-mixed).
// Each run poisons dead activations and checks the streams for hazards
// (makeRuntime), so a copy read after its buffer was reused, or an
// original read after its last planned use, fails the run.
//
//===----------------------------------------------------------------------===//

#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace sharc;
using namespace sharc::testing;

namespace {

using Edits = std::vector<std::pair<std::string, std::string>>;

constexpr int kSteps = 4;

/// tiny.yaml with four layers (two a stage, or one a model chunk).
const Edits kFourLayers = {{"num_hidden_layers: 2", "num_hidden_layers: 4"}};

int64_t activationBytes(const plan::Plan &plan) {
  return plan.regionBytes.at(plan::Region::Activation);
}

int countOps(const plan::Plan &plan, const std::string &op) {
  return static_cast<int>(std::count_if(
      plan.instructions.begin(), plan.instructions.end(),
      [&](const plan::Instruction &instr) { return instr.op == op; }));
}

/// `layout` of `model` (with `edits`) with and without full recompute: the
/// plan re-runs the layers' forward ops, and both train alike to the bit.
void requireRecomputeExact(const std::string &model, const Edits &edits,
                           PipelineOptions layout) {
  plan::Plan kept = compileEdited(model, edits, layout);
  layout.recompute = "full";
  plan::Plan rerun = compileEdited(model, edits, layout);
  // Every layer's norms (rms_norm, and q/k's, fused with rope unless cp
  // moves rope) run once more, in its backward.
  auto norms = [](const plan::Plan &plan) {
    return countOps(plan, "rms_norm") + countOps(plan, "rms_norm_rope");
  };
  REQUIRE(norms(kept) > 0);
  REQUIRE(norms(rerun) > norms(kept));
  TrainedRun a = trainOnRandomTokens(rerun, kSteps, 7, 11, true);
  TrainedRun b = trainOnRandomTokens(kept, kSteps, 7, 11, true);
  REQUIRE(a.losses.size() == static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step);
    REQUIRE(a.losses[step] == b.losses[step]);
  }
  REQUIRE(compareTensors(a.params, b.params, "", 0.0) ==
          static_cast<int>(b.params.tensors.size()));
}

PipelineOptions preset(const std::string &mode, int64_t size) {
  PipelineOptions layout;
  REQUIRE(applyModePreset(mode, size, layout));
  return layout;
}

} // namespace

TEST_CASE("full recompute trains as keeping the activations, to the bit",
          "[numerics][recompute]") {
  SECTION("dense") {
    requireRecomputeExact("tiny.yaml", {}, preset("dense", 1));
  }
  SECTION("dense, every projection its own GEMM, bf16-mixed") {
    PipelineOptions layout = preset("dense", 1);
    layout.fuseProjections = false;
    requireRecomputeExact("tiny.yaml",
                          {{"dtype: float32", "dtype: bf16-mixed"}}, layout);
  }
  SECTION("ddp, and ZeRO-3 in small groups") {
    requireRecomputeExact("tiny.yaml", {}, preset("ddp", 2));
    PipelineOptions zero = preset("ddp", 2);
    zero.zeroStage = 3;
    zero.bucketBytes = 20 << 10;
    requireRecomputeExact("tiny.yaml", {}, zero);
  }
  SECTION("tp with sp and vp (the SP collectives re-run)") {
    requireRecomputeExact("tiny.yaml", {}, preset("tp", 2));
    requireRecomputeExact("tiny.yaml", {}, preset("tp_sp_async_vp", 2));
  }
  SECTION("cp: Ulysses, K/V all-gather, ring") {
    for (const char *comm : {"a2a", "all_gather", "ring"}) {
      INFO(comm);
      PipelineOptions layout = preset("cp", 2);
      layout.cpComm = comm;
      requireRecomputeExact("tiny.yaml", {}, layout);
    }
  }
  SECTION("pp: GPipe, 1F1B, interleaved; tied embeddings") {
    for (const char *schedule : {"gpipe", "1f1b", "interleaved"}) {
      INFO(schedule);
      PipelineOptions layout = preset("pp", 2);
      layout.ppSchedule = schedule;
      layout.ppChunks = std::string(schedule) == "interleaved" ? 2 : 1;
      Edits edits = kFourLayers;
      edits.push_back({"micro_batch_size: 2",
                       "micro_batch_size: 1\n  num_microbatches: 4"});
      requireRecomputeExact("tiny.yaml", edits, layout);
    }
    requireRecomputeExact("tiny-tied.yaml", {}, preset("pp", 2));
  }
  SECTION("tp x cp x pp on 8 ranks, microbatches") {
    PipelineOptions layout = preset("tp_cp_pp", 2);
    layout.cpComm = "all_gather";
    Edits edits = kFourLayers;
    edits.push_back(
        {"micro_batch_size: 2", "micro_batch_size: 1\n  num_microbatches: 2"});
    requireRecomputeExact("tiny.yaml", edits, layout);
  }
}

TEST_CASE("full recompute keeps fewer activations", "[numerics][recompute]") {
  // At four layers and 256 tokens a sequence the kept activations
  // outweigh one layer's re-run copy (at 16, tiny's weight gradients are
  // the larger part of the arena).
  Edits edits = kFourLayers;
  edits.push_back({"seq_len: 16", "seq_len: 256"});
  for (auto [mode, size] : {std::pair<std::string, int64_t>{"dense", 1},
                            {"ddp", 2},
                            {"tp_sp_async_vp", 2},
                            {"cp", 2}}) {
    INFO(mode);
    PipelineOptions layout = preset(mode, size);
    plan::Plan kept = compileEdited("tiny.yaml", edits, layout);
    layout.recompute = "full";
    plan::Plan rerun = compileEdited("tiny.yaml", edits, layout);
    INFO(activationBytes(rerun) << " bytes against " << activationBytes(kept));
    REQUIRE(activationBytes(rerun) < activationBytes(kept) / 2);
  }
}
