//===- Processes.cpp - one process, or MPI's world ------------------------===//

#include "executor/Processes.h"

#include "executor/Deadline.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace sharc::exec {

#if SHARC_WITH_MPI
/// executor/mpi/MpiProcesses.cpp
Result<std::shared_ptr<Processes>> joinMpi();
#endif

namespace {

/// One process's messages to itself: a queue per tag.
class SelfChannel final : public ProcessChannel {
public:
  Result<uint64_t> send(int64_t to, int64_t tag,
                        std::vector<std::byte> message) override {
    if (to != 0)
      return Status::runtimeError("no process " + std::to_string(to) +
                                  " in a run of one process");
    std::lock_guard<std::mutex> lock(mutex_);
    queues_[tag].push_back(std::move(message));
    arrived_.notify_all();
    return uint64_t{0};
  }
  Status waitSent(uint64_t, double, const std::atomic<bool> &) override {
    return Status::ok(); // in the queue is as far as it goes
  }
  Result<std::vector<std::byte>>
  receive(int64_t from, int64_t tag, double timeoutSeconds,
          const std::atomic<bool> &aborted) override {
    if (from != 0)
      return Status::runtimeError("no process " + std::to_string(from) +
                                  " in a run of one process");
    auto deadline = deadlineAfter(timeoutSeconds);
    std::unique_lock<std::mutex> lock(mutex_);
    auto &queue = queues_[tag];
    while (queue.empty()) {
      if (aborted.load())
        return Status::runtimeError("aborted, another rank failed");
      if (std::chrono::steady_clock::now() >= deadline)
        return Status::runtimeError("timed out, nothing was sent");
      // The abort flag is polled: nobody notifies on it.
      arrived_.wait_for(lock, std::chrono::milliseconds(10));
    }
    std::vector<std::byte> message = std::move(queue.front());
    queue.pop_front();
    return message;
  }
  int64_t maxTag() const override { return INT32_MAX; }

private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<int64_t, std::deque<std::vector<std::byte>>> queues_;
};

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
  Result<std::unique_ptr<ProcessChannel>> openChannel() override {
    return std::unique_ptr<ProcessChannel>(std::make_unique<SelfChannel>());
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
