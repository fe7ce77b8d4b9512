//===- ActivationLiveness.cpp - activation bytes live at each instruction -===//

#include "planner/plan/ActivationLiveness.h"

#include <numeric>

namespace sharc::plan {

std::vector<int64_t>
liveActivationBytesOfSteps(const Plan &plan,
                           const std::vector<std::vector<int64_t>> &touches) {
  size_t numSteps = touches.size(), numBuffers = plan.buffers.size();
  std::vector<int64_t> first(numBuffers, -1), last(numBuffers, -1);
  for (size_t step = 0; step < numSteps; ++step)
    for (int64_t id : touches[step]) {
      if (id < 0 || static_cast<size_t>(id) >= numBuffers)
        continue;
      int64_t base =
          plan.buffers[id].viewOf >= 0 ? plan.buffers[id].viewOf : id;
      if (first[base] < 0)
        first[base] = static_cast<int64_t>(step);
      last[base] = static_cast<int64_t>(step);
    }
  std::vector<int64_t> delta(numSteps + 1, 0);
  for (size_t id = 0; id < numBuffers; ++id) {
    if (plan.buffers[id].region != Region::Activation || first[id] < 0)
      continue;
    delta[first[id]] += plan.buffers[id].numBytes;
    delta[last[id] + 1] -= plan.buffers[id].numBytes;
  }
  // Bytes live at a step: the sum of the changes up to it.
  delta.pop_back();
  std::partial_sum(delta.begin(), delta.end(), delta.begin());
  return delta;
}

std::vector<int64_t> liveActivationBytes(const Plan &plan,
                                         const std::vector<bool> &runs) {
  size_t numInstrs = plan.instructions.size();
  auto kept = [&](size_t i) {
    return runs.empty() || (i < runs.size() && runs[i]);
  };
  std::vector<std::vector<int64_t>> touches(numInstrs);
  for (size_t i = 0; i < numInstrs; ++i) {
    if (!kept(i))
      continue;
    const Instruction &instr = plan.instructions[i];
    touches[i] = instr.operands;
    touches[i].insert(touches[i].end(), instr.results.begin(),
                      instr.results.end());
  }
  std::vector<int64_t> live = liveActivationBytesOfSteps(plan, touches);
  for (size_t i = 0; i < numInstrs; ++i)
    if (!kept(i))
      live[i] = 0;
  return live;
}

} // namespace sharc::plan
