//===- MemoryReport.cpp - what a plan holds per rank, before running ------===//

#include "planner/MemoryReport.h"

#include "planner/StageMemory.h"
#include "planner/plan/DeviceWorkspace.h"

#include <algorithm>
#include <cstdio>
#include <vector>

using namespace sharc;

namespace {

bool isCollective(const std::string &op) {
  return op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" ||
         op == "all_reduce_coalesced" || op == "all_to_all";
}

/// Bytes one rank sends for a collective over `n` ranks (ring algorithms:
/// all_reduce 2(n-1)/n of its input, all_gather (n-1) input blocks,
/// reduce_scatter (n-1) output blocks, all_to_all (n-1)/n of its input).
int64_t bytesSent(const plan::Plan &plan, const plan::Instruction &instr,
                  int64_t n) {
  auto bytesOf = [&](int64_t id) { return plan.buffers[id].numBytes; };
  int64_t sent = 0;
  if (instr.op == "all_reduce" || instr.op == "all_reduce_coalesced")
    for (int64_t id : instr.operands)
      sent += 2 * (n - 1) * bytesOf(id) / n;
  else if (instr.op == "all_gather")
    sent = (n - 1) * bytesOf(instr.operands[0]);
  else if (instr.op == "reduce_scatter")
    sent = (n - 1) * bytesOf(instr.results[0]);
  else if (instr.op == "all_to_all")
    sent = (n - 1) * bytesOf(instr.operands[0]) / n;
  return sent;
}

} // namespace

MemoryReport sharc::buildMemoryReport(const plan::Plan &plan) {
  MemoryReport report;
  report.worldSize = plan.worldSize();
  auto region = [&](plan::Region r) {
    auto it = plan.regionBytes.find(r);
    return it == plan.regionBytes.end() ? int64_t(0) : it->second;
  };
  report.parameterBytes = region(plan::Region::Param);
  report.optimizerBytes = region(plan::Region::OptState);
  for (const plan::Buffer &buffer : plan.buffers)
    if (buffer.region == plan::Region::OptState &&
        buffer.name.rfind("master:", 0) == 0)
      report.masterBytes += buffer.numBytes;
  report.activationPeakBytes = region(plan::Region::Activation);
  report.gradientBytes = region(plan::Region::Gradient);
  report.ioBytes = region(plan::Region::Input) + region(plan::Region::Output);
  // The arenas alone: a plan is the same on every backend, and the cpu
  // needs no workspace. The CUDA backend's comes on top (DeviceWorkspace.h).
  report.workspaceBytes = plan::predictDeviceWorkspace(plan).totalBytes();
  report.totalBytes = report.parameterBytes + report.optimizerBytes +
                      report.gradientBytes + report.activationPeakBytes +
                      report.ioBytes;

  // A slab is a gradient-region base that an all_reduce sums in place; a
  // fused weight gradient split into views (sharc-fuse-projections) is none.
  std::vector<bool> isSlab(plan.buffers.size(), false), reduced = isSlab;
  for (const plan::Instruction &instr : plan.instructions)
    if (instr.op == "all_reduce")
      for (int64_t id : instr.operands)
        reduced[id] = true;
  for (const plan::Buffer &buffer : plan.buffers)
    if (buffer.viewOf >= 0 && !isSlab[buffer.viewOf] &&
        reduced[buffer.viewOf] && buffer.region == plan::Region::Gradient) {
      isSlab[buffer.viewOf] = true;
      report.numSlabs += 1;
      report.largestSlabBytes = std::max(report.largestSlabBytes,
                                         plan.buffers[buffer.viewOf].numBytes);
    }

  // Live activation bytes per instruction, from first to last reference.
  size_t numBuffers = plan.buffers.size();
  std::vector<int64_t> first(numBuffers, -1), last(numBuffers, -1);
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    for (const auto *ids : {&instr.operands, &instr.results})
      for (int64_t id : *ids) {
        if (first[id] < 0)
          first[id] = static_cast<int64_t>(i);
        last[id] = static_cast<int64_t>(i);
      }
  }
  std::vector<int64_t> delta(plan.instructions.size() + 1, 0);
  for (size_t id = 0; id < numBuffers; ++id) {
    if (plan.buffers[id].region != plan::Region::Activation || first[id] < 0)
      continue;
    delta[first[id]] += plan.buffers[id].numBytes;
    delta[last[id] + 1] -= plan.buffers[id].numBytes;
  }
  int64_t live = 0;
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    live += delta[i];
    if (live > report.peakLiveBytes) {
      report.peakLiveBytes = live;
      report.peakInstruction = static_cast<int64_t>(i);
    }
  }
  if (report.peakInstruction >= 0) {
    const plan::Instruction &at = plan.instructions[report.peakInstruction];
    report.peakOp = at.op;
    report.peakLoc = at.loc;
  }

  for (const plan::Instruction &instr : plan.instructions) {
    if (!isCollective(instr.op))
      continue;
    std::string axis = instr.getString("axis");
    report.commBytesByAxis[axis] += bytesSent(plan, instr, plan.axisSize(axis));
    report.collectivesByAxis[axis] += 1;
  }
  return report;
}

namespace {

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

} // namespace

std::string sharc::formatReport(const plan::Plan &plan,
                                const MemoryReport &report) {
  std::string text;
  char line[256];
  auto row = [&](const char *name, int64_t bytes) {
    std::snprintf(line, sizeof(line), "  %-22s %12.2f MiB\n", name, mib(bytes));
    text += line;
  };
  std::snprintf(line, sizeof(line), "plan %s (%s), %lld ranks, per rank:\n",
                plan.modelName.c_str(), plan.mode.c_str(),
                static_cast<long long>(report.worldSize));
  text += line;
  row("parameters", report.parameterBytes);
  row("optimizer state", report.optimizerBytes);
  if (report.masterBytes > 0)
    row("  of which fp32 master", report.masterBytes);
  row("gradient arena", report.gradientBytes);
  if (report.numSlabs > 0) {
    std::snprintf(line, sizeof(line),
                  "    in %lld bucket slabs of up to %.2f MiB, each summed in "
                  "place by one all_reduce\n",
                  static_cast<long long>(report.numSlabs),
                  mib(report.largestSlabBytes));
    text += line;
  }
  row("activation arena", report.activationPeakBytes);
  row("inputs and outputs", report.ioBytes);
  row("total", report.totalBytes);
  row("+ GPU workspace", report.workspaceBytes);
  std::snprintf(line, sizeof(line),
                "  activations peak at instruction %lld (%s, %s): %.2f MiB "
                "live\n",
                static_cast<long long>(report.peakInstruction),
                report.peakOp.c_str(), report.peakLoc.c_str(),
                mib(report.peakLiveBytes));
  text += line;
  for (const auto &[axis, bytes] : report.commBytesByAxis) {
    std::snprintf(line, sizeof(line),
                  "  communication over %s: %lld collectives, %.2f MiB sent "
                  "per rank\n",
                  axis.c_str(),
                  static_cast<long long>(report.collectivesByAxis.at(axis)),
                  mib(bytes));
    text += line;
  }
  if (report.predictedStepSeconds > 0) {
    std::snprintf(line, sizeof(line), "  predicted step time: %.3f ms\n",
                  report.predictedStepSeconds * 1e3);
    text += line;
  }
  return text;
}

std::string sharc::reportJson(const plan::Plan &plan,
                              const MemoryReport &report,
                              const PipelineReport *pipeline) {
  std::string json = "{";
  char field[256];
  auto add = [&](const char *key, long long value) {
    std::snprintf(field, sizeof(field), "\"%s\": %lld, ", key, value);
    json += field;
  };
  json += "\"model\": \"" + plan.modelName + "\", \"mode\": \"" + plan.mode +
          "\", ";
  add("world_size", report.worldSize);
  add("parameter_bytes", report.parameterBytes);
  add("optimizer_bytes", report.optimizerBytes);
  add("master_bytes", report.masterBytes);
  add("gradient_bytes", report.gradientBytes);
  add("gradient_slabs", report.numSlabs);
  add("largest_slab_bytes", report.largestSlabBytes);
  add("activation_peak_bytes", report.activationPeakBytes);
  add("io_bytes", report.ioBytes);
  add("workspace_bytes", report.workspaceBytes);
  add("total_bytes", report.totalBytes);
  add("peak_instruction", report.peakInstruction);
  json += "\"peak_op\": \"" + report.peakOp + "\", \"peak_loc\": \"" +
          report.peakLoc + "\", ";
  std::snprintf(field, sizeof(field), "\"predicted_step_seconds\": %.9g, ",
                report.predictedStepSeconds);
  json += field;
  json += "\"comm_bytes_by_axis\": {";
  bool firstAxis = true;
  for (const auto &[axis, bytes] : report.commBytesByAxis) {
    std::snprintf(field, sizeof(field), "%s\"%s\": %lld", firstAxis ? "" : ", ",
                  axis.c_str(), static_cast<long long>(bytes));
    json += field;
    firstAxis = false;
  }
  json += "}";
  if (pipeline && !pipeline->stages.empty())
    json += ", \"pipeline\": " + pipelineReportJson(*pipeline);
  json += "}\n";
  return json;
}
