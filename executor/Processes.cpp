//===- Processes.cpp - one process, or MPI's world ------------------------===//

#include "executor/Processes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace sharc::exec {

#if SHARC_WITH_MPI
/// executor/mpi/MpiProcesses.cpp
Result<std::shared_ptr<Processes>> joinMpi();
#endif

namespace {

class SingleProcess final : public Processes {
public:
  int64_t index() const override { return 0; }
  int64_t count() const override { return 1; }
  int64_t localIndex() const override { return 0; }
  std::string describe() const override { return "one process"; }
  Status broadcast(void *data, int64_t numBytes, int64_t root) override {
    return Status::ok();
  }
  Status allGather(const void *send, void *recv, int64_t numBytes) override {
    if (numBytes > 0 && send != recv)
      std::memmove(recv, send, static_cast<size_t>(numBytes));
    return Status::ok();
  }
};

/// The world size a launcher announced in the environment; 0 when none.
int64_t launcherWorldSize() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char *value = std::getenv(name))
      return std::atoll(value);
  return 0;
}

} // namespace

Result<double> Processes::max(double value) {
  auto largest = max(std::vector<double>{value});
  if (!largest)
    return largest.status();
  return largest->front();
}

Result<std::vector<double>> Processes::max(const std::vector<double> &values) {
  size_t n = values.size();
  std::vector<double> all(n * static_cast<size_t>(count()));
  SHARC_TRY(allGather(values.data(), all.data(),
                      static_cast<int64_t>(n * sizeof(double))));
  std::vector<double> largest(values);
  for (size_t at = 0; at < all.size(); ++at)
    largest[at % n] = std::max(largest[at % n], all[at]);
  return largest;
}

Result<RankSpan> Processes::span(int64_t world) const {
  if (world < count() || world % count() != 0)
    return Status::invalidInput(
        "the plan's " + std::to_string(world) + " ranks cannot be shared " +
        "evenly by " + std::to_string(count()) +
        " processes: launch a number of processes that divides it");
  int64_t perProcess = world / count();
  return RankSpan{
      .first = index() * perProcess, .count = perProcess, .world = world};
}

std::shared_ptr<Processes> singleProcess() {
  static std::shared_ptr<Processes> single = std::make_shared<SingleProcess>();
  return single;
}

Result<std::shared_ptr<Processes>> joinProcesses() {
  int64_t launched = launcherWorldSize();
#if SHARC_WITH_MPI
  if (launched > 0)
    return joinMpi();
#else
  if (launched > 1)
    return Status::invalidInput(
        "launched as one of " + std::to_string(launched) +
        " processes, but this build has no MPI: rebuild with Open MPI's "
        "development files (libopenmpi-dev) or run one process");
#endif
  return singleProcess();
}

} // namespace sharc::exec
