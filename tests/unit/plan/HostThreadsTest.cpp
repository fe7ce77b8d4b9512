//===- HostThreadsTest.cpp - shares of host work on threads ---------------===//
//
// runShares runs every share once, on threads while the host can start
// them, and on the calling thread when it cannot: a fresh process whose
// address space is capped below a thread's stack starts no thread, and
// still runs every share.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/HostThreads.h"

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

using sharc::runShares;

namespace {

/// Runs n shares and returns whether each ran exactly once, and how many
/// ran on a thread other than the caller's.
std::pair<bool, int> runCounted(int n) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
  std::atomic<int> elsewhere{0};
  std::thread::id caller = std::this_thread::get_id();
  runShares(n, [&](int64_t share) {
    runs[share].fetch_add(1);
    if (std::this_thread::get_id() != caller)
      elsewhere.fetch_add(1);
  });
  bool once = true;
  for (auto &count : runs)
    once = once && count.load() == 1;
  return {once, elsewhere.load()};
}

/// The process's mapped bytes now (/proc/self/statm's first field).
long mappedBytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0;
  statm >> pages;
  return pages * sysconf(_SC_PAGESIZE);
}

} // namespace

TEST_CASE("runShares runs every share once, on threads", "[plan]") {
  for (int n : {1, 2, 7}) {
    auto [once, elsewhere] = runCounted(n);
    REQUIRE(once);
    REQUIRE(elsewhere == n - 1);
  }
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Sanitizers reserve terabytes of address space, so the cap below would
// stop them rather than the threads; these cases run in the release build.

// Run by the next case in a fresh process (a forked one would reuse the
// stacks of threads that already ended, which glibc keeps).
TEST_CASE("runShares on a host that starts no thread", "[.capped]") {
  // Room for the shares' bookkeeping, not for one 8 MiB thread stack.
  rlim_t cap = static_cast<rlim_t>(mappedBytes() + (2 << 20));
  rlimit limit{cap, cap};
  if (setrlimit(RLIMIT_AS, &limit) != 0)
    _exit(3);
  try {
    std::thread probe([] {});
    probe.join();
    _exit(4); // the cap did not stop a thread: nothing would be tested
  } catch (const std::system_error &) {
  }
  auto [once, elsewhere] = runCounted(5);
  _exit(once && elsewhere == 0 ? 0 : 1);
}

TEST_CASE("runShares runs every share on the caller when no thread starts",
          "[plan]") {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const char *args[] = {"/proc/self/exe",
                          "runShares on a host that starts no thread", nullptr};
    execv(args[0], const_cast<char *const *>(args));
    _exit(5);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  INFO("child exit " << WEXITSTATUS(status)
                     << " (1: a share ran twice, never or on a thread; 3: "
                        "setrlimit failed; 4: a thread started anyway; 5: "
                        "no exec)");
  REQUIRE(WEXITSTATUS(status) == 0);
}
#endif
