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

#include "planner/StepSimulation.h"
#include "tests/numerics/NumericsSupport.h"
#include "tools/sharc/RecomputeSearch.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

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
/// selective, of the first `layers` layers, -1 all; `rest` for the others
/// under full): the plan re-runs the layers' forward ops, and both train
/// alike to the bit.
void requireRecomputeExact(const std::string &model, const Edits &edits,
                           PipelineOptions layout, int64_t layers = -1,
                           const std::string &policy = "full",
                           const std::string &rest = "none") {
  INFO("recompute " << policy << " " << layers << ", rest " << rest);
  plan::Plan kept = compileEdited(model, edits, layout);
  layout.recompute = policy;
  layout.recomputeLayers = layers;
  layout.recomputeRest = rest;
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
  SECTION("the first layers whole, the others selectively") {
    requireRecomputeExact("tiny.yaml", kFourLayers, preset("dense", 1), 1,
                          "full", "selective");
    requireRecomputeExact("tiny.yaml", kFourLayers, preset("tp_sp_async_vp", 2),
                          2, "full", "selective");
    requireRecomputeExact("tiny.yaml", {}, preset("ddp", 2), 1, "full",
                          "selective");
    PipelineOptions pp = preset("pp", 2);
    pp.ppSchedule = "1f1b";
    Edits edits = kFourLayers;
    edits.push_back(
        {"micro_batch_size: 2", "micro_batch_size: 1\n  num_microbatches: 4"});
    requireRecomputeExact("tiny.yaml", edits, pp, 3, "full", "selective");
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

TEST_CASE("recompute auto re-runs the least that fits",
          "[numerics][recompute]") {
  std::string path = writeTinyFourLayers();
  mlir::MLIRContext context;
  CompileOptions options;
  options.modelPath = path;
  // The chain of RecomputeSearch.h, each plan compiled by its own flags:
  // none; selective on the first s layers; the first f whole and the other
  // 4 - f selectively; all whole.
  std::vector<PipelineOptions> chain(9);
  for (int64_t s = 1; s <= 4; ++s) {
    chain[s].recompute = "selective";
    chain[s].recomputeLayers = s;
  }
  for (int64_t f = 1; f <= 4; ++f) {
    chain[4 + f].recompute = "full";
    chain[4 + f].recomputeLayers = f;
    chain[4 + f].recomputeRest = f < 4 ? "selective" : "none";
  }
  // Never more as the chain re-runs more (re-running the last layer saves
  // nothing when the peak is in its own backward, as here), strictly less
  // somewhere in each half, far less at the end. Step 8, the last layer
  // whole, may keep more than step 7, its cheap ops alone: the search then
  // ends at 7.
  std::vector<int64_t> bytes;
  for (const PipelineOptions &step : chain) {
    CompileOptions each = options;
    each.pipeline = step;
    auto plan = compileModel(context, each);
    REQUIRE(std::holds_alternative<plan::Plan>(plan));
    bytes.push_back(planDeviceBytes(std::get<plan::Plan>(plan)));
    INFO("step " << bytes.size() - 1);
    if (bytes.size() > 1 && bytes.size() < 9)
      REQUIRE(bytes.back() <= bytes[bytes.size() - 2]);
  }
  int64_t end = bytes[8] < bytes[7] ? 8 : 7;
  REQUIRE(bytes[4] < bytes[0]);
  REQUIRE(bytes[7] < bytes[4]);
  REQUIRE(bytes[end] < bytes[0] * 2 / 3);
  // The first step whose plan fits `limit`, by looking at every one.
  auto first = [&](int64_t limit) {
    int64_t step = 0;
    while (bytes[step] > limit)
      ++step;
    return step;
  };
  for (int64_t step = 0; step <= end; ++step)
    for (int64_t limit : {bytes[step], bytes[step] - 1}) {
      if (limit < bytes[end])
        continue;
      INFO("limit " << limit << " bytes");
      RecomputeChoice choice;
      auto plan = compileWithinMemory(context, options, limit, &choice);
      REQUIRE(std::holds_alternative<plan::Plan>(plan));
      REQUIRE(choice.numLayers == 4);
      int64_t expected = first(limit);
      REQUIRE(choice.fullLayers == std::max<int64_t>(expected - 4, 0));
      REQUIRE(choice.selectiveLayers ==
              (expected > 4 ? 8 - expected : expected));
      REQUIRE(choice.bytes == bytes[expected]);
      REQUIRE(planDeviceBytes(std::get<plan::Plan>(plan)) == choice.bytes);
      REQUIRE(choice.noneBytes == bytes[0]);
      // The flags it prints compile the same plan.
      PipelineOptions flagged;
      std::string flags = choice.flags(), policy, rest;
      std::optional<int64_t> layers;
      std::istringstream words(flags);
      for (std::string word, value; words >> word >> value;) {
        if (word == "--recompute")
          policy = value;
        else if (word == "--recompute-rest")
          rest = value;
        else
          layers = std::stoll(value);
      }
      INFO(flags);
      REQUIRE(applyRecomputeFlags(policy, layers, rest, std::nullopt, flagged)
                  .empty());
      CompileOptions again = options;
      again.pipeline = flagged;
      auto replay = compileModel(context, again);
      REQUIRE(std::holds_alternative<plan::Plan>(replay));
      REQUIRE(planDeviceBytes(std::get<plan::Plan>(replay)) == choice.bytes);
    }
  // Under what the chain's end needs: refused, naming both sizes.
  RecomputeChoice choice;
  auto refused = compileWithinMemory(context, options, bytes[end] - 1, &choice);
  REQUIRE(std::holds_alternative<CompileError>(refused));
  const CompileError &error = std::get<CompileError>(refused);
  REQUIRE(error.exitCode == 2);
  INFO(error.message);
  REQUIRE(error.message.find("with every layer re-run") != std::string::npos);
  REQUIRE(error.message.find("over the limit") != std::string::npos);
  std::filesystem::remove(path);
}

namespace {

/// The report's recompute figures of `layout` on the small four-layer model
/// (`sharc compile --report`), with the default machine.
RecomputeCost reportedCost(const std::string &path, PipelineOptions layout) {
  mlir::MLIRContext context;
  CompileOptions options;
  options.modelPath = path;
  options.pipeline = layout;
  PlanSchedule schedule;
  auto plan = compileModel(context, options, &schedule);
  REQUIRE(std::holds_alternative<plan::Plan>(plan));
  Result<Machine> machine =
      readMachineFile(SHARC_SOURCE_DIR "/models/machines/h200-nvlink.yaml");
  REQUIRE(machine.isOk());
  MeshShape mesh;
  for (const plan::MeshAxis &axis : std::get<plan::Plan>(plan).mesh)
    mesh.push_back({axis.name, axis.size});
  StepSimulation simulation = simulateStep(schedule.graph, schedule.streams,
                                           schedule.order, *machine, mesh);
  REQUIRE_FALSE(simulation.deadlocked);
  RecomputeCost cost = recomputeCost(schedule.graph, simulation);
  REQUIRE(cost.seconds <= simulation.stepSeconds);
  return cost;
}

} // namespace

TEST_CASE("the report's recompute is the arithmetic recompute adds",
          "[numerics][recompute]") {
  // An independent count: the step's arithmetic with recompute less the
  // same layout's without, which nothing marks.
  std::string path = writeTinyFourLayers();
  for (auto [mode, size] : {std::pair<std::string, int64_t>{"dense", 1},
                            {"ddp", 2},
                            {"tp_sp_async_vp", 2}}) {
    PipelineOptions layout = preset(mode, size);
    RecomputeCost kept = reportedCost(path, layout);
    // The async SP modes' re-gathers are re-run work with no arithmetic.
    REQUIRE(kept.flops == 0);
    REQUIRE((kept.ops > 0) == (mode == "tp_sp_async_vp"));
    for (auto [policy, layers, rest] :
         {std::tuple<std::string, int64_t, std::string>{"full", -1, "none"},
          {"selective", -1, "none"},
          {"full", 2, "selective"}}) {
      INFO(mode << ": " << policy << " " << layers << ", rest " << rest);
      layout.recompute = policy;
      layout.recomputeLayers = layers;
      layout.recomputeRest = rest;
      RecomputeCost rerun = reportedCost(path, layout);
      REQUIRE(rerun.ops > kept.ops);
      REQUIRE(rerun.flops > 0);
      REQUIRE(rerun.flops == rerun.stepFlops - kept.stepFlops);
      REQUIRE(rerun.seconds > 0);
    }
  }
  std::filesystem::remove(path);
}
