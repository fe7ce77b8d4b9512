//===- ActivationLiveness.cpp - activation bytes live at each instruction -===//

#include "planner/plan/ActivationLiveness.h"

namespace sharc::plan {

std::vector<int64_t> liveActivationBytes(const Plan &plan,
                                         const std::vector<bool> &runs) {
  size_t numInstrs = plan.instructions.size();
  auto kept = [&](size_t i) {
    return runs.empty() || (i < runs.size() && runs[i]);
  };
  size_t numBuffers = plan.buffers.size();
  std::vector<int64_t> first(numBuffers, -1), last(numBuffers, -1);
  for (size_t i = 0; i < numInstrs; ++i) {
    if (!kept(i))
      continue;
    const Instruction &instr = plan.instructions[i];
    for (const auto *ids : {&instr.operands, &instr.results})
      for (int64_t id : *ids) {
        if (id < 0 || static_cast<size_t>(id) >= numBuffers)
          continue;
        int64_t base =
            plan.buffers[id].viewOf >= 0 ? plan.buffers[id].viewOf : id;
        if (first[base] < 0)
          first[base] = static_cast<int64_t>(i);
        last[base] = static_cast<int64_t>(i);
      }
  }
  std::vector<int64_t> delta(numInstrs + 1, 0);
  for (size_t id = 0; id < numBuffers; ++id) {
    if (plan.buffers[id].region != Region::Activation || first[id] < 0)
      continue;
    delta[first[id]] += plan.buffers[id].numBytes;
    delta[last[id] + 1] -= plan.buffers[id].numBytes;
  }
  std::vector<int64_t> live(numInstrs, 0);
  int64_t bytes = 0;
  for (size_t i = 0; i < numInstrs; ++i) {
    bytes += delta[i];
    live[i] = kept(i) ? bytes : 0;
  }
  return live;
}

} // namespace sharc::plan
