//===- NoThreads.h - a test process that cannot start a thread --*- C++ -*-===//
// defines: capThreads, runInFreshProcess (test::)
//
// What code does when the host cannot start a thread (std::thread throws
// std::system_error) is tested by capping a process's address space below
// a thread's stack. The process must be fresh: a forked one would reuse
// the stacks of threads that already ended, which glibc keeps. So a test
// case runs a hidden case ("[.capped]") of its own binary in a new process
// and checks its exit code; the hidden case calls capThreads first.
// Sanitizers reserve terabytes of address space, so these cases belong to
// the release build (SHARC_NO_THREADS_TESTABLE).
//
//   TEST_CASE("a host that starts no thread ...", "[.capped]") {
//     test::capThreads(4 << 20);   // exits 3 or 4 if it cannot
//     ...                          // _exit(0) when it behaved
//   }
//   REQUIRE(test::runInFreshProcess("a host that starts no thread ...") == 0);
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <system_error>
#include <thread>

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SHARC_NO_THREADS_TESTABLE 1
#endif

namespace sharc::test {

/// Caps this process's address space at what it maps now plus `room`
/// bytes (less than a thread's 8 MiB stack), then checks that a thread
/// no longer starts: exits 3 when the cap cannot be set, 4 when a thread
/// starts anyway (nothing would be tested).
inline void capThreads(int64_t room) {
  std::ifstream statm("/proc/self/statm");
  long pages = 0;
  statm >> pages;
  rlim_t cap = static_cast<rlim_t>(pages * sysconf(_SC_PAGESIZE) + room);
  rlimit limit{cap, cap};
  if (setrlimit(RLIMIT_AS, &limit) != 0)
    _exit(3);
  try {
    std::thread probe([] {});
    probe.join();
    _exit(4);
  } catch (const std::system_error &) {
  }
}

/// Runs test case `name` of this binary in a new process: its exit code,
/// 128 + the signal that ended it, or 5 when it could not be started.
inline int runInFreshProcess(const char *name) {
  pid_t child = fork();
  if (child < 0)
    return 5;
  if (child == 0) {
    const char *args[] = {"/proc/self/exe", name, nullptr};
    execv(args[0], const_cast<char *const *>(args));
    _exit(5);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child)
    return 5;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace sharc::test
