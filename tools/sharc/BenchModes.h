//===- BenchModes.h - `sharc bench`'s modes and their layouts ---*- C++ -*-===//
// defines: ModeSpec, findMode, modeNames, modeWorldSize, resolveMode,
//          checkModes, pipelineOptionsOf
//
// The original's modes table (seed-system.md, 3.3): each mode names a
// runner (ddp, tp or general), the axes it includes (a size comes from the
// command line for those, else 1) and its features (fixed, or the
// command line's for tp and the tp topologies). A point's compile options
// are built from these sizes directly, not from `sharc compile`'s presets,
// so the bench states every size it compiles with.
//
//   const ModeSpec *spec = findMode("tp_cp_pp"); // null: unknown
//   std::string error = checkModes(config);      // the original's checks
//   resolveMode(config, *spec, ddpWorld, point); // sizes, features, batch
//   PipelineOptions options = pipelineOptionsOf(config, point);
#pragma once

#include "tools/sharc/BenchSweep.h"

#include <string>

namespace sharc {
struct PipelineOptions; // passes/Passes.h
} // namespace sharc

namespace sharc::bench {

struct ModeSpec {
  const char *name, *label, *runner;
  bool hasTp, hasCp, hasPp; ///< the axes whose sizes it takes
  bool cliFeatures;         ///< takes --sequence_parallel and the others
  bool sp, async, vp;       ///< its fixed features
};

/// The mode of that name, or null.
const ModeSpec *findMode(const std::string &name);
/// Every mode's name, space-separated, for messages.
std::string modeNames();

/// The ranks a mode other than ddp runs on: T x C x P of its axes.
int64_t modeWorldSize(const BenchConfig &config, const ModeSpec &spec);

/// Fills the point's sizes, features, runner, world (`ddpWorld` for ddp)
/// and batch (3.4, and the plan's microbatches).
void resolveMode(const BenchConfig &config, const ModeSpec &spec,
                 int64_t ddpWorld, BenchPoint &point);

/// The world ddp runs on: the other modes' one world, or T x C x P of the
/// command line when ddp runs alone (pp_size only when given).
int64_t ddpWorldSize(const BenchConfig &config);

/// The original's checks on modes, sizes and sequence lengths (3.2), made
/// before any point compiles; the first problem, or "".
std::string checkModes(const BenchConfig &config);

/// The compile options of a resolved point.
PipelineOptions pipelineOptionsOf(const BenchConfig &config,
                                  const BenchPoint &point);

} // namespace sharc::bench
