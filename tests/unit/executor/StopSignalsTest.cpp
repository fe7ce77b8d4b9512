//===- StopSignalsTest.cpp - sharc-run's stop between steps ---------------===//
//
// The handler in a child process (it changes the process's signal
// dispositions): the first stop signal is recorded and the process goes
// on; a second one ends it as the signal's default does.

#include "tools/sharc-run/StopSignals.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <pthread.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace sharc::training;

namespace {

/// Runs `first` then `second` (0: none) through raise() in a child that
/// installed the handlers; returns what the child wrote after the first
/// (the recorded signal) and how it ended.
struct ChildEnd {
  std::string recorded;
  bool signalled = false;
  int signal = 0;
  int exitCode = -1;
};

ChildEnd raiseInChild(int first, int second) {
  int pipeEnds[2];
  REQUIRE(::pipe(pipeEnds) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipeEnds[0]);
    // As a launcher may start it: the stop signals blocked, which the
    // handlers' installation undoes.
    sigset_t stops;
    sigemptyset(&stops);
    for (int signal : {SIGINT, SIGTERM, SIGUSR1})
      sigaddset(&stops, signal);
    pthread_sigmask(SIG_BLOCK, &stops, nullptr);
    installStopHandlers(/*announce=*/false);
    std::string before = std::to_string(stopSignal()) + ",";
    ::raise(first); // delivered before raise returns: one thread
    std::string line = before + std::to_string(stopSignal());
    ssize_t written = ::write(pipeEnds[1], line.data(), line.size());
    ::close(pipeEnds[1]);
    if (second != 0)
      ::raise(second);
    ::_exit(written == static_cast<ssize_t>(line.size()) ? 0 : 3);
  }
  ::close(pipeEnds[1]);
  ChildEnd end;
  char buffer[64];
  ssize_t got;
  while ((got = ::read(pipeEnds[0], buffer, sizeof(buffer))) > 0)
    end.recorded.append(buffer, static_cast<size_t>(got));
  ::close(pipeEnds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  end.signalled = WIFSIGNALED(status);
  if (end.signalled)
    end.signal = WTERMSIG(status);
  else if (WIFEXITED(status))
    end.exitCode = WEXITSTATUS(status);
  return end;
}

} // namespace

TEST_CASE("the first stop signal is recorded and the process goes on",
          "[stop]") {
  for (int signal : {SIGINT, SIGTERM, SIGUSR1}) {
    ChildEnd end = raiseInChild(signal, 0);
    CHECK(end.recorded == "0," + std::to_string(signal));
    CHECK_FALSE(end.signalled);
    CHECK(end.exitCode == 0);
  }
}

TEST_CASE("a second stop signal ends the process at once", "[stop]") {
  // The same signal again, and another after the first.
  for (auto [first, second] :
       {std::pair{SIGINT, SIGINT}, std::pair{SIGTERM, SIGINT},
        std::pair{SIGUSR1, SIGTERM}}) {
    ChildEnd end = raiseInChild(first, second);
    CHECK(end.recorded == "0," + std::to_string(first));
    CHECK(end.signalled);
    CHECK(end.signal == second);
  }
}

TEST_CASE("stop signals are named", "[stop]") {
  CHECK(std::string(signalName(SIGINT)) == "SIGINT");
  CHECK(std::string(signalName(SIGTERM)) == "SIGTERM");
  CHECK(std::string(signalName(SIGUSR1)) == "SIGUSR1");
  CHECK(std::string(signalName(SIGHUP)) == "a signal");
}
