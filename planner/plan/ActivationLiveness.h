//===- ActivationLiveness.h - activation bytes live at each instruction ---===//
// defines: liveActivationBytes, liveActivationBytesOfSteps
//
// An activation buffer is live from the first instruction that names it
// to the last, in instruction order; a view's bytes are its base's, so a
// reference to a view is one to its base and only bases count. The memory
// report takes the peak of it, and a measured trace draws it as a counter
// beside the streams. With two streams the instruction order is the
// schedule the planner placed the arena by, so the arena holds at least
// the peak (the planner's lifetimes only grow across streams).
//
//   std::vector<int64_t> live = liveActivationBytes(plan);
//   live[i];  // bytes of activations live while instruction i runs
#pragma once

#include "planner/plan/Plan.h"

#include <cstdint>
#include <vector>

namespace sharc::plan {

/// Per instruction; `runs`, when not empty, keeps one rank's instructions
/// (a pipeline stage's), the others counting nothing and holding 0.
std::vector<int64_t> liveActivationBytes(const Plan &plan,
                                         const std::vector<bool> &runs = {});

/// The same over any sequence of steps, each listing the buffer ids it
/// reads or writes: the compiler's simulated schedule, a step per node in
/// the order the nodes start.
std::vector<int64_t>
liveActivationBytesOfSteps(const Plan &plan,
                           const std::vector<std::vector<int64_t>> &touches);

} // namespace sharc::plan
