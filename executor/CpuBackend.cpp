//===- CpuBackend.cpp - the reference backend: host memory, threads -------===//

#include "executor/CpuBackend.h"

#include "kernels/Elementwise.h"
#include "kernels/cpu/KernelThreads.h"

#include "executor/Arena.h"
#include "executor/EventBoard.h"
#include "executor/ProcessCommunicator.h"
#include "executor/ShardLayout.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <thread>
#include <utility>
#include <vector>

namespace sharc::exec {
namespace {

class CpuRank final : public RankDevice {
public:
  CpuRank(Arena arena, int64_t numEvents, double timeoutSeconds)
      : arena_(std::move(arena)), events_(numEvents),
        timeoutSeconds_(timeoutSeconds) {}

  void *at(const plan::Buffer &buffer) const override {
    return arena_.at(buffer);
  }
  Status upload(void *dst, const void *src, int64_t numBytes) override {
    std::memcpy(dst, src, static_cast<size_t>(numBytes));
    return Status::ok();
  }
  Status download(void *dst, const void *src, int64_t numBytes) const override {
    std::memcpy(dst, src, static_cast<size_t>(numBytes));
    return Status::ok();
  }
  Status zero(void *dst, int64_t numBytes) override {
    std::memset(dst, 0, static_cast<size_t>(numBytes));
    return Status::ok();
  }
  Status drawNormal(const kernels::NormalDrawArgs &args) override {
    kernels::cpu::drawNormal(args);
    return Status::ok();
  }
  Status convert(kernels::ConstTensorView src, kernels::TensorView dst,
                 int64_t numel) override {
    convertElementsInParallel(src.data, src.dtype, dst.data, dst.dtype, numel);
    return Status::ok();
  }
  Status fill(int64_t, void *dst, uint8_t byte, int64_t numBytes) override {
    std::memset(dst, byte, static_cast<size_t>(numBytes));
    return Status::ok();
  }
  Status poisonActivations() override {
    arena_.poisonActivations();
    return Status::ok();
  }
  const LaunchContext &context(int64_t stream) const override {
    return contexts_[stream];
  }
  Status allocateScratch(const std::vector<int64_t> &) override {
    return Status::ok(); // the cpu kernels declare none
  }
  void beginStep() override { events_.reset(); }
  Status wait(int64_t, int64_t event) override {
    return events_.wait(event, timeoutSeconds_);
  }
  Status signal(int64_t, int64_t event) override {
    events_.signal(event);
    return Status::ok();
  }
  Status finishStep() override { return Status::ok(); }
  Result<int64_t> countNonFinite(int64_t, const void *data, DType dtype,
                                 int64_t numel) override {
    // The stream's launches ran to completion on this thread.
    return kernels::cpu::countNonFinite({data, dtype}, numel);
  }
  bool takeNonFiniteUpdate() override {
    // Set by the rank's stream threads, read once they have all returned.
    return std::exchange(nonFinite_, 0u) != 0;
  }
  void abort() override { events_.abort(); }

  /// One communicator per stream: of that stream's CommWorld, or on that
  /// stream's channel between processes.
  void addStream(std::unique_ptr<Communicator> comm) {
    comms_.push_back(std::move(comm));
    contexts_.push_back(
        LaunchContext{.comm = comms_.back().get(), .nonFinite = &nonFinite_});
  }

private:
  Arena arena_;
  EventBoard events_;
  double timeoutSeconds_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<LaunchContext> contexts_;
  unsigned nonFinite_ = 0;
};

class CpuBackend final : public Backend {
public:
  CpuBackend(const plan::Plan &plan, const BackendOptions &options)
      : plan_(plan), options_(options) {}

  /// One in-process CommWorld per stream, or over processes one channel.
  Status connect() {
    bool overProcesses = options_.processes && options_.processes->count() > 1;
    for (int64_t s = 0; s < plan_.numStreams; ++s) {
      if (!overProcesses) {
        worlds_.push_back(
            std::make_unique<CommWorld>(plan_.mesh, options_.timeoutSeconds));
        continue;
      }
      auto channel = options_.processes->openChannel();
      if (!channel)
        return channel.status();
      channels_.push_back(std::move(*channel));
    }
    return Status::ok();
  }

  const char *name() const override { return "cpu"; }
  bool enqueues() const override { return false; }

  Result<std::unique_ptr<RankDevice>> createRank(int64_t rank) override {
    auto arena = Arena::create(plan_.regionBytes, options_.poisonActivations);
    if (!arena)
      return arena.status();
    auto device = std::make_unique<CpuRank>(std::move(*arena), plan_.numEvents,
                                            options_.timeoutSeconds);
    for (auto &world : worlds_)
      device->addStream(
          std::make_unique<LocalCommunicator>(world->communicator(rank)));
    for (auto &channel : channels_)
      device->addStream(std::make_unique<ProcessCommunicator>(
          plan_.mesh, rank,
          options_.span.count > 0 ? options_.span.count : plan_.worldSize(),
          channel.get(), options_.timeoutSeconds, &aborted_));
    return std::unique_ptr<RankDevice>(std::move(device));
  }
  void abort() override {
    for (auto &world : worlds_)
      world->abort();
    aborted_.store(true);
  }
  void reset() override {
    for (auto &world : worlds_)
      world->reset();
    aborted_.store(false);
  }

private:
  const plan::Plan &plan_;
  BackendOptions options_;
  std::vector<std::unique_ptr<CommWorld>> worlds_; ///< one per stream
  /// Over processes: one channel per stream, and the abort of this
  /// process's ranks (the others' time out).
  std::vector<std::unique_ptr<ProcessChannel>> channels_;
  std::atomic<bool> aborted_{false};
};

/// The threads each of `ranks` rank threads may give a kernel: the cpus
/// this process may run on (its affinity: mpirun may bind it to a few)
/// shared among its ranks, or SHARC_CPU_THREADS where set to a count.
int64_t threadsPerRank(int64_t ranks) {
  if (const char *value = std::getenv("SHARC_CPU_THREADS")) {
    char *end = nullptr;
    long threads = std::strtol(value, &end, 10);
    if (end != value && *end == '\0' && threads >= 1 && threads <= 4096)
      return threads;
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  int64_t count = sched_getaffinity(0, sizeof(cpus), &cpus) == 0
                      ? CPU_COUNT(&cpus)
                      : std::thread::hardware_concurrency();
  return std::max<int64_t>(1, count / std::max<int64_t>(1, ranks));
}

} // namespace

Result<std::unique_ptr<Backend>>
createCpuBackend(const plan::Plan &plan, const BackendOptions &options) {
  kernels::cpu::setKernelThreads(threadsPerRank(
      options.span.count > 0 ? options.span.count : plan.worldSize()));
  auto backend = std::make_unique<CpuBackend>(plan, options);
  SHARC_TRY(backend->connect());
  return std::unique_ptr<Backend>(std::move(backend));
}

} // namespace sharc::exec
