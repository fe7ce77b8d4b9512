//===- MemoryReport.h - what a plan holds per rank --------------*- C++ -*-===//
// defines: MemoryReport, buildMemoryReport, formatReport,
//          reportJson
//
// Everything here is read off the plan, so the memory of a run is known
// before launch: each region is allocated once and never grows. Parameter
// gradients have an arena of their own, placed by liveness like the
// activations': a gradient exists from its backward op until its AdamW
// update has run (the original frees them between steps, set-to-none). A
// data-parallel bucket is one slab there: its gradients are views into it,
// summed in place by one all_reduce, and slabs take turns in slots.
#pragma once

#include "planner/StepSimulation.h"
#include "planner/plan/Plan.h"

#include <map>
#include <string>

namespace sharc {

struct PipelineReport;

struct MemoryReport {
  int64_t worldSize = 1;
  int64_t parameterBytes = 0, optimizerBytes = 0;
  /// Of optimizerBytes, the fp32 master weights (bf16-mixed): the state
  /// buffers named "master:<param>".
  int64_t masterBytes = 0;
  /// ZeRO-1: parameters whose state is one block a dp rank
  /// (ParamEntry::stateSharding), of all of them.
  int64_t numShardedStates = 0, numParams = 0;
  /// ZeRO-3: parameters a rank keeps one dp block of, state and all.
  int64_t numShardedParams = 0;
  int64_t gradientBytes = 0; ///< the gradient arena
  /// Gradient buckets in the arena: slabs that gradients view, and the
  /// largest one.
  int64_t numSlabs = 0, largestSlabBytes = 0;
  int64_t activationPeakBytes = 0; ///< the arena
  int64_t ioBytes = 0;             ///< inputs and outputs
  int64_t cacheBytes = 0;          ///< generation's key/value cache (--decode)
  int64_t totalBytes = 0; ///< the regions above: what every backend holds
  /// What the CUDA backend adds (cuBLASLt, kernel scratch, staging:
  /// plan/DeviceWorkspace.h); not in totalBytes, none on the cpu.
  int64_t workspaceBytes = 0;
  /// The instruction at which the live activation bytes peak.
  int64_t peakInstruction = -1;
  std::string peakOp, peakLoc;
  int64_t peakLiveBytes = 0;
  /// By mesh axis (a reduction over several names them joined by ','):
  /// the bytes the rank that sends the most over it sends per step, and
  /// its collectives and point-to-point transfers there. A collective
  /// counts its ring algorithm's share; a `send` (pipeline stages) and a
  /// `ring_shift` the rank sends on (ring attention) their whole operand.
  /// Without stages or chains every rank sends alike.
  std::map<std::string, int64_t> commBytesByAxis;
  std::map<std::string, int64_t> collectivesByAxis;
  std::map<std::string, int64_t> transfersByAxis;
  /// Of commBytesByAxis, what that rank's point-to-point transfers send.
  std::map<std::string, int64_t> transferBytesByAxis;
  /// The least any rank sends over the axis (pipeline stages at the ends,
  /// a chain's last rank).
  std::map<std::string, int64_t> leastCommBytesByAxis;
  double predictedStepSeconds = 0; ///< 0 when no cost model was given
  /// What recompute runs again, with a cost model (recomputeCost); ops 0
  /// when nothing is re-run.
  RecomputeCost recompute;
};

MemoryReport buildMemoryReport(const plan::Plan &plan);

/// A human-readable table (MiB).
std::string formatReport(const plan::Plan &plan, const MemoryReport &report);
/// The same as one JSON object, for tools; with a pipeline report that has
/// stages, its object (StageMemory.h) under "pipeline" as well.
std::string reportJson(const plan::Plan &plan, const MemoryReport &report,
                       const PipelineReport *pipeline = nullptr);

} // namespace sharc
