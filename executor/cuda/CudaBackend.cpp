//===- CudaBackend.cpp - plans on NVIDIA GPUs -----------------------------===//

#include "executor/cuda/CudaBackend.h"

#include "executor/TransferOrder.h"
#include "executor/cuda/CudaRank.h"
#include "executor/cuda/NcclCommunicator.h"
#include "executor/cuda/PeerMemoryCommunicator.h"
#include "executor/cuda/SharedGpuCommunicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

namespace sharc::exec {

namespace {

class CudaBackend final : public Backend, public CudaRankOwner {
public:
  CudaBackend(const plan::Plan &plan, const BackendOptions &options)
      : plan_(plan), options_(options) {}

  Status setUp() {
    // NCCL (and the shared GPUs' communicator, which pairs as NCCL does)
    // matches transfers in order, not by tag.
    SHARC_TRY(checkTransfersPairInOrder(plan_));
    if (options_.shareGpus)
      return setUpShared();
    // Under mpirun the node's processes take consecutive blocks of GPUs.
    Processes &processes =
        options_.processes ? *options_.processes : *singleProcess();
    firstDevice_ = processes.localIndex() * options_.span.count;
    // Collectives over several axes at once get one group each.
    std::vector<std::string> multiAxisKeys;
    for (const plan::Instruction &instr : plan_.instructions) {
      std::string axis = instr.getString("axis");
      if (axis.find(',') != std::string::npos &&
          std::find(multiAxisKeys.begin(), multiAxisKeys.end(), axis) ==
              multiAxisKeys.end())
        multiAxisKeys.push_back(axis);
    }
    auto groups =
        NcclGroups::create(plan_.mesh, plan_.numStreams, options_.span,
                           firstDevice_, processes, multiAxisKeys);
    if (!groups)
      return groups.status();
    groups_ = std::move(*groups);
    return Status::ok();
  }

  /// Ranks round-robin on this process's GPUs, one host rendezvous per
  /// stream as on the cpu backend. Where every GPU in use reads every
  /// other's memory, collectives run on the GPUs (PeerMemoryCommunicator),
  /// else on the host over managed memory (SharedGpuCommunicator).
  Status setUpShared() {
    if (options_.processes && options_.processes->count() > 1)
      return Status::invalidInput(
          "--share-gpus runs every rank in one process, not under mpirun");
    numDevices_ = static_cast<int>(cudaDevicesVisible());
    if (numDevices_ == 0)
      return Status::invalidInput("--share-gpus: no CUDA device is visible");
    // No more GPUs than ranks: rank r is on GPU r % numDevices_.
    numDevices_ =
        static_cast<int>(std::min<int64_t>(numDevices_, plan_.worldSize()));
    auto peers = enablePeerAccess(numDevices_);
    if (!peers)
      return peers.status();
    peerMemory_ = *peers;
    for (int device = 0; device < numDevices_ && !peerMemory_; ++device) {
      int concurrent = 0;
      SHARC_CUDA(cudaDeviceGetAttribute(
          &concurrent, cudaDevAttrConcurrentManagedAccess, device));
      if (!concurrent)
        return Status::invalidInput(
            "--share-gpus needs GPUs that read each other's memory, or "
            "managed memory the host and the GPU may use at once "
            "(concurrentManagedAccess), which GPU " +
            std::to_string(device) + " lacks");
    }
    for (int64_t s = 0; s < plan_.numStreams; ++s) {
      worlds_.push_back(
          std::make_unique<CommWorld>(plan_.mesh, options_.timeoutSeconds));
      peerWorlds_.push_back(std::make_unique<PeerMemoryWorld>(
          plan_.mesh, options_.timeoutSeconds));
    }
    return Status::ok();
  }

  /// Whether each of GPUs [0, numDevices) may read every other's memory,
  /// enabling it where so.
  static Result<bool> enablePeerAccess(int numDevices) {
    if (!cudaDevicesReachEachOther(numDevices))
      return false;
    for (int a = 0; a < numDevices; ++a)
      for (int b = 0; b < numDevices; ++b) {
        if (a == b)
          continue;
        SHARC_CUDA(cudaSetDevice(a));
        cudaError_t error = cudaDeviceEnablePeerAccess(b, 0);
        if (error == cudaErrorPeerAccessAlreadyEnabled)
          (void)cudaGetLastError();
        else
          SHARC_CUDA(error);
      }
    return true;
  }

  const char *name() const override { return "cuda"; }
  bool enqueues() const override { return true; }
  Result<std::unique_ptr<RankDevice>> createRank(int64_t rank) override {
    int gpu = shared()
                  ? static_cast<int>(rank % numDevices_)
                  : static_cast<int>(firstDevice_ + rank - options_.span.first);
    auto device = std::make_unique<CudaRank>(*this, rank, gpu);
    SHARC_TRY(
        device->setUp(plan_, options_.poisonActivations, options_.profile));
    return std::unique_ptr<RankDevice>(std::move(device));
  }
  void abort() override {
    aborted_.store(true);
    for (auto &world : worlds_)
      world->abort();
    for (auto &world : peerWorlds_)
      world->wakeAll();
  }
  void reset() override {
    aborted_.store(false);
    for (auto &world : worlds_)
      world->reset();
    for (auto &world : peerWorlds_)
      world->reset();
  }
  void cancelEnqueued() override {
    if (groups_)
      groups_->abortAll();
  }

  bool aborted() const override { return aborted_.load(); }
  double timeoutSeconds() const override { return options_.timeoutSeconds; }
  bool shared() const override { return options_.shareGpus; }
  bool hostCollectives() const override {
    return options_.shareGpus && !peerMemory_;
  }
  std::unique_ptr<Communicator> communicator(int64_t rank, int64_t stream,
                                             cudaStream_t cudaStream,
                                             void *staging,
                                             int64_t stagingBytes) override {
    if (shared() && peerMemory_)
      return std::make_unique<PeerMemoryCommunicator>(
          worlds_[stream]->communicator(rank), *peerWorlds_[stream],
          *worlds_[stream], static_cast<int>(rank % numDevices_), cudaStream);
    if (shared())
      return std::make_unique<SharedGpuCommunicator>(
          worlds_[stream]->communicator(rank), cudaStream);
    return std::make_unique<NcclCommunicator>(
        *groups_, rank, stream, cudaStream, staging, stagingBytes);
  }
  Status asyncError(int64_t rank) override {
    return groups_ ? groups_->asyncError(rank) : Status::ok();
  }
  void abortCollectives() override {
    if (groups_)
      groups_->abortAll();
    for (auto &world : worlds_)
      world->abort();
  }

private:
  const plan::Plan &plan_;
  BackendOptions options_;
  std::unique_ptr<NcclGroups> groups_;
  /// Shared GPUs: one rendezvous per stream, and the GPUs to go round.
  std::vector<std::unique_ptr<CommWorld>> worlds_;
  /// Shared GPUs that read each other's memory: the transfers' channels.
  std::vector<std::unique_ptr<PeerMemoryWorld>> peerWorlds_;
  bool peerMemory_ = false;
  int numDevices_ = 0;
  int64_t firstDevice_ = 0; ///< the GPU of options_.span.first
  std::atomic<bool> aborted_{false};
};

} // namespace

int64_t cudaLeastFreeBytes(int64_t numDevices) {
  int64_t least = -1;
  for (int device = 0; device < numDevices; ++device) {
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    int64_t freeNow = static_cast<int64_t>(freeBytes);
    least = least < 0 ? freeNow : std::min(least, freeNow);
  }
  return least;
}

bool cudaDevicesReachEachOther(int64_t numDevices) {
  for (int a = 0; a < numDevices; ++a)
    for (int b = 0; b < numDevices; ++b) {
      int can = 0;
      if (a != b &&
          (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess || !can)) {
        (void)cudaGetLastError();
        return false;
      }
    }
  return true;
}

int64_t cudaDevicesVisible() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

Result<std::unique_ptr<Backend>>
createCudaBackend(const plan::Plan &plan, const BackendOptions &options) {
  auto backend = std::make_unique<CudaBackend>(plan, options);
  SHARC_TRY(backend->setUp());
  return std::unique_ptr<Backend>(std::move(backend));
}

} // namespace sharc::exec
