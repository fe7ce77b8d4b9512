//===- ProcessesTest.cpp - the processes a run spans ----------------------===//
//
// Run alone (one process) and under `mpirun -np 2` (ctest runs both): the
// host collectives sharc's runtime agrees on over processes, with values
// that differ per process, so a collective that did nothing fails.
//
//===----------------------------------------------------------------------===//

#include "executor/Processes.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <vector>

using namespace sharc::exec;

namespace {

std::shared_ptr<Processes> join() {
  auto processes = joinProcesses();
  REQUIRE(processes.status().isOk());
  return *processes;
}

} // namespace

TEST_CASE("joinProcesses: MPI's world under mpirun, else one process") {
  auto processes = join();
  const char *launched = std::getenv("OMPI_COMM_WORLD_SIZE");
  CHECK(processes->count() == (launched ? std::atoll(launched) : 1));
  CHECK(processes->index() >= 0);
  CHECK(processes->index() < processes->count());
  if (launched)
    CHECK_THAT(processes->describe(), Catch::Contains("MPI, process"));
}

TEST_CASE("span: consecutive ranks per process, even shares only") {
  auto processes = join();
  int64_t count = processes->count(), index = processes->index();
  auto span = processes->span(4 * count);
  REQUIRE(span.status().isOk());
  CHECK(span->first == 4 * index);
  CHECK(span->count == 4);
  CHECK(span->world == 4 * count);
  CHECK(span->holds(4 * index + 3));
  CHECK_FALSE(span->holds(4 * index + 4));
  if (count > 1) {
    auto uneven = processes->span(count + 1);
    REQUIRE_FALSE(uneven.status().isOk());
    CHECK_THAT(uneven.status().message(),
               Catch::Contains("cannot be shared evenly"));
  }
}

TEST_CASE("broadcast: every process ends with the root's bytes") {
  auto processes = join();
  int64_t count = processes->count(), index = processes->index();
  int64_t root = count - 1;
  std::vector<int32_t> values(1000);
  std::iota(values.begin(), values.end(), static_cast<int32_t>(index * 7 + 1));
  REQUIRE(processes
              ->broadcast(values.data(),
                          static_cast<int64_t>(values.size() * 4), root)
              .isOk());
  for (size_t i = 0; i < values.size(); ++i)
    REQUIRE(values[i] == static_cast<int32_t>(root * 7 + 1 + i));
}

TEST_CASE("allGather: process p's block at p x bytes, in place or not") {
  auto processes = join();
  int64_t count = processes->count(), index = processes->index();
  const int64_t n = 513; // odd, so blocks are not word-aligned
  std::vector<uint8_t> mine(n), all(static_cast<size_t>(n * count), 0);
  for (int64_t i = 0; i < n; ++i)
    mine[i] = static_cast<uint8_t>(index * 31 + i);
  REQUIRE(processes->allGather(mine.data(), all.data(), n).isOk());
  for (int64_t p = 0; p < count; ++p)
    for (int64_t i = 0; i < n; ++i)
      REQUIRE(all[p * n + i] == static_cast<uint8_t>(p * 31 + i));
  // In place: this process's block already sits at its offset (the
  // runtime's gathers send from there).
  std::vector<uint8_t> inPlace(static_cast<size_t>(n * count), 0);
  std::copy(mine.begin(), mine.end(), inPlace.begin() + index * n);
  REQUIRE(processes->allGather(inPlace.data() + index * n, inPlace.data(), n)
              .isOk());
  CHECK(inPlace == all);
}

TEST_CASE("max: the largest value of any process") {
  auto processes = join();
  auto largest = processes->max(1.5 + static_cast<double>(processes->index()));
  REQUIRE(largest.status().isOk());
  CHECK(*largest == 1.5 + static_cast<double>(processes->count() - 1));
}

TEST_CASE("max of several values: element by element, each its own largest") {
  auto processes = join();
  auto index = static_cast<double>(processes->index());
  auto last = static_cast<double>(processes->count() - 1);
  // The first grows with the index, the second shrinks, the third is 1 on
  // process 0 alone.
  auto largest = processes->max({index, -index, index == 0 ? 1.0 : 0.0});
  REQUIRE(largest.status().isOk());
  CHECK(*largest == std::vector<double>{last, 0.0, 1.0});
}
