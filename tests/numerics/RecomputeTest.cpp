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
#include "tools/sharc/RecomputeSearch.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

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

/// `layout` of `model` (with `edits`) with and without `policy` (full or
/// selective, of the first `layers` layers, -1 all): the plan re-runs the
/// layers' forward ops, and both train alike to the bit.
void requireRecomputeExact(const std::string &model, const Edits &edits,
                           PipelineOptions layout, int64_t layers = -1,
                           const std::string &policy = "full") {
  INFO("recompute " << policy);
  plan::Plan kept = compileEdited(model, edits, layout);
  layout.recompute = policy;
  layout.recomputeLayers = layers;
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
  SECTION("the first layer alone, dense and on pipeline stages") {
    requireRecomputeExact("tiny.yaml", kFourLayers, preset("dense", 1), 1);
    PipelineOptions layout = preset("pp", 2);
    layout.ppSchedule = "1f1b";
    Edits edits = kFourLayers;
    edits.push_back(
        {"micro_batch_size: 2", "micro_batch_size: 1\n  num_microbatches: 4"});
    requireRecomputeExact("tiny.yaml", edits, layout, 1);
  }
  SECTION("selective: norms, rope and SwiGLU alone, in every layout kind") {
    requireRecomputeExact("tiny.yaml", {}, preset("dense", 1), -1, "selective");
    requireRecomputeExact("tiny.yaml", {}, preset("tp_sp_async_vp", 2), -1,
                          "selective");
    PipelineOptions zero = preset("ddp", 2);
    zero.zeroStage = 3;
    requireRecomputeExact("tiny.yaml", {}, zero, -1, "selective");
    PipelineOptions ring = preset("cp", 2);
    ring.cpComm = "ring";
    requireRecomputeExact("tiny.yaml", {}, ring, -1, "selective");
    PipelineOptions pp = preset("pp", 2);
    pp.ppSchedule = "interleaved";
    pp.ppChunks = 2;
    Edits edits = kFourLayers;
    edits.push_back(
        {"micro_batch_size: 2", "micro_batch_size: 1\n  num_microbatches: 2"});
    requireRecomputeExact("tiny.yaml", edits, pp, -1, "selective");
    PipelineOptions separate = preset("dense", 1);
    separate.fuseProjections = false;
    separate.fuseNormRope = false;
    requireRecomputeExact("tiny.yaml", kFourLayers, separate, 2, "selective");
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

namespace {

/// tiny.yaml at 4 layers and seq 256 (activations outweigh the rest),
/// written where the compile driver reads it.
std::string writeTinyFourLayers() {
  std::ifstream in(std::string(SHARC_SOURCE_DIR) + "/models/tiny.yaml");
  std::string yaml((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  for (auto [from, to] : {std::pair<std::string, std::string>{
                              "num_hidden_layers: 2", "num_hidden_layers: 4"},
                          {"seq_len: 16", "seq_len: 256"}})
    yaml.replace(yaml.find(from), from.size(), to);
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("sharc-recompute-search-" + std::to_string(getpid()) + ".yaml"))
          .string();
  std::ofstream(path) << yaml;
  return path;
}

} // namespace

TEST_CASE("recompute auto re-runs the fewest layers that fit",
          "[numerics][recompute]") {
  std::string path = writeTinyFourLayers();
  mlir::MLIRContext context;
  CompileOptions options;
  options.modelPath = path;
  // Each plan's bytes with the first n layers re-run: never more as n
  // grows (re-running the last layer saves nothing when the peak is in its
  // own backward, as here), and far fewer with all than with none.
  std::vector<int64_t> bytes;
  for (int64_t n = 0; n <= 4; ++n) {
    CompileOptions each = options;
    each.pipeline.recompute = n > 0 ? "full" : "none";
    each.pipeline.recomputeLayers = n;
    auto plan = compileModel(context, each);
    REQUIRE(std::holds_alternative<plan::Plan>(plan));
    bytes.push_back(planDeviceBytes(std::get<plan::Plan>(plan)));
    if (n > 0)
      REQUIRE(bytes[n] <= bytes[n - 1]);
  }
  REQUIRE(bytes[4] < bytes[0] * 2 / 3);
  // The fewest layers whose plan fits `limit`, by looking at every one.
  auto fewest = [&](int64_t limit) {
    int64_t n = 0;
    while (bytes[n] > limit)
      ++n;
    return n;
  };
  for (int64_t n = 0; n <= 4; ++n)
    for (int64_t limit : {bytes[n], bytes[n] - 1}) {
      if (limit < bytes[4])
        continue;
      INFO("limit " << limit << " bytes");
      RecomputeChoice choice;
      auto plan = compileWithinMemory(context, options, limit, &choice);
      REQUIRE(std::holds_alternative<plan::Plan>(plan));
      REQUIRE(choice.numLayers == 4);
      REQUIRE(choice.layers == fewest(limit));
      REQUIRE(choice.bytes == bytes[choice.layers]);
      REQUIRE(planDeviceBytes(std::get<plan::Plan>(plan)) == choice.bytes);
      REQUIRE(choice.noneBytes == bytes[0]);
    }
  // Under what every layer re-run needs: refused, naming both sizes.
  RecomputeChoice choice;
  auto refused = compileWithinMemory(context, options, bytes[4] - 1, &choice);
  REQUIRE(std::holds_alternative<CompileError>(refused));
  const CompileError &error = std::get<CompileError>(refused);
  REQUIRE(error.exitCode == 2);
  INFO(error.message);
  REQUIRE(error.message.find("with every layer re-run") != std::string::npos);
  REQUIRE(error.message.find("over the limit") != std::string::npos);
  std::filesystem::remove(path);
}
