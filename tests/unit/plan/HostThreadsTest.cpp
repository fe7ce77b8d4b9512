//===- HostThreadsTest.cpp - shares of host work on threads ---------------===//
//
// runShares runs every share once, on threads while the host can start
// them, and on the calling thread when it cannot: a fresh process whose
// address space is capped below a thread's stack starts no thread, and
// still runs every share.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/HostThreads.h"
#include "tests/unit/NoThreads.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace sharc;

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

} // namespace

TEST_CASE("runShares runs every share once, on threads", "[plan]") {
  for (int n : {1, 2, 7}) {
    auto [once, elsewhere] = runCounted(n);
    REQUIRE(once);
    REQUIRE(elsewhere == n - 1);
  }
}

TEST_CASE("resizeForOverwrite grows with zeros and keeps what is large "
          "enough",
          "[plan]") {
  // Past 8 MiB a vector grows into new storage zeroed on threads; the
  // size, the zeros and the storage kept on shrinking are as a
  // std::vector's resize would leave them, although a ByteVector's own
  // resize zeroes nothing.
  ByteVector bytes;
  const size_t big = (size_t{20} << 20) + 12345;
  resizeForOverwrite(bytes, big);
  REQUIRE(bytes.size() == big);
  REQUIRE(std::all_of(bytes.begin(), bytes.end(),
                      [](uint8_t b) { return b == 0; }));
  std::fill(bytes.begin(), bytes.end(), uint8_t{7});
  const uint8_t *storage = bytes.data();
  resizeForOverwrite(bytes, big / 2);
  REQUIRE(bytes.size() == big / 2);
  REQUIRE(bytes.data() == storage);
  REQUIRE(bytes.back() == 7);
  resizeForOverwrite(bytes, big);
  REQUIRE(bytes.data() == storage);
  REQUIRE(bytes[big / 2] == 0);
  BytesOf<std::byte> small(10, std::byte{5});
  small.reserve(100);
  resizeForOverwrite(small, 50);
  REQUIRE(small.size() == 50);
  for (size_t i = 0; i < small.size(); ++i)
    REQUIRE(small[i] == std::byte{i < 10 ? uint8_t{5} : uint8_t{0}});
  small.resize(10);
  resizeForOverwrite(small, 100);
  REQUIRE(std::all_of(small.begin() + 10, small.end(),
                      [](std::byte b) { return b == std::byte{0}; }));
}

#ifdef SHARC_NO_THREADS_TESTABLE
TEST_CASE("runShares on a host that starts no thread", "[.capped]") {
  // Room for the shares' bookkeeping, not for one 8 MiB thread stack.
  test::capThreads(2 << 20);
  auto [once, elsewhere] = runCounted(5);
  _exit(once && elsewhere == 0 ? 0 : 1);
}

TEST_CASE("runShares runs every share on the caller when no thread starts",
          "[plan]") {
  int code =
      test::runInFreshProcess("runShares on a host that starts no thread");
  INFO("exit " << code
               << " (1: a share ran twice, never or on a thread; 3: "
                  "setrlimit failed; 4: a thread started anyway; 5: no exec)");
  REQUIRE(code == 0);
}
#endif
