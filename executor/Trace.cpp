//===- Trace.cpp - a step's instruction timings as a Chrome trace ---------===//

#include "executor/Trace.h"

#include "planner/plan/ActivationLiveness.h"
#include "planner/plan/JsonText.h"

#include <cstdio>
#include <utility>

namespace sharc::exec {

namespace {

/// Microseconds with nanosecond resolution, as Chrome's ts/dur expect.
std::string micros(int64_t nanoseconds) {
  char text[32];
  long long value = nanoseconds < 0 ? -nanoseconds : nanoseconds;
  std::snprintf(text, sizeof(text), "%s%lld.%03lld", nanoseconds < 0 ? "-" : "",
                value / 1000, value % 1000);
  return text;
}

/// The plan's activation bytes live at each instruction the rank ran (its
/// pipeline stage's), as a counter ("C") sampled when the instruction
/// started: Perfetto draws it as a graph above the streams.
std::string liveCounter(const plan::Plan &plan,
                        const std::vector<std::vector<TraceRecord>> &streams,
                        const std::string &pid) {
  std::vector<bool> ran(plan.instructions.size(), false);
  for (const auto &records : streams)
    for (const TraceRecord &record : records)
      ran[static_cast<size_t>(record.instr)] = true;
  std::vector<int64_t> live = plan::liveActivationBytes(plan, ran);
  std::string json;
  for (const auto &records : streams)
    for (const TraceRecord &record : records)
      json += plan::activationCounterEvent(pid, micros(record.startNs),
                                           live[record.instr]);
  return json;
}

} // namespace

std::string chromeTrace(const plan::Plan &plan, const StepTrace &trace) {
  std::string json = "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"step\":" +
                     std::to_string(trace.step) + "},\"traceEvents\":[\n";
  for (size_t rank = 0; rank < trace.records.size(); ++rank) {
    const std::string pid = std::to_string(rank);
    json += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid +
            ",\"args\":{\"name\":\"rank " + pid + "\"}},\n";
    const auto &streams = trace.records[rank];
    json += liveCounter(plan, streams, pid);
    for (size_t stream = 0; stream < streams.size(); ++stream) {
      const std::string tid = std::to_string(stream);
      json += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid +
              ",\"tid\":" + tid + ",\"args\":{\"name\":" +
              plan::jsonString(
                  plan::traceStreamName(static_cast<int64_t>(stream))) +
              "}},\n";
      for (const TraceRecord &record : streams[stream]) {
        const plan::Instruction &instr = plan.instructions[record.instr];
        json += "{\"name\":" + plan::jsonString(instr.op) + ",\"cat\":" +
                plan::jsonString(
                    plan::traceStreamName(static_cast<int64_t>(stream))) +
                ",\"ph\":\"X\",\"pid\":" + pid + ",\"tid\":" + tid +
                ",\"ts\":" + micros(record.startNs) +
                ",\"dur\":" + micros(record.endNs - record.startNs) +
                ",\"args\":{\"instr\":" + std::to_string(record.instr) +
                ",\"loc\":" + plan::jsonString(instr.loc) +
                (instr.recompute.empty()
                     ? std::string()
                     : ",\"recompute\":" + plan::jsonString(instr.recompute)) +
                "}},\n";
      }
    }
  }
  return plan::closeTraceEvents(std::move(json));
}

} // namespace sharc::exec
