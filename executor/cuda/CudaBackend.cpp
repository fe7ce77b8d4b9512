//===- CudaBackend.cpp - plans on NVIDIA GPUs -----------------------------===//

#include "executor/cuda/CudaBackend.h"

#include "executor/TransferOrder.h"
#include "executor/cuda/MappedFlag.h"
#include "executor/cuda/NcclCommunicator.h"
#include "executor/cuda/SharedGpuCommunicator.h"
#include "executor/cuda/StepGraph.h"
#include "executor/cuda/StreamEngines.h"
#include "kernels/Elementwise.h"
#include "kernels/cuda/Launch.h"
#include "planner/plan/DeviceWorkspace.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

namespace sharc::exec {

namespace {

class CudaBackend;

class CudaRank final : public RankDevice {
public:
  CudaRank(CudaBackend &backend, int64_t rank, int device)
      : backend_(backend), rank_(rank), device_(device) {}
  ~CudaRank() override;

  Status setUp(const plan::Plan &plan, bool poison, bool profile);

  void *at(const plan::Buffer &buffer) const override {
    auto it = regions_.find(buffer.region);
    return it == regions_.end()
               ? nullptr
               : static_cast<std::byte *>(it->second) + buffer.offset;
  }
  Status upload(void *dst, const void *src, int64_t numBytes) override {
    SHARC_CUDA(cudaSetDevice(device()));
    SHARC_CUDA(cudaMemcpy(dst, src, static_cast<size_t>(numBytes),
                          cudaMemcpyHostToDevice));
    return Status::ok();
  }
  Status download(void *dst, const void *src, int64_t numBytes) const override {
    SHARC_CUDA(cudaSetDevice(device()));
    SHARC_CUDA(cudaMemcpy(dst, src, static_cast<size_t>(numBytes),
                          cudaMemcpyDeviceToHost));
    return Status::ok();
  }
  Status zero(void *dst, int64_t numBytes) override {
    SHARC_CUDA(cudaSetDevice(device()));
    // On the legacy stream, finished before it returns: the plan's streams
    // are non-blocking and would not wait for it.
    SHARC_CUDA(cudaMemset(dst, 0, static_cast<size_t>(numBytes)));
    SHARC_CUDA(cudaStreamSynchronize(nullptr));
    return Status::ok();
  }
  Status fill(int64_t stream, void *dst, uint8_t byte,
              int64_t numBytes) override {
    SHARC_CUDA(cudaMemsetAsync(dst, byte, static_cast<size_t>(numBytes),
                               streams_[stream]));
    return Status::ok();
  }
  Status poisonActivations() override;
  const LaunchContext &context(int64_t stream) const override {
    return contexts_[stream];
  }
  Status allocateScratch(const std::vector<int64_t> &bytesPerStream) override;
  void beginStep() override;
  Status wait(int64_t stream, int64_t event) override {
    SHARC_CUDA(cudaStreamWaitEvent(streams_[stream], events_[event], 0));
    return Status::ok();
  }
  Status signal(int64_t stream, int64_t event) override {
    SHARC_CUDA(cudaEventRecord(events_[event], streams_[stream]));
    return Status::ok();
  }
  Status order(int64_t from, int64_t to) override {
    // The event after the plan's: recorded anew at each use.
    SHARC_CUDA(cudaEventRecord(events_.back(), streams_[from]));
    SHARC_CUDA(cudaStreamWaitEvent(streams_[to], events_.back(), 0));
    return Status::ok();
  }
  Status finishStep() override;
  /// Returns once `streams` have finished, polling them so that a
  /// collective that never completes is aborted after the deadline.
  Status drain(const std::vector<cudaStream_t> &streams, const char *what);
  void abort() override {}
  Status beginTimed(int64_t stream, int64_t index) override;
  Status endTimed(int64_t stream, int64_t index) override;
  Result<std::vector<std::vector<TraceRecord>>> timings() override;
  Result<int64_t> countNonFinite(int64_t stream, const void *data, DType dtype,
                                 int64_t numel) override;
  bool takeNonFiniteUpdate() override {
    // The streams have drained (finishStep), so every write has landed.
    return nonFinite_.take();
  }
  Status allocateStepConstants(int64_t bytes) override;
  Status uploadStepConstants(const void *table, int64_t bytes) override;
  /// Host collectives (shared GPUs) cannot be captured.
  bool canCapture() const override;
  bool hasCapturedStep() const override { return graph_.captured(); }
  Status beginCapture() override { return graph_.begin(streams_); }
  Status endCapture() override { return graph_.end(); }
  Status replayStep() override { return graph_.replay(); }
  int64_t workspaceBytes() const override {
    int64_t bytes = 0;
    for (const auto &gemm : gemms_)
      bytes += gemm ? plan::kGemmWorkspaceBytes : 0;
    for (const LaunchContext &context : contexts_)
      bytes += context.scratchBytes;
    for (int64_t staging : stagingBytes_)
      bytes += staging;
    return bytes;
  }
  int64_t deviceBytesInUse() const override {
    size_t freeBytes = 0, totalBytes = 0;
    if (cudaSetDevice(device()) != cudaSuccess ||
        cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess)
      return -1;
    return static_cast<int64_t>(totalBytes - freeBytes);
  }

private:
  int device() const { return device_; }

  CudaBackend &backend_;
  int64_t rank_;
  int device_;
  std::map<plan::Region, void *> regions_;
  std::map<plan::Region, int64_t> regionBytes_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;
  std::vector<void *> staging_;
  std::vector<int64_t> stagingBytes_; ///< of each stream's staging buffer
  std::vector<void *> scratch_;       ///< per stream, null where none is needed
  std::vector<std::unique_ptr<GemmEngine>> gemms_;
  std::vector<std::unique_ptr<AttentionEngine>> attentions_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::vector<LaunchContext> contexts_;
  /// Profiling: an origin event every stream waits on at the step's start,
  /// and a (start, end) timing event pair per instruction.
  cudaEvent_t origin_ = nullptr;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> instrEvents_;
  std::vector<std::vector<int64_t>> timedInstrs_; ///< per stream, in order
  /// Step constants: the device table, its pinned host staging, and the
  /// event every other stream waits on after the upload.
  void *stepConstants_ = nullptr;
  void *stepConstantsHost_ = nullptr;
  int64_t stepConstantsBytes_ = 0;
  cudaEvent_t uploaded_ = nullptr;
  MappedFlag nonFinite_; ///< the updates' (kernels/AdamW.h)
  StepGraph graph_;
  /// Checking mode's device counter of non-finite elements.
  unsigned long long *nonFiniteCount_ = nullptr;
};

class CudaBackend final : public Backend {
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
  /// stream as on the cpu backend.
  Status setUpShared() {
    if (options_.processes && options_.processes->count() > 1)
      return Status::invalidInput(
          "--share-gpus runs every rank in one process, not under mpirun");
    numDevices_ = static_cast<int>(cudaDevicesVisible());
    if (numDevices_ == 0)
      return Status::invalidInput("--share-gpus: no CUDA device is visible");
    for (int device = 0; device < numDevices_; ++device) {
      int concurrent = 0;
      SHARC_CUDA(cudaDeviceGetAttribute(
          &concurrent, cudaDevAttrConcurrentManagedAccess, device));
      if (!concurrent)
        return Status::invalidInput(
            "--share-gpus needs managed memory the host and the GPU may use "
            "at once (concurrentManagedAccess), which GPU " +
            std::to_string(device) + " lacks");
    }
    for (int64_t s = 0; s < plan_.numStreams; ++s)
      worlds_.push_back(
          std::make_unique<CommWorld>(plan_.mesh, options_.timeoutSeconds));
    return Status::ok();
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
  }
  void reset() override {
    aborted_.store(false);
    for (auto &world : worlds_)
      world->reset();
  }
  void cancelEnqueued() override {
    if (groups_)
      groups_->abortAll();
  }

  bool aborted() const { return aborted_.load(); }
  double timeoutSeconds() const { return options_.timeoutSeconds; }
  bool shared() const { return options_.shareGpus; }
  /// Rank `rank`'s communicator for plan stream `stream`.
  std::unique_ptr<Communicator> communicator(int64_t rank, int64_t stream,
                                             cudaStream_t cudaStream,
                                             void *staging,
                                             int64_t stagingBytes) {
    if (shared())
      return std::make_unique<SharedGpuCommunicator>(
          worlds_[stream]->communicator(rank), cudaStream);
    return std::make_unique<NcclCommunicator>(
        *groups_, rank, stream, cudaStream, staging, stagingBytes);
  }
  /// NCCL's asynchronous error for `rank`, where NCCL runs.
  Status asyncError(int64_t rank) {
    return groups_ ? groups_->asyncError(rank) : Status::ok();
  }
  void abortCollectives() {
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
  int numDevices_ = 0;
  int64_t firstDevice_ = 0; ///< the GPU of options_.span.first
  std::atomic<bool> aborted_{false};
};

CudaRank::~CudaRank() {
  (void)cudaSetDevice(device());
  for (cudaStream_t stream : streams_)
    (void)cudaStreamSynchronize(stream);
  comms_.clear();
  gemms_.clear();
  attentions_.clear();
  for (cudaEvent_t event : events_)
    (void)cudaEventDestroy(event);
  for (auto [start, end] : instrEvents_) {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(end);
  }
  if (origin_)
    (void)cudaEventDestroy(origin_);
  for (cudaStream_t stream : streams_)
    (void)cudaStreamDestroy(stream);
  for (void *buffer : staging_)
    (void)cudaFree(buffer);
  for (void *buffer : scratch_)
    (void)cudaFree(buffer);
  if (stepConstants_)
    (void)cudaFree(stepConstants_);
  if (stepConstantsHost_)
    (void)cudaFreeHost(stepConstantsHost_);
  if (uploaded_)
    (void)cudaEventDestroy(uploaded_);
  if (nonFiniteCount_)
    (void)cudaFree(nonFiniteCount_);
  for (auto &[region, base] : regions_)
    (void)cudaFree(base);
}

bool CudaRank::canCapture() const { return !backend_.shared(); }

Status CudaRank::setUp(const plan::Plan &plan, bool poison, bool profile) {
  SHARC_CUDA(cudaSetDevice(device()));
  int64_t planned = 0;
  for (const auto &[region, numBytes] : plan.regionBytes)
    planned += numBytes;
  for (const auto &[region, numBytes] : plan.regionBytes) {
    if (numBytes == 0)
      continue;
    void *base = nullptr;
    // Shared GPUs: the host runs the collectives on the regions.
    cudaError_t error =
        backend_.shared()
            ? cudaMallocManaged(&base, static_cast<size_t>(numBytes))
            : cudaMalloc(&base, static_cast<size_t>(numBytes));
    if (error == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t freeBytes = 0, totalBytes = 0;
      (void)cudaMemGetInfo(&freeBytes, &totalBytes);
      return Status::outOfMemory(
          "out of memory on GPU " + std::to_string(device()) + ": the plan's " +
          plan::regionName(region) + " region needs " +
          std::to_string(numBytes >> 20) + " MiB (" +
          std::to_string(planned >> 20) + " MiB in all), " +
          std::to_string(freeBytes >> 20) + " MiB are free");
    }
    SHARC_CUDA(error);
    regions_[region] = base;
    regionBytes_[region] = numBytes;
    bool poisoned = poison && (region == plan::Region::Activation ||
                               region == plan::Region::Gradient);
    SHARC_CUDA(
        cudaMemset(base, poisoned ? 0xff : 0, static_cast<size_t>(numBytes)));
  }
  auto priorities = streamPriorities(plan.numStreams);
  if (!priorities)
    return priorities.status();
  for (int64_t s = 0; s < plan.numStreams; ++s) {
    cudaStream_t stream = nullptr;
    SHARC_CUDA(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                            (*priorities)[s]));
    streams_.push_back(stream);
    // cuBLASLt's workspace only where a GEMM runs (not on a communication
    // stream); bind refuses a GEMM on a stream without an engine.
    std::unique_ptr<GemmEngine> gemm;
    if (plan::streamRunsGemm(plan, s)) {
      auto engine = createGemmEngine(plan::kGemmWorkspaceBytes);
      if (!engine)
        return engine.status();
      gemm = std::move(*engine);
    }
    gemms_.push_back(std::move(gemm));
    auto attention = createAttentionEngine(stream);
    if (!attention)
      return attention.status();
    attentions_.push_back(std::move(*attention));
    int64_t staging = plan::collectiveStagingBytes(plan, s);
    stagingBytes_.push_back(staging);
    void *stagingBuffer = nullptr;
    if (staging > 0)
      SHARC_CUDA(cudaMalloc(&stagingBuffer, static_cast<size_t>(staging)));
    staging_.push_back(stagingBuffer);
    comms_.push_back(
        backend_.communicator(rank_, s, stream, stagingBuffer, staging));
  }
  SHARC_TRY(nonFinite_.allocate());
  for (int64_t s = 0; s < plan.numStreams; ++s)
    contexts_.push_back(LaunchContext{.stream = streams_[s],
                                      .comm = comms_[s].get(),
                                      .gemm = gemms_[s].get(),
                                      .attention = attentions_[s].get(),
                                      .nonFinite = nonFinite_.devicePointer()});
  // The plan's events, and one for order().
  for (int64_t e = 0; e <= plan.numEvents; ++e) {
    cudaEvent_t event = nullptr;
    SHARC_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    events_.push_back(event);
  }
  if (profile) {
    SHARC_CUDA(cudaEventCreate(&origin_));
    for (size_t i = 0; i < plan.instructions.size(); ++i) {
      cudaEvent_t start = nullptr, end = nullptr;
      SHARC_CUDA(cudaEventCreate(&start));
      SHARC_CUDA(cudaEventCreate(&end));
      instrEvents_.push_back({start, end});
    }
    timedInstrs_.resize(static_cast<size_t>(plan.numStreams));
  }
  SHARC_CUDA(cudaDeviceSynchronize());
  return Status::ok();
}

Status CudaRank::allocateScratch(const std::vector<int64_t> &bytesPerStream) {
  if (bytesPerStream.size() > contexts_.size())
    return Status::invalidInput(
        "scratch for stream " + std::to_string(bytesPerStream.size() - 1) +
        ", the rank has " + std::to_string(contexts_.size()) + " streams");
  SHARC_CUDA(cudaSetDevice(device()));
  scratch_.resize(contexts_.size(), nullptr);
  for (size_t s = 0; s < bytesPerStream.size(); ++s) {
    if (bytesPerStream[s] <= contexts_[s].scratchBytes)
      continue;
    // A rebinding may ask for more; nothing is enqueued at set-up.
    SHARC_CUDA(cudaFree(scratch_[s]));
    scratch_[s] = nullptr;
    contexts_[s].scratch = nullptr;
    contexts_[s].scratchBytes = 0;
    cudaError_t error =
        cudaMalloc(&scratch_[s], static_cast<size_t>(bytesPerStream[s]));
    if (error == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return Status::runtimeError(
          "out of memory on GPU " + std::to_string(device()) +
          ": the kernels' scratch for stream " + std::to_string(s) + " needs " +
          std::to_string(bytesPerStream[s]) + " bytes");
    }
    SHARC_CUDA(error);
    contexts_[s].scratch = scratch_[s];
    contexts_[s].scratchBytes = bytesPerStream[s];
  }
  return Status::ok();
}

Status CudaRank::allocateStepConstants(int64_t bytes) {
  if (bytes <= 0)
    return Status::ok();
  SHARC_CUDA(cudaSetDevice(device()));
  SHARC_CUDA(cudaMalloc(&stepConstants_, static_cast<size_t>(bytes)));
  SHARC_CUDA(cudaMallocHost(&stepConstantsHost_, static_cast<size_t>(bytes)));
  SHARC_CUDA(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
  stepConstantsBytes_ = bytes;
  for (LaunchContext &context : contexts_)
    context.stepConstants = stepConstants_;
  return Status::ok();
}

Result<int64_t> CudaRank::countNonFinite(int64_t stream, const void *data,
                                         DType dtype, int64_t numel) {
  if (dtype != DType::F32 && dtype != DType::BF16)
    return int64_t(0);
  if (!nonFiniteCount_)
    SHARC_CUDA(cudaMalloc(&nonFiniteCount_, sizeof(unsigned long long)));
  cudaStream_t s = streams_[stream];
  SHARC_CUDA(
      cudaMemsetAsync(nonFiniteCount_, 0, sizeof(unsigned long long), s));
  SHARC_TRY(
      kernels::cuda::countNonFinite({data, dtype}, numel, nonFiniteCount_, s));
  unsigned long long count = 0;
  SHARC_CUDA(cudaMemcpyAsync(&count, nonFiniteCount_, sizeof(count),
                             cudaMemcpyDeviceToHost, s));
  SHARC_TRY(drain({s}, "checking an output"));
  return static_cast<int64_t>(count);
}

Status CudaRank::uploadStepConstants(const void *table, int64_t bytes) {
  if (bytes != stepConstantsBytes_)
    return Status::invalidInput(
        "step constants of " + std::to_string(bytes) + " bytes, " +
        std::to_string(stepConstantsBytes_) + " were allocated");
  if (bytes == 0)
    return Status::ok();
  // The last step has drained (finishStep), so the staging is free.
  std::memcpy(stepConstantsHost_, table, static_cast<size_t>(bytes));
  SHARC_CUDA(cudaMemcpyAsync(stepConstants_, stepConstantsHost_,
                             static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                             streams_[0]));
  SHARC_CUDA(cudaEventRecord(uploaded_, streams_[0]));
  for (size_t s = 1; s < streams_.size(); ++s)
    SHARC_CUDA(cudaStreamWaitEvent(streams_[s], uploaded_, 0));
  return Status::ok();
}

void CudaRank::beginStep() {
  (void)cudaSetDevice(device());
  if (!origin_)
    return;
  for (auto &instrs : timedInstrs_)
    instrs.clear();
  // Every stream starts after the origin, so no span precedes time zero.
  (void)cudaEventRecord(origin_, streams_[0]);
  for (size_t s = 1; s < streams_.size(); ++s)
    (void)cudaStreamWaitEvent(streams_[s], origin_, 0);
}

Status CudaRank::beginTimed(int64_t stream, int64_t index) {
  if (!origin_)
    return Status::ok();
  timedInstrs_[stream].push_back(index);
  SHARC_CUDA(cudaEventRecord(instrEvents_[index].first, streams_[stream]));
  return Status::ok();
}

Status CudaRank::endTimed(int64_t stream, int64_t index) {
  if (!origin_)
    return Status::ok();
  SHARC_CUDA(cudaEventRecord(instrEvents_[index].second, streams_[stream]));
  return Status::ok();
}

Result<std::vector<std::vector<TraceRecord>>> CudaRank::timings() {
  std::vector<std::vector<TraceRecord>> records(timedInstrs_.size());
  auto sinceOrigin = [this](cudaEvent_t event) -> Result<int64_t> {
    float ms = 0;
    SHARC_CUDA(cudaEventElapsedTime(&ms, origin_, event));
    return static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  };
  for (size_t s = 0; s < timedInstrs_.size(); ++s)
    for (int64_t index : timedInstrs_[s]) {
      auto start = sinceOrigin(instrEvents_[index].first);
      auto end = sinceOrigin(instrEvents_[index].second);
      if (!start || !end)
        return start ? end.status() : start.status();
      records[s].push_back({index, *start, *end});
    }
  return records;
}

Status CudaRank::poisonActivations() {
  // All-ones bytes are a NaN in f32 and bf16 alike, as on the cpu (Arena).
  SHARC_CUDA(cudaSetDevice(device()));
  for (plan::Region region :
       {plan::Region::Activation, plan::Region::Gradient}) {
    auto it = regions_.find(region);
    if (it != regions_.end())
      SHARC_TRY(fill(0, it->second, 0xff, regionBytes_[region]));
  }
  return Status::ok();
}

Status CudaRank::finishStep() { return drain(streams_, "the step"); }

Status CudaRank::drain(const std::vector<cudaStream_t> &streams,
                       const char *what) {
  // Poll rather than cudaStreamSynchronize, which would wait forever on a
  // collective whose peer died.
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    bool done = true;
    for (cudaStream_t stream : streams) {
      cudaError_t state = cudaStreamQuery(stream);
      if (state == cudaErrorNotReady) {
        done = false;
        break;
      }
      SHARC_CUDA(state);
    }
    if (done)
      return Status::ok();
    SHARC_TRY(backend_.asyncError(rank_));
    double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (backend_.aborted() || waited > backend_.timeoutSeconds()) {
      backend_.abortCollectives();
      return Status::runtimeError(
          backend_.aborted()
              ? "aborted: another rank failed"
              : std::string(what) + " did not finish within " +
                    std::to_string(static_cast<int>(waited)) +
                    " s (a collective never completed); NCCL aborted");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

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
