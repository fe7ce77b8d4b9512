//===- Deadline.h - when a wait of so many seconds gives up -----*- C++ -*-===//
// defines: deadlineAfter
//
// Every wait of the executor (events, collectives, messages between
// processes) takes its timeout in seconds, a double from --timeout, and
// polls or sleeps until a steady-clock deadline.
//
//   auto deadline = deadlineAfter(timeoutSeconds);
//   while (!ready() && std::chrono::steady_clock::now() < deadline) ...
#pragma once

#include <chrono>

namespace sharc::exec {

/// The steady-clock moment `seconds` from now.
inline std::chrono::steady_clock::time_point deadlineAfter(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

} // namespace sharc::exec
