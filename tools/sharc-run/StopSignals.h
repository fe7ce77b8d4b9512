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
#pragma once

namespace sharc::training {

/// Installs the handler for SIGINT, SIGTERM and SIGUSR1. With `announce`,
/// the first signal writes one line to stderr saying that the run stops
/// after its `unit` in flight, a string that outlives the handler ("step";
/// under mpirun, only the first process announces).
void installStopHandlers(bool announce, const char *unit = "step");

/// The first stop signal received since installStopHandlers, or 0.
int stopSignal();

/// "SIGINT", "SIGTERM", "SIGUSR1", else "a signal".
const char *signalName(int signal);

} // namespace sharc::training
