//===- StageMemory.h - memory and bubble of each pipeline stage -*- C++ -*-===//
// defines: StageMemory, PipelineReport, buildPipelineReport,
//          formatPipelineReport, pipelineReportJson
//
// A pipelined plan's ranks each run one stage (Instruction::stage). The
// arenas are shared by the stages (each rank's is the largest stage's), so
// what one stage needs is read off the buffers its instructions touch:
// the end of the highest one in each arena. Parameters and optimizer
// state are counted for the stage that owns them (Sharding::stage), though
// every rank's region still holds all of them today.
//
// The analytic bubble is the idle share of a step of M microbatches on P
// balanced stages under GPipe or 1F1B: (P - 1) / (M + P - 1); with V model
// chunks a stage (interleaved 1F1B) the fill and drain shrink V times,
// Megatron's (P - 1) / V / (M + (P - 1) / V) = (P - 1) / (V M + P - 1),
// so the caller passes V (the plan does not record it). The caller
// may add the simulated one (StepSimulation.h): each stage's idle compute
// time over the step, as the stages' costs and the transfers make it.
//
// The JSON form (`sharc compile --report=json`, the "pipeline" object) holds
// the same figures unrounded, for tools.
//
//   PipelineReport report = buildPipelineReport(plan);
//   if (!report.stages.empty())
//     std::printf("%s", formatPipelineReport(report).c_str());
#pragma once

#include "planner/plan/Plan.h"

#include <string>
#include <vector>

namespace sharc {

struct StageMemory {
  int64_t activationBytes = 0; ///< of the activation arena
  int64_t gradientBytes = 0;   ///< of the gradient arena
  int64_t parameterBytes = 0;  ///< its own parameters
  int64_t optimizerBytes = 0;  ///< their optimizer state
  int64_t numInstructions = 0;
};

struct PipelineReport {
  std::vector<StageMemory> stages; ///< empty without stages
  /// The schedule it was compiled with ("gpipe", "1f1b", "interleaved")
  /// and the model chunks a stage; the plan does not record them, so the
  /// caller gives them from its options (schedule: JSON only; empty:
  /// unknown).
  std::string schedule;
  int64_t numChunks = 1;
  /// Microbatches per step: the step's sequences per rank over those of
  /// one transfer (the first send of stage 0); 0 when there is none.
  int64_t numMicrobatches = 0;
  double bubble = 0; ///< (P - 1) / (V M + P - 1)
  /// From the simulated step (StepSimulation.h), when one was run: each
  /// stage's compute time, the step, and the stages' mean idle share.
  std::vector<double> stageBusySeconds;
  double stepSeconds = 0;
  double simulatedBubble = -1; ///< negative: not simulated
};

/// `numChunks`: the model chunks a stage (V; 1 but for interleaved).
PipelineReport buildPipelineReport(const plan::Plan &plan,
                                   int64_t numChunks = 1);
std::string formatPipelineReport(const PipelineReport &report);
/// The report as one JSON object ({"schedule": ..., "stages": P, ...}); the
/// simulated figures only when simulatedBubble is set.
std::string pipelineReportJson(const PipelineReport &report);

} // namespace sharc
