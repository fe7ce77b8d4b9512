//===- UpdateRuns.h - which optimizer updates share one launch ----------===//
//
// A device backend updates a run of consecutive AdamW updates in one launch
// (executor findAdamWRuns, then bindAdamWGroup), and the cost model charges
// such a run one launch (planner/StepSimulation). Both read the rule here,
// each on what it knows of an instruction: the plan's instructions at run
// time, the schedule's nodes and streams at compile time.
//
//===----------------------------------------------------------------------===//

#pragma once

#include <cstdint>
#include <string_view>

namespace sharc::plan {

inline bool isOptimizerUpdate(std::string_view op) {
  return op == "adamw" || op == "adamw_master";
}

/// An instruction as the run rule sees it.
struct UpdateSlot {
  std::string_view op;
  int64_t stream = 0;
  int64_t stage = -1;
  bool waits = false;   ///< it waits for at least one event
  bool signals = false; ///< it signals at least one event
};

/// Whether `next`, right after `before` in instruction order, is updated
/// in `before`'s launch: both are updates on one stream and stage, and no
/// event lies between them (a wait of `next` or a signal of `before` marks
/// a point on the stream that a single launch would not have).
inline bool joinsUpdateRun(const UpdateSlot &before, const UpdateSlot &next) {
  return isOptimizerUpdate(before.op) && isOptimizerUpdate(next.op) &&
         before.stream == next.stream && before.stage == next.stage &&
         !next.waits && !before.signals;
}

} // namespace sharc::plan
