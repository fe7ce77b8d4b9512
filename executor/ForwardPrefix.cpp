//===- ForwardPrefix.cpp - the instructions that compute the loss ---------===//

#include "executor/ForwardPrefix.h"

#include <string>

namespace sharc::exec {
namespace {

/// Whether buffers a and b share bytes (same region, overlapping ranges):
/// a view of the loss, or the loss a view of a slab, counts as the loss.
bool overlaps(const plan::Buffer &a, const plan::Buffer &b) {
  return a.region == b.region && a.offset < b.offset + b.numBytes &&
         b.offset < a.offset + a.numBytes;
}

bool isPersistent(const plan::Buffer &buffer) {
  return buffer.region == plan::Region::Param ||
         buffer.region == plan::Region::OptState;
}

} // namespace

Result<int64_t> forwardLossEnd(const plan::Plan &plan, const OpTable &ops) {
  const plan::IoEntry *loss = plan.findOutput("loss");
  if (!loss)
    return Status::invalidInput("the plan has no 'loss' output to evaluate");
  const plan::Buffer &lossBuffer = plan.buffers[loss->buffer];
  int64_t end = -1;
  for (size_t i = 0; i < plan.instructions.size(); ++i)
    for (int64_t id : plan.instructions[i].results)
      if (overlaps(plan.buffers[id], lossBuffer))
        end = static_cast<int64_t>(i) + 1;
  if (end < 0)
    return Status::invalidInput("no instruction writes the 'loss' output");
  for (int64_t i = 0; i < end; ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    const OpDef *def = ops.find(instr.op);
    std::vector<int64_t> written = instr.results;
    for (size_t k = 0; k < instr.operands.size() && k < 32; ++k)
      if (def && (def->updatedOperands >> k) & 1)
        written.push_back(instr.operands[k]);
    for (int64_t id : written)
      if (isPersistent(plan.buffers[id]))
        return Status::invalidInput(
            "instr " + std::to_string(i) + " (" + instr.op + ") writes " +
            plan::regionName(plan.buffers[id].region) + " buffer '" +
            plan.buffers[id].name + "' before the loss is complete (instr " +
            std::to_string(end - 1) + "): evaluating would change the model");
  }
  return end;
}

} // namespace sharc::exec
