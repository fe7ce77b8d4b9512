//===- PlanWriter.cpp - write plan files ----------------------------------===//
//
// One instruction per line in flow style, doubles in their shortest exact
// form, empty fields left out; PlanIO.cpp reads it back.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/PlanIO.h"

#include "planner/plan/FileText.h"
#include "planner/plan/PlanText.h"

namespace sharc::plan {

namespace {

using namespace text;

std::string formatSharding(const Sharding &sharding) {
  std::string result = "{";
  for (const auto &[axis, dim] : sharding.dimOfAxis)
    result += (result.size() > 1 ? ", " : "") + identifier(axis) + ": " +
              std::to_string(dim);
  if (!sharding.balancedAxis.empty())
    result += std::string(result.size() > 1 ? ", " : "") +
              "balanced: " + quoted(sharding.balancedAxis);
  if (!sharding.order.empty()) {
    result += std::string(result.size() > 1 ? ", " : "") + "order: [";
    for (size_t i = 0; i < sharding.order.size(); ++i)
      result += (i ? ", " : "") + identifier(sharding.order[i]);
    result += "]";
  }
  if (sharding.stage >= 0)
    result += std::string(result.size() > 1 ? ", " : "") +
              "stage: " + std::to_string(sharding.stage);
  return result + "}";
}

std::string formatAttr(const AttrValue &value) {
  if (const auto *integer = std::get_if<int64_t>(&value))
    return std::to_string(*integer);
  if (const auto *real = std::get_if<double>(&value))
    return formatDouble(*real);
  if (const auto *text = std::get_if<std::string>(&value))
    return quoted(*text);
  return formatInts(std::get<std::vector<int64_t>>(value));
}

} // namespace

std::string writePlan(const Plan &plan) {
  std::string out = "sharc_plan: " + std::to_string(plan.version) + "\n";
  out += "model: " + quoted(plan.modelName) + "\n";
  out += "mode: " + quoted(plan.mode) + "\n";
  out += "mesh: [";
  for (size_t i = 0; i < plan.mesh.size(); ++i)
    out += std::string(i ? ", " : "") +
           "{name: " + identifier(plan.mesh[i].name) +
           ", size: " + std::to_string(plan.mesh[i].size) + "}";
  out += "]\n";
  out += "seq_len: " + std::to_string(plan.seqLen) + "\n";
  out += "batch_size: " + std::to_string(plan.batchSize) + "\n";
  out += "vocab_size: " + std::to_string(plan.vocabSize) + "\n";
  out += "compute_dtype: " + std::string(dtypeName(plan.computeDType)) + "\n";
  out += "num_streams: " + std::to_string(plan.numStreams) + "\n";
  out += "num_events: " + std::to_string(plan.numEvents) + "\n";
  // Written only when there is one, so plans without stay byte-identical.
  if (!plan.lrSchedule.isConstant())
    out += "lr_schedule: {decay: " + quoted(plan.lrSchedule.decay) +
           ", warmup_steps: " + std::to_string(plan.lrSchedule.warmupSteps) +
           ", total_steps: " + std::to_string(plan.lrSchedule.totalSteps) +
           ", min_factor: " + formatDouble(plan.lrSchedule.minFactor) + "}\n";
  out += "regions: {";
  for (const auto &[region, numBytes] : plan.regionBytes)
    out += std::string(out.back() == '{' ? "" : ", ") + regionName(region) +
           ": " + std::to_string(numBytes);
  out += "}\n";

  out += plan.buffers.empty() ? "buffers: []\n" : "buffers:\n";
  for (const Buffer &buffer : plan.buffers)
    out += "  - {id: " + std::to_string(buffer.id) +
           ", name: " + quoted(buffer.name) +
           ", region: " + regionName(buffer.region) +
           ", offset: " + std::to_string(buffer.offset) +
           ", bytes: " + std::to_string(buffer.numBytes) +
           ", dtype: " + dtypeName(buffer.dtype) +
           ", shape: " + formatInts(buffer.shape) +
           (buffer.viewOf >= 0 ? ", view_of: " + std::to_string(buffer.viewOf)
                               : "") +
           (buffer.isStrided()
                ? ", row_stride: " + std::to_string(buffer.rowStride)
                : "") +
           "}\n";

  out += plan.params.empty() ? "params: []\n" : "params:\n";
  for (const ParamEntry &param : plan.params) {
    out += "  - {name: " + quoted(param.name) +
           ", buffer: " + std::to_string(param.buffer) +
           ", global_shape: " + formatInts(param.globalShape) +
           ", sharding: " + formatSharding(param.sharding) +
           ", init: {kind: " + identifier(param.init.kind) +
           ", stddev: " + formatDouble(param.init.stddev) + "}";
    if (!param.tiedTo.empty())
      out += ", tied_to: " + quoted(param.tiedTo);
    if (!param.state.empty())
      out += ", state: " + formatInts(param.state);
    if (param.stateSharding)
      out += ", state_sharding: " + formatSharding(*param.stateSharding);
    out += "}\n";
  }

  for (const auto *table : {&plan.inputs, &plan.outputs}) {
    const char *key = table == &plan.inputs ? "inputs" : "outputs";
    out += std::string(key) + (table->empty() ? ": []\n" : ":\n");
    for (const IoEntry &entry : *table)
      out += "  - {name: " + quoted(entry.name) +
             ", buffer: " + std::to_string(entry.buffer) +
             ", global_shape: " + formatInts(entry.globalShape) +
             ", sharding: " + formatSharding(entry.sharding) + "}\n";
  }

  out += plan.instructions.empty() ? "instructions: []\n" : "instructions:\n";
  for (const Instruction &instruction : plan.instructions) {
    out += "  - {op: " + identifier(instruction.op) +
           ", in: " + formatInts(instruction.operands) +
           ", out: " + formatInts(instruction.results) +
           ", stream: " + std::to_string(instruction.stream);
    if (!instruction.waits.empty())
      out += ", waits: " + formatInts(instruction.waits);
    if (!instruction.signals.empty())
      out += ", signals: " + formatInts(instruction.signals);
    if (!instruction.attrs.empty()) {
      out += ", attrs: {";
      for (const auto &[key, value] : instruction.attrs)
        out += std::string(out.back() == '{' ? "" : ", ") + identifier(key) +
               ": " + formatAttr(value);
      out += "}";
    }
    if (!instruction.loc.empty())
      out += ", loc: " + quoted(instruction.loc);
    if (instruction.stage >= 0)
      out += ", stage: " + std::to_string(instruction.stage);
    if (!instruction.recompute.empty())
      out += ", recompute: " + instruction.recompute;
    out += "}\n";
  }
  return out;
}

Status writePlanFile(const Plan &plan, const std::string &path) {
  std::string text = writePlan(plan);
  return writeFileAtomically(path, {text}, "plan");
}

} // namespace sharc::plan
