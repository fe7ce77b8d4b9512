//===- Trace.h - a step's instruction timings as a Chrome trace -*- C++ -*-===//
// defines: TraceRecord, StepTrace, chromeTrace
//
// The runtime records, when RunOptions::recordTrace is on, when each
// instruction of a step started and ended on its (rank, stream) thread.
// chromeTrace turns one step's records into the JSON that chrome://tracing
// and Perfetto read: one process per rank ("rank R"), one thread per stream
// ("compute", "communication"), one complete ("X") event per instruction
// named after its op, with ts and dur in microseconds from the step start
// and args {instr, loc}; and per rank a counter, "activations MiB", of the
// plan's activation bytes live at each instruction as it started
// (planner/plan/ActivationLiveness.h), which Perfetto draws as a graph.
#pragma once

#include "planner/plan/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sharc::exec {

/// One instruction run; times in nanoseconds since the step started, kept
/// integral so that rounding never makes consecutive events overlap.
struct TraceRecord {
  int64_t instr = 0;
  int64_t startNs = 0;
  int64_t endNs = 0;
};

struct StepTrace {
  int64_t step = 0; ///< the optimizer step these records are of (1-based)
  /// records[rank][stream], in the order the stream ran them.
  std::vector<std::vector<std::vector<TraceRecord>>> records;
};

/// The trace as Chrome's JSON object format; instruction indices in `trace`
/// must lie inside plan.instructions.
std::string chromeTrace(const plan::Plan &plan, const StepTrace &trace);

} // namespace sharc::exec
