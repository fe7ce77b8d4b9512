//===- StageMemory.cpp - memory and bubble of each pipeline stage ---------===//

#include "planner/StageMemory.h"

#include <algorithm>
#include <cstdio>

using namespace sharc;

PipelineReport sharc::buildPipelineReport(const plan::Plan &plan,
                                          int64_t numChunks) {
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
  report.numChunks = std::max<int64_t>(numChunks, 1);
  if (report.numMicrobatches > 0)
    report.bubble =
        static_cast<double>(numStages - 1) /
        static_cast<double>(report.numChunks * report.numMicrobatches +
                            numStages - 1);
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
  std::string chunks =
      report.numChunks > 1
          ? ", " + std::to_string(report.numChunks) + " chunks a stage"
          : "";
  std::snprintf(line, sizeof(line),
                "  pipeline bubble: %.1f%% of the step (analytic; %zu "
                "stages%s, %lld microbatches)",
                report.bubble * 100, report.stages.size(), chunks.c_str(),
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

std::string sharc::pipelineReportJson(const PipelineReport &report) {
  std::string json = "{";
  char field[256];
  auto addInt = [&](const char *key, long long value) {
    std::snprintf(field, sizeof(field), "\"%s\": %lld, ", key, value);
    json += field;
  };
  auto addDouble = [&](const char *key, double value) {
    std::snprintf(field, sizeof(field), "\"%s\": %.9g, ", key, value);
    json += field;
  };
  json += "\"schedule\": \"" + report.schedule + "\", ";
  addInt("chunks", report.numChunks);
  addInt("stages", static_cast<long long>(report.stages.size()));
  addInt("microbatches", report.numMicrobatches);
  addDouble("analytic_bubble", report.bubble);
  json += "\"stage_memory\": [";
  for (size_t s = 0; s < report.stages.size(); ++s) {
    const StageMemory &stage = report.stages[s];
    std::snprintf(field, sizeof(field),
                  "%s{\"stage\": %zu, \"instructions\": %lld, "
                  "\"parameter_bytes\": %lld, \"optimizer_bytes\": %lld, "
                  "\"gradient_bytes\": %lld, \"activation_bytes\": %lld}",
                  s ? ", " : "", s,
                  static_cast<long long>(stage.numInstructions),
                  static_cast<long long>(stage.parameterBytes),
                  static_cast<long long>(stage.optimizerBytes),
                  static_cast<long long>(stage.gradientBytes),
                  static_cast<long long>(stage.activationBytes));
    json += field;
  }
  json += "]";
  // As the text: the simulated figures only from a step that ran to its
  // end, so a tool never reads a deadlocked simulation's partial numbers.
  if (report.simulatedBubble >= 0 && report.stepSeconds > 0) {
    json += ", ";
    addDouble("simulated_step_seconds", report.stepSeconds);
    addDouble("simulated_bubble", report.simulatedBubble);
    json += "\"stage_busy_seconds\": [";
    for (size_t s = 0; s < report.stageBusySeconds.size(); ++s) {
      std::snprintf(field, sizeof(field), "%s%.9g", s ? ", " : "",
                    report.stageBusySeconds[s]);
      json += field;
    }
    json += "]";
  }
  return json + "}";
}
