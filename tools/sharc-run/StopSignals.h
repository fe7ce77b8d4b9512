//===- StopSignals.h - stopping a training run between steps ----*- C++ -*-===//
// defines: installStopHandlers, stopSignal, signalName
//
// A long run asked to stop (Ctrl-C's SIGINT, a scheduler's SIGTERM, or
// SIGUSR1, which some of Open MPI's mpirun installations forward where all
// end the job on SIGINT and SIGTERM) finishes the step it is in, saves where
// --save names a file, and exits with 128 + the signal's number, so that
// the state of the last whole step is kept and `--load` resumes it; a
// benchmark sweep finishes its point and keeps the points measured. The
// handler only records the signal (nothing else is async-signal-safe) and
// hands all three signals back to their default action, so a second one
// ends the process at once, as if no handler had been installed.
//
//   installStopHandlers(/*announce=*/true);
//   for (...) { if (stopSignal() != 0) break; ...step... }
//
// A launcher that passes no signal on (the H200 node's mpirun does not
// forward SIGUSR1) or a job script asks through a file instead:
// `--stop-file FILE` stops the run after the step in which FILE appears,
// as a signal does, and exits with kStopFileExit.
#pragma once

#include <string>

namespace sharc::training {

/// The stop that --stop-file asks for, beyond any signal's number.
constexpr int kStopFileRequest = 1024;
/// sysexits.h's EX_TEMPFAIL: the run is not done; run it again to go on.
constexpr int kStopFileExit = 75;

/// Installs the handler for SIGINT, SIGTERM and SIGUSR1. With `announce`,
/// the first signal writes one line to stderr saying that the run stops
/// after its `unit` in flight, a string that outlives the handler ("step";
/// under mpirun, only the first process announces).
void installStopHandlers(bool announce, const char *unit = "step");

/// The first stop signal received since installStopHandlers, or 0.
int stopSignal();

/// "SIGINT", "SIGTERM", "SIGUSR1", else "a signal".
const char *signalName(int signal);

/// What this process is asked: the first stop signal, else
/// kStopFileRequest where `stopFile` (empty: none) names a path that
/// exists, else 0. One stat a call.
int stopRequest(const std::string &stopFile);

/// How a run stopped by `request` exits: 128 + the signal, or
/// kStopFileExit.
int stopExitCode(int request);

/// Removes the stop file once the run it asked to stop has stopped (or
/// ended), so that the same command run again goes on: "" where that is
/// done (or there was none), else why it is not.
std::string consumeStopFile(const std::string &stopFile);

} // namespace sharc::training
