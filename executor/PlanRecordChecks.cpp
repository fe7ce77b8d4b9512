//===- PlanRecordChecks.cpp - a plan's records against themselves ---------===//

#include "executor/PlanRecordChecks.h"

#include "executor/OpTable.h"
#include "executor/ShardLayout.h"

#include <string>
#include <vector>

namespace sharc::exec {

using plan::Buffer;
using plan::ParamEntry;

namespace {

std::string shapeText(const std::vector<int64_t> &shape) {
  return opcheck::shapeText(shape);
}

bool isFloatType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F64;
}

/// Plan facts the reader also checks; hand-built plans skip the reader.
Status checkBuffers(const plan::Plan &plan) {
  for (const plan::MeshAxis &axis : plan.mesh)
    if (axis.size <= 0)
      return Status::invalidInput("mesh axis '" + axis.name + "' has size " +
                                  std::to_string(axis.size));
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const Buffer &buffer = plan.buffers[i];
    std::string what = "buffer " + std::to_string(i) + " '" + buffer.name + "'";
    if (buffer.id != static_cast<int64_t>(i))
      return Status::invalidInput(what + " has id " +
                                  std::to_string(buffer.id));
    int64_t needed = numElements(buffer.shape) * dtypeSize(buffer.dtype);
    if (buffer.numBytes < needed)
      return Status::invalidInput(
          what + " holds " + std::to_string(buffer.numBytes) +
          " bytes, its shape needs " + std::to_string(needed));
    auto region = plan.regionBytes.find(buffer.region);
    int64_t regionSize = region == plan.regionBytes.end() ? 0 : region->second;
    if (buffer.offset < 0 || buffer.offset + buffer.numBytes > regionSize)
      return Status::invalidInput(
          what + " at [" + std::to_string(buffer.offset) + ", +" +
          std::to_string(buffer.numBytes) + ") lies outside region " +
          plan::regionName(buffer.region) + " of " +
          std::to_string(regionSize) + " bytes");
  }
  return Status::ok();
}

Status checkBufferId(const plan::Plan &plan, int64_t id,
                     const std::string &what) {
  if (id >= 0 && id < static_cast<int64_t>(plan.buffers.size()))
    return Status::ok();
  return Status::invalidInput(what + " refers to buffer " + std::to_string(id) +
                              " of " + std::to_string(plan.buffers.size()));
}

/// A global tensor's slice must be exactly its buffer's local shape.
Status checkSharded(const plan::Plan &plan, const std::string &what,
                    int64_t bufferId, const std::vector<int64_t> &globalShape,
                    const plan::Sharding &sharding) {
  SHARC_TRY(checkBufferId(plan, bufferId, what));
  for (const auto &[axis, dim] : sharding.dimOfAxis) {
    bool known = false;
    for (const plan::MeshAxis &meshAxis : plan.mesh)
      known |= meshAxis.name == axis;
    if (!known && dim >= 0)
      return Status::invalidInput(what + " is sharded over axis '" + axis +
                                  "', which the mesh lacks");
  }
  auto slice =
      shardSlice(plan.mesh, sharding, globalShape, meshCoords(plan.mesh, 0));
  if (!slice)
    return slice.status().withContext(what);
  const Buffer &buffer = plan.buffers[bufferId];
  if (slice->localShape != buffer.shape)
    return Status::invalidInput(
        what + ": global shape " + shapeText(globalShape) + " shards to " +
        shapeText(slice->localShape) + " but buffer " +
        std::to_string(bufferId) + " is " + shapeText(buffer.shape));
  return Status::ok();
}

Status checkTables(const plan::Plan &plan) {
  for (const ParamEntry &param : plan.params) {
    std::string what = "parameter '" + param.name + "'";
    SHARC_TRY(checkSharded(plan, what, param.buffer, param.globalShape,
                           param.sharding));
    if (!isFloatType(plan.buffers[param.buffer].dtype))
      return Status::invalidInput(what + " is not a float tensor");
    if (!param.tiedTo.empty() && !plan.findParam(param.tiedTo))
      return Status::invalidInput(what + " is tied to unknown parameter '" +
                                  param.tiedTo + "'");
    for (int64_t state : param.state) {
      SHARC_TRY(checkBufferId(plan, state, what + "'s optimizer state"));
      // The state holds the parameter's global shape, split as the
      // parameter or (ZeRO-1) as stateSharding says.
      SHARC_TRY(checkSharded(plan, what + "'s optimizer state", state,
                             param.globalShape, param.stateLayout()));
    }
  }
  for (const auto *table : {&plan.inputs, &plan.outputs})
    for (const plan::IoEntry &entry : *table)
      SHARC_TRY(checkSharded(plan, "io entry '" + entry.name + "'",
                             entry.buffer, entry.globalShape, entry.sharding));
  // A decode step (its `positions` input) takes one position a sample.
  bool decode = plan.findInput("positions") != nullptr;
  for (const char *name : {"tokens", "labels", "positions"}) {
    const plan::IoEntry *entry = plan.findInput(name);
    if (!entry)
      continue;
    std::vector<int64_t> expected{decode ? 1 : plan.seqLen, plan.batchSize};
    if (entry->globalShape != expected ||
        plan.buffers[entry->buffer].dtype != DType::I32)
      return Status::invalidInput(
          std::string("input '") + name + "' must be i32 of global shape " +
          shapeText(expected) +
          (decode ? " ([1, batch], a decode step)" : " ([seq, batch])"));
  }
  if (decode && plan.findInput("labels"))
    return Status::invalidInput("a decode step (its 'positions' input) has "
                                "no 'labels' input");
  // A prefill: [T, B] of each, T alike (and at most the caches' seq_len).
  const plan::IoEntry *prefillTokens = plan.findInput("prefill_tokens");
  const plan::IoEntry *prefillPositions = plan.findInput("prefill_positions");
  if ((prefillTokens || prefillPositions) &&
      !(decode && prefillTokens && prefillPositions))
    return Status::invalidInput(
        "inputs 'prefill_tokens' and 'prefill_positions' come together, in "
        "a decode step (one with a 'positions' input)");
  if (prefillTokens) {
    const std::vector<int64_t> &shape = prefillTokens->globalShape;
    for (const plan::IoEntry *entry : {prefillTokens, prefillPositions})
      if (entry->globalShape.size() != 2 || entry->globalShape != shape ||
          shape[0] < 1 || shape[0] > plan.seqLen ||
          shape[1] != plan.batchSize ||
          plan.buffers[entry->buffer].dtype != DType::I32)
        return Status::invalidInput(
            "input '" + entry->name +
            "' must be i32 [T, batch] like the other prefill input, T from "
            "1 to seq_len");
  }
  return Status::ok();
}

Status checkInstruction(const plan::Plan &plan,
                        const plan::Instruction &instr) {
  for (const auto *ids : {&instr.operands, &instr.results})
    for (int64_t id : *ids)
      SHARC_TRY(checkBufferId(plan, id, "an operand"));
  if (instr.stream < 0)
    return Status::invalidInput("negative stream " +
                                std::to_string(instr.stream));
  for (const auto *events : {&instr.waits, &instr.signals})
    for (int64_t event : *events)
      if (event < 0 || event >= plan.numEvents)
        return Status::invalidInput("event " + std::to_string(event) +
                                    " outside [0, " +
                                    std::to_string(plan.numEvents) + ")");
  return Status::ok();
}

} // namespace

Status checkPlanRecords(const plan::Plan &plan) {
  SHARC_TRY(checkBuffers(plan));
  SHARC_TRY(checkTables(plan));
  for (size_t i = 0; i < plan.instructions.size(); ++i)
    SHARC_TRY(checkInstruction(plan, plan.instructions[i])
                  .withContext("instr " + std::to_string(i) + " (" +
                               plan.instructions[i].op + ")"));
  return Status::ok();
}

} // namespace sharc::exec
