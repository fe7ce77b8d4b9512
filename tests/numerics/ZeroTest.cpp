//===- ZeroTest.cpp - ZeRO-1 and ZeRO-3: state and parameters over dp -----===//
//
// `--zero 1` (sharc-shard-optimizer) reduce-scatters each data-parallel
// gradient, updates one block of the parameter a rank with moments of that
// block alone, and all-gathers the blocks; `--zero 3`
// (sharc-shard-parameters) keeps the parameter itself as the block and
// gathers it before each op that reads it. The reference is the same layout
// without it (the all_reduce and whole updates) and the dense step: from
// the same weights on the same tokens every loss, parameter and moment must
// agree, with fused projections (a fused weight's pieces cut apart before
// the sync, gathered into one buffer's rows), beside tensor parallelism
// (blocks inside the column-parallel weights' tp shards), on pipeline
// stages (each stage's buckets and gathers apart), with clipping (each
// block counted once in the global norm), over microbatches and under
// bf16-mixed (a master of the block). A checkpoint of either loads into
// the unsharded plan and back, and the plan holds one block a rank.
//
//===----------------------------------------------------------------------===//

#include "planner/MemoryReport.h"
#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <set>

using namespace sharc;
using namespace sharc::testing;

namespace {

constexpr int kSteps = 4;

PipelineOptions ddpLayout(int64_t zeroStage, int64_t tpSize = 1) {
  PipelineOptions layout;
  layout.dpSize = 2;
  layout.tpSize = tpSize;
  layout.zeroStage = zeroStage;
  return layout;
}

std::vector<int32_t> randomTokens(const plan::Plan &plan, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> tokens(plan.batchSize * plan.seqLen);
  for (int32_t &id : tokens)
    id = static_cast<int32_t>(rng() % plan.vocabSize);
  return tokens;
}

/// Trains `plan` from weights of seed 7 for `steps` steps on batches of
/// seeds 11, 12, ...; returns the runtime for its parameters and state.
std::unique_ptr<exec::Runtime> train(const plan::Plan &plan, int steps,
                                     std::vector<double> *losses = nullptr) {
  auto runtime = makeRuntime(plan);
  REQUIRE(runtime->initParams(7).isOk());
  for (int step = 0; step < steps; ++step) {
    REQUIRE(runtime->setBatch(randomTokens(plan, 11 + step)).isOk());
    auto stats = runtime->step();
    REQUIRE(stats.isOk());
    if (losses)
      losses->push_back(stats->loss);
  }
  return runtime;
}

/// Every tensor of `reference` in `actual` within `tolerance` of the
/// reference's largest element; returns how many.
int requireTensorsClose(const plan::TensorFile &actual,
                        const plan::TensorFile &reference, double tolerance) {
  int compared = 0;
  for (const plan::NamedTensor &want : reference.tensors) {
    const plan::NamedTensor *have = actual.find(want.name);
    INFO(want.name);
    REQUIRE(have);
    REQUIRE(have->shape == want.shape);
    std::vector<double> expected = valuesOf(want);
    REQUIRE(maxAbsError(valuesOf(*have), expected) <=
            tolerance * std::max(maxAbs(expected), 1e-30));
    ++compared;
  }
  return compared;
}

/// The sharded plan against the same layout without ZeRO: losses,
/// parameters and both moments after kSteps steps.
void requireShardedLikeWhole(const plan::Plan &sharded, const plan::Plan &whole,
                             double tolerance) {
  std::vector<double> shardedLosses, wholeLosses;
  auto a = train(sharded, kSteps, &shardedLosses);
  auto b = train(whole, kSteps, &wholeLosses);
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step << ": " << shardedLosses[step] << " vs "
                 << wholeLosses[step]);
    REQUIRE(std::abs(shardedLosses[step] - wholeLosses[step]) <=
            1e-5 * std::abs(wholeLosses[step]));
  }
  auto params = a->gatherParams(), wholeParams = b->gatherParams();
  auto state = a->gatherOptimizerState(),
       wholeState = b->gatherOptimizerState();
  REQUIRE(params.isOk());
  REQUIRE(wholeParams.isOk());
  REQUIRE(state.isOk());
  REQUIRE(wholeState.isOk());
  REQUIRE(requireTensorsClose(*params, *wholeParams, tolerance) ==
          static_cast<int>(wholeParams->tensors.size()));
  REQUIRE(requireTensorsClose(*state, *wholeState, tolerance) ==
          static_cast<int>(wholeState->tensors.size()));
  REQUIRE(wholeState->tensors.size() == 2 * wholeParams->tensors.size());
}

int64_t regionBytes(const plan::Plan &plan, plan::Region region) {
  auto it = plan.regionBytes.find(region);
  return it == plan.regionBytes.end() ? 0 : it->second;
}

/// How many parameters keep the state of one block a rank.
int countShardedState(const plan::Plan &plan) {
  int count = 0;
  for (const plan::ParamEntry &param : plan.params)
    if (param.stateSharding) {
      auto dim = param.stateSharding->dimOfAxis.find("dp");
      REQUIRE(dim != param.stateSharding->dimOfAxis.end());
      REQUIRE(dim->second >= 0);
      ++count;
    }
  return count;
}

/// How many parameters a rank keeps one dp block of (ZeRO-3), their
/// state split alike.
int countShardedParams(const plan::Plan &plan) {
  int count = 0;
  for (const plan::ParamEntry &param : plan.params) {
    auto dp = param.sharding.dimOfAxis.find("dp");
    if (dp == param.sharding.dimOfAxis.end() || dp->second < 0)
      continue;
    REQUIRE(dp->second == 0);
    REQUIRE(!param.stateSharding); // the state follows the parameter
    ++count;
  }
  return count;
}

/// The gathers of parameters a step issues: (instructions, members).
std::pair<int, int> parameterGathers(const plan::Plan &plan) {
  std::set<int64_t> params;
  for (const plan::ParamEntry &param : plan.params)
    params.insert(param.buffer);
  int instructions = 0, members = 0;
  for (const plan::Instruction &instr : plan.instructions) {
    if (instr.op != "all_gather" && instr.op != "all_gather_coalesced")
      continue;
    int read = static_cast<int>(
        std::count_if(instr.operands.begin(), instr.operands.end(),
                      [&](int64_t id) { return params.count(id) > 0; }));
    instructions += read > 0;
    members += read;
  }
  return {instructions, members};
}

/// `layout` and the dense plan (of `runFile`, if given) train alike from
/// the same weights: losses, and parameters by the mean. With clipping's
/// run file, three steps in which clipping acts, the global norms within
/// 1e-5 (each block counted once).
void requireTrainsAsDense(const PipelineOptions &layout,
                          const std::string &runFile = "") {
  int steps = runFile.empty() ? 5 : 3;
  TrainedRun zero = trainOnRandomTokens(
      compilePlan("tiny.yaml", layout, false, runFile), steps, 7, 11);
  TrainedRun dense = trainOnRandomTokens(
      compilePlan("tiny.yaml", false, true, runFile), steps, 7, 11);
  if (!runFile.empty())
    for (int step = 0; step < steps; ++step) {
      INFO("step " << step << ": norm " << zero.gradNorms[step] << " vs "
                   << dense.gradNorms[step]);
      REQUIRE(dense.gradNorms[step] > 0.2); // clipping acts
      REQUIRE(std::abs(zero.gradNorms[step] - dense.gradNorms[step]) <=
              1e-5 * dense.gradNorms[step]);
    }
  requireLossesMatch(zero, dense);
  requireParamsMatchByMean(zero, dense);
}

/// Trains `source` two steps and checkpoints it; plans of each ZeRO stage
/// in `stages` load the checkpoint and, beside the source run itself, take
/// two more steps: every parameter and moment must agree.
void requireResumes(const plan::Plan &source,
                    std::initializer_list<int64_t> stages, int64_t tpSize = 1) {
  auto trained = train(source, 2);
  auto params = trained->gatherParams();
  auto state = trained->gatherOptimizerState();
  REQUIRE(params.isOk());
  REQUIRE(state.isOk());
  std::vector<std::unique_ptr<exec::Runtime>> resumed;
  for (int64_t zeroStage : stages) {
    auto runtime = makeRuntime(
        compilePlan("tiny.yaml", ddpLayout(zeroStage, tpSize), false));
    REQUIRE(runtime->loadParams(*params).isOk());
    REQUIRE(runtime->loadOptimizerState(*state).isOk());
    runtime->setNextStep(3);
    resumed.push_back(std::move(runtime));
  }
  resumed.push_back(std::move(trained));
  for (auto &runtime : resumed)
    for (int step = 2; step < 4; ++step) {
      REQUIRE(runtime->setBatch(randomTokens(source, 11 + step)).isOk());
      REQUIRE(runtime->step().isOk());
    }
  auto reference = resumed.back()->gatherOptimizerState();
  auto referenceParams = resumed.back()->gatherParams();
  REQUIRE(reference.isOk());
  REQUIRE(referenceParams.isOk());
  for (size_t i = 0; i + 1 < resumed.size(); ++i) {
    INFO("resumed on ZeRO stage " << std::data(stages)[i]);
    auto moments = resumed[i]->gatherOptimizerState();
    auto weights = resumed[i]->gatherParams();
    REQUIRE(moments.isOk());
    REQUIRE(weights.isOk());
    requireTensorsClose(*moments, *reference, 1e-6);
    requireTensorsClose(*weights, *referenceParams, 1e-6);
  }
}

} // namespace

TEST_CASE("ZeRO-1 under ddp trains as ddp and as dense", "[numerics][zero]") {
  plan::Plan sharded = compilePlan("tiny.yaml", ddpLayout(1), false);
  plan::Plan whole = compilePlan("tiny.yaml", ddpLayout(0), false);
  // Every parameter of tiny.yaml has a dimension dp divides.
  REQUIRE(countShardedState(sharded) ==
          static_cast<int>(sharded.params.size()));
  REQUIRE(countShardedState(whole) == 0);
  // The small model is one bucket: one reduce_scatter_coalesced and one
  // all_gather_coalesced of a member per parameter.
  auto members = [](const plan::Plan &plan, const std::string &op) {
    std::vector<size_t> counts;
    for (const plan::Instruction &instr : plan.instructions)
      if (instr.op == op)
        counts.push_back(instr.operands.size());
    return counts;
  };
  std::vector<size_t> one{sharded.params.size()};
  REQUIRE(members(sharded, "reduce_scatter_coalesced") == one);
  REQUIRE(members(sharded, "all_gather_coalesced") == one);
  REQUIRE(members(sharded, "reduce_scatter").empty());
  // Summing the same two shares in the same order: ddp's numbers.
  requireShardedLikeWhole(sharded, whole, 1e-6);

  // Buckets of 40 KB: several groups, each where its last gradient is
  // ready; the same numbers.
  PipelineOptions small = ddpLayout(1);
  small.bucketBytes = 40 << 10;
  plan::Plan buckets = compilePlan("tiny.yaml", small, false);
  std::vector<size_t> scatters = members(buckets, "reduce_scatter_coalesced");
  INFO(scatters.size() << " buckets");
  REQUIRE(scatters.size() >= 3);
  REQUIRE(members(buckets, "all_gather_coalesced").size() +
              members(buckets, "all_gather").size() ==
          scatters.size() + members(buckets, "reduce_scatter").size());
  requireShardedLikeWhole(buckets, whole, 1e-6);

  requireTrainsAsDense(ddpLayout(1));
}

TEST_CASE("ZeRO-1 with fused projections, beside tp and with clipping",
          "[numerics][zero]") {
  SECTION("fused q/k/v and gate/up weights") {
    PipelineOptions sharded = ddpLayout(1), whole = ddpLayout(0);
    sharded.fuseProjections = whole.fuseProjections = true;
    requireShardedLikeWhole(compilePlan("tiny.yaml", sharded, false),
                            compilePlan("tiny.yaml", whole, false), 1e-6);
  }
  SECTION("dp=2 x tp=2: a column-parallel weight's block inside its tp shard") {
    for (bool fused : {false, true}) {
      INFO((fused ? "fused" : "separate") << " projections");
      PipelineOptions layout = ddpLayout(1, 2), wholeLayout = ddpLayout(0, 2);
      layout.fuseProjections = wholeLayout.fuseProjections = fused;
      plan::Plan sharded = compilePlan("tiny.yaml", layout, false);
      // Every parameter: the column-parallel weights' dim 0, which tp
      // splits, is split again over dp inside it, which the plan states.
      REQUIRE(countShardedState(sharded) ==
              static_cast<int>(sharded.params.size()));
      int nested = 0;
      for (const plan::ParamEntry &param : sharded.params) {
        auto tp = param.sharding.dimOfAxis.find("tp");
        if (tp == param.sharding.dimOfAxis.end() || tp->second != 0)
          continue;
        REQUIRE(param.stateSharding->dimOfAxis.at("dp") == 0);
        REQUIRE(param.stateSharding->order ==
                std::vector<std::string>{"tp", "dp"});
        ++nested;
      }
      REQUIRE(nested >= 10); // q, k, v, gate, up of both layers
      requireShardedLikeWhole(
          sharded, compilePlan("tiny.yaml", wholeLayout, false), 1e-6);
    }
  }
  SECTION("syncs over dp and another axis: dp=2 x cp=2, tp_sp_async_vp x dp") {
    // The gradient is summed over cp (or a norm weight's over tp) in an
    // all_reduce_coalesced, then reduce-scattered over dp.
    PipelineOptions cp = ddpLayout(1), cpWhole = ddpLayout(0);
    cp.cpSize = cpWhole.cpSize = 2;
    plan::Plan cpSharded = compilePlan("tiny.yaml", cp, false);
    REQUIRE(countShardedState(cpSharded) ==
            static_cast<int>(cpSharded.params.size()));
    // Summed over cp, then over dp, where the unsharded plan sums over both
    // at once: fp32 sums in another order, which Adam's first steps
    // amplify in near-zero gradients (3e-7 of the largest weight here).
    requireShardedLikeWhole(cpSharded, compilePlan("tiny.yaml", cpWhole, false),
                            1e-4);
    PipelineOptions tp = ddpLayout(1, 2), tpWhole = ddpLayout(0, 2);
    REQUIRE(applyModePreset("tp_sp_async_vp", 2, tp));
    REQUIRE(applyModePreset("tp_sp_async_vp", 2, tpWhole));
    plan::Plan tpSharded = compilePlan("tiny.yaml", tp, false);
    bool normSharded = false;
    for (const plan::ParamEntry &param : tpSharded.params)
      normSharded |= param.name.find("norm") != std::string::npos &&
                     param.stateSharding.has_value();
    REQUIRE(normSharded);
    requireShardedLikeWhole(tpSharded, compilePlan("tiny.yaml", tpWhole, false),
                            1e-4);
    // Fused weights in small buckets: a fused gradient is summed over cp
    // once, and its pieces stay in that sum's bucket.
    cp.fuseProjections = cpWhole.fuseProjections = true;
    cp.bucketBytes = cpWhole.bucketBytes = 20 << 10;
    requireShardedLikeWhole(compilePlan("tiny.yaml", cp, false),
                            compilePlan("tiny.yaml", cpWhole, false), 1e-4);
  }
  SECTION("clipping counts each block once") {
    requireTrainsAsDense(ddpLayout(1), "tiny-clip.run.yaml");
  }
}

TEST_CASE("ZeRO-1 and ZeRO-3 on pipeline stages: dp=2 x pp=2",
          "[numerics][zero]") {
  // Each stage's blocks bucket apart (the stages run on their own ranks),
  // and under interleaving each model chunk's.
  for (const char *schedule : {"gpipe", "1f1b", "interleaved"}) {
    INFO(schedule);
    auto layout = [&](int64_t zeroStage) {
      PipelineOptions options = ddpLayout(zeroStage);
      options.ppSize = 2;
      options.ppSchedule = schedule;
      options.ppChunks = std::string(schedule) == "interleaved" ? 2 : 1;
      options.bucketBytes = 16 << 10; // several buckets a stage
      return compileEdited("tiny.yaml",
                           {{"num_hidden_layers: 2", "num_hidden_layers: 4"},
                            {"micro_batch_size: 2",
                             "micro_batch_size: 2\n  num_microbatches: 2"}},
                           options, false);
    };
    plan::Plan sharded = layout(1);
    REQUIRE(sharded.worldSize() == 4);
    REQUIRE(countShardedState(sharded) ==
            static_cast<int>(sharded.params.size()));
    int buckets = 0;
    for (const plan::Instruction &instr : sharded.instructions) {
      if (instr.op != "reduce_scatter_coalesced")
        continue;
      ++buckets;
      REQUIRE(instr.stage >= 0); // each on one stage's ranks
    }
    REQUIRE(buckets >= 4);
    plan::Plan whole = layout(0);
    requireShardedLikeWhole(sharded, whole, 1e-6);
    // ZeRO-3: each stage gathers its own parameters, in its own groups,
    // at the steps of its schedule that read them.
    plan::Plan three = layout(3);
    REQUIRE(countShardedParams(three) == static_cast<int>(three.params.size()));
    for (const plan::Instruction &instr : three.instructions)
      if (instr.op == "all_gather_coalesced" || instr.op == "all_gather")
        REQUIRE(instr.stage >= 0);
    requireShardedLikeWhole(three, whole, 1e-6);
  }
}

TEST_CASE("ZeRO-1 keeps the moments of one block a rank", "[numerics][zero]") {
  plan::Plan sharded = compilePlan("tiny.yaml", ddpLayout(1), false);
  plan::Plan whole = compilePlan("tiny.yaml", ddpLayout(0), false);
  int64_t state = 0;
  for (const plan::ParamEntry &param : whole.params)
    for (int64_t id : param.state)
      state += whole.buffers[id].numBytes;
  REQUIRE(state > 0);
  // Half of each moment a rank (region alignment aside).
  REQUIRE(regionBytes(whole, plan::Region::OptState) >= state);
  REQUIRE(regionBytes(sharded, plan::Region::OptState) <= state / 2 + 4096);
  REQUIRE(regionBytes(sharded, plan::Region::Param) ==
          regionBytes(whole, plan::Region::Param));
  // The report says how many parameters keep a block.
  MemoryReport report = buildMemoryReport(sharded);
  REQUIRE(report.numShardedStates ==
          static_cast<int64_t>(sharded.params.size()));
  REQUIRE(report.optimizerBytes ==
          regionBytes(sharded, plan::Region::OptState));
  std::string text = formatReport(sharded, report);
  INFO(text);
  REQUIRE(text.find("ZeRO-1: " + std::to_string(sharded.params.size()) +
                    " of " + std::to_string(sharded.params.size()) +
                    " parameters keep one block a dp rank") !=
          std::string::npos);
  REQUIRE(buildMemoryReport(whole).numShardedStates == 0);
}

TEST_CASE("a ZeRO-1 checkpoint resumes on either layout", "[numerics][zero]") {
  requireResumes(compilePlan("tiny.yaml", ddpLayout(1), false), {0, 1});
}

TEST_CASE("ZeRO-1 under bf16-mixed keeps a master of the block",
          "[numerics][zero]") {
  auto mixed = [](int64_t zeroStage) {
    return compileEdited("tiny.yaml", {{"dtype: float32", "dtype: bf16-mixed"}},
                         ddpLayout(zeroStage));
  };
  plan::Plan sharded = mixed(1), whole = mixed(0);
  for (const plan::ParamEntry &param : sharded.params) {
    REQUIRE(param.state.size() == 3); // m, v, master
    REQUIRE(param.stateSharding);
  }
  // The master is the parameter in a checkpoint: gatherParams reads it.
  requireShardedLikeWhole(sharded, whole, 1e-6);
}

TEST_CASE("ZeRO-3 keeps each parameter as one block and trains as ddp",
          "[numerics][zero]") {
  for (bool fused : {false, true}) {
    INFO((fused ? "fused" : "separate") << " projections");
    PipelineOptions layout = ddpLayout(3), wholeLayout = ddpLayout(0);
    layout.fuseProjections = wholeLayout.fuseProjections = fused;
    plan::Plan sharded = compilePlan("tiny.yaml", layout, false);
    plan::Plan whole = compilePlan("tiny.yaml", wholeLayout, false);
    REQUIRE(countShardedParams(sharded) ==
            static_cast<int>(sharded.params.size()));
    // Half of every parameter a rank, and half of every moment.
    REQUIRE(regionBytes(sharded, plan::Region::Param) <=
            regionBytes(whole, plan::Region::Param) / 2 + 4096);
    REQUIRE(regionBytes(sharded, plan::Region::OptState) <=
            regionBytes(whole, plan::Region::OptState) / 2 + 4096);
    // No update is gathered back: the parameters are read through gathers
    // alone, each member at least once.
    auto [gathers, members] = parameterGathers(sharded);
    REQUIRE(gathers >= 1);
    REQUIRE(members >= static_cast<int>(sharded.params.size()));
    requireShardedLikeWhole(sharded, whole, 1e-6);

    // Groups of 20 KB: gathers a layer ahead, forward and backward apart.
    layout.bucketBytes = 20 << 10;
    plan::Plan groups = compilePlan("tiny.yaml", layout, false);
    auto [groupGathers, groupMembers] = parameterGathers(groups);
    INFO(groupGathers << " gathers of " << groupMembers << " members");
    REQUIRE(groupGathers >= 4);
    REQUIRE(groupMembers > static_cast<int>(groups.params.size()));
    requireShardedLikeWhole(groups, whole, 1e-6);
  }
  MemoryReport report =
      buildMemoryReport(compilePlan("tiny.yaml", ddpLayout(3), false));
  REQUIRE(report.numShardedParams == report.numParams);
  REQUIRE(report.numShardedStates == 0);

  requireTrainsAsDense(ddpLayout(3));
}

TEST_CASE("ZeRO-3 beside tp and cp, over microbatches, tied and clipped",
          "[numerics][zero]") {
  SECTION("dp=2 x tp=2: column-parallel weights a block of their tp shard") {
    for (bool fused : {false, true}) {
      INFO((fused ? "fused" : "separate") << " projections");
      PipelineOptions layout = ddpLayout(3, 2), wholeLayout = ddpLayout(0, 2);
      layout.fuseProjections = wholeLayout.fuseProjections = fused;
      plan::Plan sharded = compilePlan("tiny.yaml", layout, false);
      REQUIRE(countShardedParams(sharded) ==
              static_cast<int>(sharded.params.size()));
      requireShardedLikeWhole(
          sharded, compilePlan("tiny.yaml", wholeLayout, false), 1e-6);
    }
  }
  SECTION("dp=2 x cp=2 with fused projections in small groups") {
    PipelineOptions cp = ddpLayout(3), cpWhole = ddpLayout(0);
    cp.cpSize = cpWhole.cpSize = 2;
    cp.fuseProjections = cpWhole.fuseProjections = true;
    cp.bucketBytes = cpWhole.bucketBytes = 20 << 10;
    plan::Plan sharded = compilePlan("tiny.yaml", cp, false);
    REQUIRE(countShardedParams(sharded) ==
            static_cast<int>(sharded.params.size()));
    // Summed over cp, then over dp (see ZeRO-1's case): 1e-4.
    requireShardedLikeWhole(sharded, compilePlan("tiny.yaml", cpWhole, false),
                            1e-4);
  }
  SECTION("two microbatches: in small groups, gathered again for each") {
    auto layout = [](int64_t zeroStage) {
      PipelineOptions options = ddpLayout(zeroStage);
      options.bucketBytes = 20 << 10;
      return compileEdited("tiny.yaml",
                           {{"micro_batch_size: 2",
                             "micro_batch_size: 2\n  num_microbatches: 2"}},
                           options, false);
    };
    plan::Plan sharded = layout(3);
    auto [gathers, members] = parameterGathers(sharded);
    REQUIRE(members >= 2 * static_cast<int>(sharded.params.size()));
    requireShardedLikeWhole(sharded, layout(0), 1e-6);
  }
  SECTION("tied embeddings: one block read by the embedding and the head") {
    plan::Plan sharded = compilePlan("tiny-tied.yaml", ddpLayout(3), false);
    REQUIRE(countShardedParams(sharded) ==
            static_cast<int>(sharded.params.size()));
    requireShardedLikeWhole(
        sharded, compilePlan("tiny-tied.yaml", ddpLayout(0), false), 1e-6);
  }
  SECTION("clipping counts each block once") {
    requireTrainsAsDense(ddpLayout(3), "tiny-clip.run.yaml");
  }
  SECTION("bf16-mixed: the bf16 block and its fp32 master") {
    auto mixed = [](int64_t zeroStage) {
      return compileEdited("tiny.yaml",
                           {{"dtype: float32", "dtype: bf16-mixed"}},
                           ddpLayout(zeroStage));
    };
    plan::Plan sharded = mixed(3);
    REQUIRE(countShardedParams(sharded) ==
            static_cast<int>(sharded.params.size()));
    requireShardedLikeWhole(sharded, mixed(0), 1e-6);
  }
}

TEST_CASE("a ZeRO-3 checkpoint resumes on ddp and on ZeRO-1",
          "[numerics][zero]") {
  requireResumes(compilePlan("tiny.yaml", ddpLayout(3), false), {0, 1, 3});
  // Beside tp: blocks inside the column-parallel weights' tp shards.
  requireResumes(compilePlan("tiny.yaml", ddpLayout(3, 2), false), {0, 1, 3},
                 2);
}
