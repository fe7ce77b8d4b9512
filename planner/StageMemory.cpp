//===- StageMemory.cpp - memory and bubble of each pipeline stage ---------===//

#include "planner/StageMemory.h"

#include <algorithm>
#include <cstdio>

using namespace sharc;

PipelineReport sharc::buildPipelineReport(const plan::Plan &plan) {
  PipelineReport report;
  int64_t numStages = plan.axisSize(plan::kStageAxis);
  if (numStages <= 1)
    return report;
  report.stages.resize(static_cast<size_t>(numStages));
  auto end = [&](int64_t id) {
    const plan::Buffer &buffer = plan.buffers[id];
    return buffer.offset + buffer.numBytes;
  };
  for (const plan::Instruction &instr : plan.instructions) {
    if (instr.stage < 0)
      continue;
    StageMemory &stage = report.stages[instr.stage];
    stage.numInstructions += 1;
    for (const auto *ids : {&instr.operands, &instr.results})
      for (int64_t id : *ids) {
        const plan::Buffer &buffer = plan.buffers[id];
        int64_t base = buffer.viewOf >= 0 ? buffer.viewOf : id;
        if (buffer.region == plan::Region::Activation)
          stage.activationBytes = std::max(stage.activationBytes, end(base));
        else if (buffer.region == plan::Region::Gradient)
          stage.gradientBytes = std::max(stage.gradientBytes, end(base));
      }
  }
  for (const plan::ParamEntry &param : plan.params) {
    if (param.sharding.stage < 0)
      continue;
    StageMemory &stage = report.stages[param.sharding.stage];
    stage.parameterBytes += plan.buffers[param.buffer].numBytes;
    for (int64_t id : param.state)
      stage.optimizerBytes += plan.buffers[id].numBytes;
  }
  const plan::IoEntry *tokens = plan.findInput("tokens");
  for (const plan::Instruction &instr : plan.instructions)
    if (instr.op == "send" && instr.stage == 0 && tokens) {
      const plan::Buffer &sent = plan.buffers[instr.operands[0]];
      const plan::Buffer &batch = plan.buffers[tokens->buffer];
      if (sent.shape.size() > 1 && batch.shape.size() > 1 && sent.shape[1] > 0)
        report.numMicrobatches = batch.shape[1] / sent.shape[1];
      break;
    }
  if (report.numMicrobatches > 0)
    report.bubble = static_cast<double>(numStages - 1) /
                    static_cast<double>(report.numMicrobatches + numStages - 1);
  return report;
}

std::string sharc::formatPipelineReport(const PipelineReport &report) {
  std::string text;
  char line[256];
  auto mib = [](int64_t bytes) {
    return static_cast<double>(bytes) / (1 << 20);
  };
  for (size_t s = 0; s < report.stages.size(); ++s) {
    const StageMemory &stage = report.stages[s];
    std::snprintf(line, sizeof(line),
                  "  stage %zu: %lld instructions, parameters %.2f MiB, "
                  "optimizer %.2f MiB, gradients %.2f MiB, activations "
                  "%.2f MiB\n",
                  s, static_cast<long long>(stage.numInstructions),
                  mib(stage.parameterBytes), mib(stage.optimizerBytes),
                  mib(stage.gradientBytes), mib(stage.activationBytes));
    text += line;
  }
  bool simulated = report.simulatedBubble >= 0 && report.stepSeconds > 0;
  std::snprintf(line, sizeof(line),
                "  pipeline bubble: %.1f%% of the step (analytic; %zu stages, "
                "%lld microbatches)",
                report.bubble * 100, report.stages.size(),
                static_cast<long long>(report.numMicrobatches));
  text += line;
  if (!simulated)
    return text + "\n";
  std::snprintf(line, sizeof(line),
                ", %.1f%% (simulated; the stages' mean idle compute)\n",
                report.simulatedBubble * 100);
  text += line;
  for (size_t s = 0; s < report.stageBusySeconds.size(); ++s) {
    double busy = report.stageBusySeconds[s];
    std::snprintf(line, sizeof(line),
                  "  stage %zu: compute busy %.3f ms, idle %.1f%% of the "
                  "step (simulated)\n",
                  s, busy * 1e3,
                  100 * std::max(0.0, report.stepSeconds - busy) /
                      report.stepSeconds);
    text += line;
  }
  return text;
}
