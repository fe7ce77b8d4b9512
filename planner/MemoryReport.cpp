//===- MemoryReport.cpp - what a plan holds per rank, before running ------===//

#include "planner/MemoryReport.h"

#include "planner/StageMemory.h"
#include "planner/plan/ActivationLiveness.h"
#include "planner/plan/DeviceWorkspace.h"

#include <algorithm>
#include <cstdio>
#include <vector>

using namespace sharc;

namespace {

bool isCollective(const std::string &op) {
  return op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" ||
         op == "all_reduce_coalesced" || op == "reduce_scatter_coalesced" ||
         op == "all_gather_coalesced" || op == "all_to_all";
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
  else if (instr.op == "all_gather" || instr.op == "all_gather_coalesced")
    for (int64_t id : instr.operands)
      sent += (n - 1) * bytesOf(id);
  else if (instr.op == "reduce_scatter" ||
           instr.op == "reduce_scatter_coalesced")
    for (int64_t id : instr.results)
      sent += (n - 1) * bytesOf(id);
  else if (instr.op == "all_to_all")
    sent = (n - 1) * bytesOf(instr.operands[0]) / n;
  return sent;
}

/// Whether the rank at `coord` on a ring_shift's axis sends its block: it
/// and its neighbour `offset` along the axis are on the chain (the whole
/// ring under wrap), as the runtime decides (executor/RingAttentionOps.cpp).
bool ringShiftSends(const plan::Instruction &instr, int64_t coord,
                    int64_t size) {
  int64_t offset = instr.getInt("offset"), first = instr.getInt("first");
  bool wrap = instr.getInt("wrap", 0) != 0;
  auto onChain = [&](int64_t rank) {
    return wrap || (rank >= first && rank < size);
  };
  return onChain(coord) && onChain(coord + offset);
}

struct AxisTally {
  int64_t bytes = 0, collectives = 0, transfers = 0, transferBytes = 0;
};

/// What one rank sends over each axis per step. Ranks differ only by their
/// stage (the instructions they run) and, for a ring_shift, their coordinate
/// on its axis (a chain's last rank sends nothing), so each axis tallies
/// every (stage, coordinate) pair and keeps the one that sends the most;
/// a plan without stages or chains has one tally, the same on every rank.
void tallyCommunication(const plan::Plan &plan, MemoryReport &report) {
  std::map<std::string, std::vector<const plan::Instruction *>> byAxis;
  int64_t numStages = 1;
  for (const plan::Instruction &instr : plan.instructions) {
    if (!isCollective(instr.op) && instr.op != "send" &&
        instr.op != "ring_shift")
      continue;
    byAxis[instr.getString("axis")].push_back(&instr);
    numStages = std::max(numStages, instr.stage + 1);
  }
  for (const auto &[axis, instrs] : byAxis) {
    int64_t size = plan.axisSize(axis);
    bool hasChain = std::any_of(instrs.begin(), instrs.end(),
                                [](const plan::Instruction *instr) {
                                  return instr->op == "ring_shift";
                                });
    bool minSet = false;
    for (int64_t stage = 0; stage < numStages; ++stage)
      for (int64_t coord = 0; coord < (hasChain ? size : 1); ++coord) {
        // On the stage axis itself a rank's coordinate is its stage.
        if (hasChain && numStages > 1 && axis == plan::kStageAxis &&
            coord != stage)
          continue;
        AxisTally tally;
        for (const plan::Instruction *instr : instrs) {
          if (instr->stage >= 0 && instr->stage != stage)
            continue;
          if (isCollective(instr->op)) {
            tally.bytes += bytesSent(plan, *instr, size);
            tally.collectives += 1;
          } else if (instr->op == "send" ||
                     ringShiftSends(*instr, coord, size)) {
            int64_t numBytes = plan.buffers[instr->operands[0]].numBytes;
            tally.bytes += numBytes;
            tally.transferBytes += numBytes;
            tally.transfers += 1;
          }
        }
        auto [most, isNew] = report.commBytesByAxis.try_emplace(axis, -1);
        if (tally.bytes > most->second) {
          most->second = tally.bytes;
          report.collectivesByAxis[axis] = tally.collectives;
          report.transfersByAxis[axis] = tally.transfers;
          report.transferBytesByAxis[axis] = tally.transferBytes;
        }
        int64_t &least = report.leastCommBytesByAxis[axis];
        least = minSet ? std::min(least, tally.bytes) : tally.bytes;
        minSet = true;
      }
  }
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
  report.numParams = static_cast<int64_t>(plan.params.size());
  for (const plan::ParamEntry &param : plan.params) {
    report.numShardedStates += param.stateSharding.has_value();
    auto dp = param.sharding.dimOfAxis.find("dp");
    report.numShardedParams +=
        dp != param.sharding.dimOfAxis.end() && dp->second >= 0;
  }
  report.activationPeakBytes = region(plan::Region::Activation);
  report.gradientBytes = region(plan::Region::Gradient);
  report.ioBytes = region(plan::Region::Input) + region(plan::Region::Output);
  report.cacheBytes = region(plan::Region::Cache);
  // The arenas alone: a plan is the same on every backend, and the cpu
  // needs no workspace. The CUDA backend's comes on top (DeviceWorkspace.h).
  report.workspaceBytes = plan::predictDeviceWorkspace(plan).totalBytes();
  report.totalBytes = report.parameterBytes + report.optimizerBytes +
                      report.gradientBytes + report.activationPeakBytes +
                      report.ioBytes + report.cacheBytes;

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

  // Live activation bytes per instruction (a view counted as its base).
  std::vector<int64_t> live = plan::liveActivationBytes(plan);
  for (size_t i = 0; i < live.size(); ++i)
    if (live[i] > report.peakLiveBytes) {
      report.peakLiveBytes = live[i];
      report.peakInstruction = static_cast<int64_t>(i);
    }
  if (report.peakInstruction >= 0) {
    const plan::Instruction &at = plan.instructions[report.peakInstruction];
    report.peakOp = at.op;
    report.peakLoc = at.loc;
  }

  tallyCommunication(plan, report);
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
  // "ZeRO-n: N of M parameters ...", where some are so.
  auto zeroLine = [&](int stage, int64_t count, const char *what) {
    if (count == 0)
      return;
    std::snprintf(line, sizeof(line),
                  "    ZeRO-%d: %lld of %lld parameters %s\n", stage,
                  static_cast<long long>(count),
                  static_cast<long long>(report.numParams), what);
    text += line;
  };
  zeroLine(3, report.numShardedParams,
           "are one block a dp rank, gathered where the step reads them");
  row("optimizer state", report.optimizerBytes);
  if (report.masterBytes > 0)
    row("  of which fp32 master", report.masterBytes);
  zeroLine(1, report.numShardedStates, "keep one block a dp rank");
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
  if (report.cacheBytes > 0)
    row("key/value cache", report.cacheBytes);
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
    int64_t collectives = report.collectivesByAxis.at(axis);
    int64_t transfers = report.transfersByAxis.at(axis);
    int64_t least = report.leastCommBytesByAxis.at(axis);
    // Collectives alone keep the line they always had.
    std::string what;
    if (collectives > 0 || transfers == 0)
      what = std::to_string(collectives) + " collectives";
    if (transfers > 0)
      what += (what.empty() ? "" : " and ") + std::to_string(transfers) +
              " point-to-point sends";
    std::snprintf(line, sizeof(line),
                  "  communication over %s: %s, %.2f MiB sent per rank",
                  axis.c_str(), what.c_str(), mib(bytes));
    text += line;
    if (least != bytes) {
      std::snprintf(line, sizeof(line),
                    " (the busiest rank; the least busy sends %.2f MiB)",
                    mib(least));
      text += line;
    }
    text += "\n";
  }
  if (const RecomputeCost &rerun = report.recompute; rerun.ops > 0) {
    int64_t computeOps = rerun.ops - rerun.collectives;
    std::snprintf(
        line, sizeof(line),
        "  recompute: %lld ops re-run in the backward: %.1f GFLOP (%.1f%% "
        "of the step's), %.2f GB moved, %.3f ms of predicted compute",
        static_cast<long long>(computeOps),
        static_cast<double>(rerun.flops) * 1e-9,
        rerun.stepFlops > 0 ? 100.0 * rerun.flops / rerun.stepFlops : 0.0,
        static_cast<double>(rerun.memBytes) * 1e-9, rerun.seconds * 1e3);
    std::string collectives =
        std::to_string(rerun.collectives) + " collectives";
    if (computeOps == 0)
      text += "  recompute: " + collectives + " re-run in the backward\n";
    else
      text += line + (rerun.collectives ? "; " + collectives : "") + "\n";
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
  add("sharded_states", report.numShardedStates);
  add("sharded_params", report.numShardedParams);
  add("gradient_bytes", report.gradientBytes);
  add("gradient_slabs", report.numSlabs);
  add("largest_slab_bytes", report.largestSlabBytes);
  add("activation_peak_bytes", report.activationPeakBytes);
  add("io_bytes", report.ioBytes);
  add("cache_bytes", report.cacheBytes);
  add("workspace_bytes", report.workspaceBytes);
  add("total_bytes", report.totalBytes);
  add("peak_instruction", report.peakInstruction);
  json += "\"peak_op\": \"" + report.peakOp + "\", \"peak_loc\": \"" +
          report.peakLoc + "\", ";
  std::snprintf(field, sizeof(field), "\"predicted_step_seconds\": %.9g, ",
                report.predictedStepSeconds);
  json += field;
  // Only a plan that re-runs work has the keys, so the others' JSON is as
  // it was.
  if (report.recompute.ops > 0) {
    add("recompute_ops", report.recompute.ops);
    add("recompute_collectives", report.recompute.collectives);
    add("recompute_flops", report.recompute.flops);
    add("recompute_bytes", report.recompute.memBytes);
    add("step_flops", report.recompute.stepFlops);
    std::snprintf(field, sizeof(field), "\"recompute_seconds\": %.9g, ",
                  report.recompute.seconds);
    json += field;
  }
  json += "\"comm_bytes_by_axis\": {";
  bool firstAxis = true;
  for (const auto &[axis, bytes] : report.commBytesByAxis) {
    std::snprintf(field, sizeof(field), "%s\"%s\": %lld", firstAxis ? "" : ", ",
                  axis.c_str(), static_cast<long long>(bytes));
    json += field;
    firstAxis = false;
  }
  json += "}";
  // Only a plan with point-to-point transfers (pipeline stages, ring
  // attention) has the key, so the others' JSON is as it was.
  bool anyTransfers = false;
  for (const auto &[axis, count] : report.transfersByAxis)
    anyTransfers |= count > 0;
  if (anyTransfers) {
    json += ", \"transfer_bytes_by_axis\": {";
    firstAxis = true;
    for (const auto &[axis, bytes] : report.transferBytesByAxis) {
      if (report.transfersByAxis.at(axis) == 0)
        continue;
      std::snprintf(field, sizeof(field), "%s\"%s\": %lld",
                    firstAxis ? "" : ", ", axis.c_str(),
                    static_cast<long long>(bytes));
      json += field;
      firstAxis = false;
    }
    json += "}";
  }
  if (pipeline && !pipeline->stages.empty())
    json += ", \"pipeline\": " + pipelineReportJson(*pipeline);
  json += "}\n";
  return json;
}
