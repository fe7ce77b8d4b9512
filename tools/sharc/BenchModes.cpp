//===- BenchModes.cpp - `sharc bench`'s modes and their layouts -----------===//
//
// The original resolves each mode to (runner, P, T, C, features, world);
// its general runner always goes through the pipeline schedule and
// microbatches (B_model = micro_batch_size x num_microbatches, split into
// num_microbatches), while its ddp and tp runners run their batch in one
// pass. The plans here do the same, so a row means what the original's row
// means (seed-system.md 3.5, and 8.7 on comparing tp with the general
// runner).
//
//===----------------------------------------------------------------------===//

#include "tools/sharc/BenchModes.h"
#include "passes/Passes.h"

#include <algorithm>
#include <array>
#include <set>

namespace sharc::bench {
namespace {

// name, label, runner, tp, cp, pp, features from the command line, sp,
// async, vp (seed-system.md, 3.3; "config" is not offered).
constexpr std::array<ModeSpec, 12> kModes = {{
    {"ddp", "DDP", "ddp", false, false, false, false, false, false, false},
    {"tp", "TP", "tp", true, false, false, true, false, false, false},
    {"tp_sp", "TP + SP", "tp", true, false, false, false, true, false, false},
    {"tp_sp_async", "TP + SP + Async", "tp", true, false, false, false, true,
     true, false},
    {"tp_vp", "TP + VP", "tp", true, false, false, false, false, false, true},
    {"tp_sp_async_vp", "TP + SP + Async + VP", "tp", true, false, false, false,
     true, true, true},
    {"cp", "CP", "general", false, true, false, false, false, false, false},
    {"pp", "PP", "general", false, false, true, false, false, false, false},
    {"tp_cp", "TP x CP", "general", true, true, false, true, false, false,
     false},
    {"tp_pp", "TP x PP", "general", true, false, true, true, false, false,
     false},
    {"pp_cp", "PP x CP", "general", false, true, true, false, false, false,
     false},
    {"tp_cp_pp", "TP x CP x PP", "general", true, true, true, true, false,
     false, false},
}};

int64_t ppSizeOf(const BenchConfig &config) {
  return config.ppSize.value_or(2);
}

bool sequenceParallelOf(const BenchConfig &config, const ModeSpec &spec) {
  return spec.cliFeatures ? config.sequenceParallel : spec.sp;
}

std::string str(int64_t value) { return std::to_string(value); }

/// Checks on the sizes and schedule flags themselves; the first problem.
std::string checkSizes(const BenchConfig &c, bool hasTp, bool hasCp,
                       bool hasPp) {
  if (c.cpCommType != "all_gather" && c.cpCommType != "a2a")
    return "--cp_comm_type takes all_gather or a2a, not '" + c.cpCommType + "'";
  if (c.ppSchedule != "gpipe" && c.ppSchedule != "1f1b" &&
      c.ppSchedule != "interleaved")
    return "--pp_schedule takes gpipe, 1f1b or interleaved, not '" +
           c.ppSchedule + "'";
  if (c.virtualStages &&
      (c.ppSchedule != "interleaved" || *c.virtualStages < 2))
    return "--virtual_stages V takes V >= 2 with --pp_schedule interleaved";
  if (hasTp && c.tpSize < 2)
    return "tensor-parallel modes need --tp_size of at least 2";
  // The original: cp_size != 1 needs its cp flag; here a cp mode needs
  // the size.
  if (hasCp && c.cpSize < 2)
    return "context-parallel modes need --cp_size of at least 2";
  if (hasPp && ppSizeOf(c) < 2)
    return "pipeline modes need --pp_size of at least 2";
  if (!hasPp)
    return "";
  int64_t chunks =
      c.ppSchedule == "interleaved" ? c.virtualStages.value_or(2) : 1;
  int64_t fewest =
      *std::min_element(c.numHiddenLayers.begin(), c.numHiddenLayers.end());
  if (fewest < ppSizeOf(c) * chunks)
    return "pipeline modes need at least " +
           (chunks > 1
                ? "pp_size x virtual_stages (" + str(ppSizeOf(c) * chunks) + ")"
                : "pp_size (" + str(ppSizeOf(c)) + ")") +
           " layers; the smallest --num_hidden_layers is " + str(fewest);
  if (chunks > 1 && c.numMicrobatches % ppSizeOf(c) != 0)
    return "--pp_schedule interleaved needs --num_microbatches (" +
           str(c.numMicrobatches) + ") a multiple of --pp_size (" +
           str(ppSizeOf(c)) + ")";
  return "";
}

} // namespace

const ModeSpec *findMode(const std::string &name) {
  for (const ModeSpec &spec : kModes)
    if (name == spec.name)
      return &spec;
  return nullptr;
}

std::string modeNames() {
  std::string names;
  for (const ModeSpec &spec : kModes)
    names += (names.empty() ? "" : " ") + std::string(spec.name);
  return names;
}

int64_t modeWorldSize(const BenchConfig &config, const ModeSpec &spec) {
  return (spec.hasTp ? config.tpSize : 1) * (spec.hasCp ? config.cpSize : 1) *
         (spec.hasPp ? ppSizeOf(config) : 1);
}

int64_t ddpWorldSize(const BenchConfig &config) {
  for (const std::string &mode : config.modes)
    if (const ModeSpec *spec = findMode(mode); spec && mode != "ddp")
      return modeWorldSize(config, *spec);
  return config.tpSize * config.cpSize * config.ppSize.value_or(1);
}

void resolveMode(const BenchConfig &config, const ModeSpec &spec,
                 int64_t ddpWorld, BenchPoint &point) {
  point.mode = spec.name;
  point.label = spec.label;
  point.runner = spec.runner;
  point.tpSize = spec.hasTp ? config.tpSize : 1;
  point.cpSize = spec.hasCp ? config.cpSize : 1;
  point.ppSize = spec.hasPp ? ppSizeOf(config) : 1;
  point.cpCommType = spec.hasCp ? config.cpCommType : "";
  point.sequenceParallel = sequenceParallelOf(config, spec);
  point.asyncCommunication =
      spec.cliFeatures ? config.asyncCommunication : spec.async;
  point.vocabParallel = spec.cliFeatures ? config.vocabParallel : spec.vp;
  bool general = point.runner == "general";
  point.ppSchedule = general ? config.ppSchedule : "none";
  point.virtualStages = point.ppSize > 1 && config.ppSchedule == "interleaved"
                            ? config.virtualStages.value_or(2)
                            : 1;
  point.worldSize =
      point.mode == "ddp" ? ddpWorld : modeWorldSize(config, spec);
  int64_t modelBatch = config.microBatchSize * config.numMicrobatches;
  point.modelBatchSize = modelBatch;
  point.globalBatchSize =
      point.mode == "ddp" && config.batchPolicy == "fixed_per_rank"
          ? modelBatch * point.worldSize
          : modelBatch;
  point.microBatchSize =
      general ? config.microBatchSize : point.globalBatchSize;
  point.numMicrobatches = general ? config.numMicrobatches : 1;
}

std::string checkModes(const BenchConfig &c) {
  if (c.modes.empty())
    return "--modes needs at least one mode";
  std::set<std::string> seen;
  bool hasTp = false, hasCp = false, hasPp = false;
  for (const std::string &mode : c.modes) {
    const ModeSpec *spec = findMode(mode);
    if (!spec)
      return "unknown mode '" + mode + "' (expected " + modeNames() + ")";
    if (!seen.insert(mode).second)
      return "mode '" + mode + "' given twice";
    hasTp |= spec->hasTp;
    hasCp |= spec->hasCp;
    hasPp |= spec->hasPp;
  }
  if (std::string error = checkSizes(c, hasTp, hasCp, hasPp); !error.empty())
    return error;
  for (int64_t seqLen : c.seqLens)
    for (const std::string &mode : c.modes) {
      const ModeSpec &spec = *findMode(mode);
      int64_t cp = spec.hasCp ? c.cpSize : 1;
      int64_t tp = spec.hasTp ? c.tpSize : 1;
      if (seqLen % cp != 0)
        return "mode " + mode + " needs seq_len (" + str(seqLen) +
               ") divisible by cp_size (" + str(cp) + ")";
      if (sequenceParallelOf(c, spec) && seqLen % (cp * tp) != 0)
        return "mode " + mode + " needs seq_len (" + str(seqLen) +
               ") divisible by " +
               (cp > 1 ? "cp_size x tp_size (" + str(cp * tp) + ")"
                       : "tp_size (" + str(tp) + ")");
    }
  if (!seen.count("ddp"))
    return "";
  // DDP runs on the others' world, which must then be one (3.3).
  int64_t world = ddpWorldSize(c);
  for (const std::string &mode : c.modes)
    if (mode != "ddp" && modeWorldSize(c, *findMode(mode)) != world)
      return "ddp runs on the other modes' world size, but they differ: " +
             c.modes[c.modes.front() == "ddp" ? 1 : 0] + " needs " +
             str(world) + " ranks, " + mode + " " +
             str(modeWorldSize(c, *findMode(mode)));
  int64_t modelBatch = c.microBatchSize * c.numMicrobatches;
  if (c.batchPolicy == "fixed_global" && modelBatch % world != 0)
    return "ddp with fixed_global needs micro_batch_size * num_microbatches "
           "(" +
           str(modelBatch) + ") divisible by the world size (" + str(world) +
           ")";
  return "";
}

PipelineOptions pipelineOptionsOf(const BenchConfig &config,
                                  const BenchPoint &point) {
  PipelineOptions options;
  if (point.mode == "ddp")
    options.dpSize = point.worldSize;
  options.tpSize = point.tpSize;
  options.cpSize = point.cpSize;
  if (point.cpSize > 1)
    options.cpComm = point.cpCommType;
  options.ppSize = point.ppSize;
  if (point.ppSize > 1) {
    options.ppSchedule = config.ppSchedule;
    options.ppChunks = point.virtualStages;
  }
  options.sequenceParallel = point.sequenceParallel;
  options.vocabParallel = point.vocabParallel;
  // The original's async flag is the overlap (always the planner's here)
  // and, under SP, the backward's re-gather of column inputs.
  if (point.sequenceParallel && point.asyncCommunication)
    options.recompute = "sp-allgather";
  // Full recompute re-gathers the SP inputs too, with the rest of a layer;
  // selective adds the re-gather under SP (Pipelines.cpp).
  if (config.recompute != "none" && config.recompute != "auto")
    options.recompute = config.recompute;
  options.fuseAdds = config.fuseAdds;
  options.fuseNormRope = config.fuseNormRope;
  options.fuseProjections = config.fuseProjections != "none";
  if (point.mode == "ddp" && point.worldSize > 1)
    options.zeroStage = config.zeroStage;
  options.fuseAttentionProjections = config.fuseProjections != "gate_up";
  return options;
}

} // namespace sharc::bench
