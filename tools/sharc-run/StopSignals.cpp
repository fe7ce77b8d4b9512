//===- StopSignals.cpp - stopping a training run between steps ------------===//

#include "tools/sharc-run/StopSignals.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sharc::training {
namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGUSR1};

volatile std::sig_atomic_t requested = 0;
volatile std::sig_atomic_t announces = 0;
/// What the run finishes before it stops ("step", "point"), for the line.
const char *volatile unitName = "step";

void restoreDefaults() {
  struct sigaction action{};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  for (int signal : kStopSignals)
    sigaction(signal, &action, nullptr);
}

/// Only async-signal-safe calls: sigaction, write and the string functions
/// POSIX.1-2016 lists as safe.
void onStopSignal(int signal) {
  if (requested == 0)
    requested = signal;
  // A second stop signal takes the default action: the user insists.
  restoreDefaults();
  if (announces) {
    char line[128] = "sharc-run: ";
    std::strncat(line, signalName(signal), 16);
    const char *pieces[] = {": stopping after this ", unitName,
                            " (send it again to stop now)\n"};
    for (const char *piece : pieces)
      std::strncat(line, piece, sizeof(line) - std::strlen(line) - 1);
    ssize_t ignored = ::write(STDERR_FILENO, line, std::strlen(line));
    (void)ignored;
  }
}

} // namespace

void installStopHandlers(bool announce, const char *unit) {
  announces = announce ? 1 : 0;
  unitName = unit;
  struct sigaction action{};
  action.sa_handler = onStopSignal;
  // Interrupted reads, writes and waits resume: the step goes on.
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  // No second stop signal runs the handler while the first does.
  for (int signal : kStopSignals)
    sigaddset(&action.sa_mask, signal);
  for (int signal : kStopSignals)
    sigaction(signal, &action, nullptr);
  // A launcher may have started this process with them blocked (a mask
  // is inherited across exec): a blocked stop signal would never come.
  // Threads started from here on inherit this thread's mask.
  sigset_t stops;
  sigemptyset(&stops);
  for (int signal : kStopSignals)
    sigaddset(&stops, signal);
  pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
}

int stopSignal() { return requested; }

const char *signalName(int signal) {
  switch (signal) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGUSR1:
    return "SIGUSR1";
  default:
    return "a signal";
  }
}

int stopRequest(const std::string &stopFile) {
  if (int signal = stopSignal(); signal != 0)
    return signal;
  struct stat info{};
  if (!stopFile.empty() && ::stat(stopFile.c_str(), &info) == 0)
    return kStopFileRequest;
  return 0;
}

int stopExitCode(int request) {
  return request == kStopFileRequest ? kStopFileExit : 128 + request;
}

std::string consumeStopFile(const std::string &stopFile) {
  if (stopFile.empty() || ::unlink(stopFile.c_str()) == 0 || errno == ENOENT)
    return "";
  // Left in place, it would stop the next run before its first step.
  return "cannot remove the stop file " + stopFile + ": " +
         std::strerror(errno) + "; remove it before running again";
}

} // namespace sharc::training
