//===- JsonText.h - JSON strings and trace names, by hand -------*- C++ -*-===//
// defines: jsonString, traceStreamName, activationCounterEvent,
//          closeTraceEvents (plan::)
//
// The few JSON texts sharc writes (safetensors headers, the planner's
// simulated trace, sharc-run's measured trace) are small enough to write
// by hand; these are the pieces they share.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sharc::plan {

/// `text` as a JSON string literal, quotes included: '"' and '\' escaped,
/// control characters as \u00XX.
std::string jsonString(std::string_view text);

/// What a Chrome trace calls stream `stream`: the planner's simulated trace
/// and sharc-run's measured one use the same names, so the two traces of
/// one plan line up side by side.
std::string traceStreamName(int64_t stream);

/// One sample of a rank's "activations MiB" counter track (a Chrome trace
/// counter event, ph "C"): `bytes` live at time `tsMicros` (already
/// formatted), on process `pid`. Both traces write the counter this way so
/// Perfetto draws the measured and the simulated one alike.
std::string activationCounterEvent(std::string_view pid,
                                   std::string_view tsMicros, int64_t bytes);

/// Closes a trace whose events were each written with a ",\n" after them:
/// JSON allows no comma after the last element.
std::string closeTraceEvents(std::string json);

} // namespace sharc::plan
