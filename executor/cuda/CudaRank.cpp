//===- CudaRank.cpp - one rank's GPU: regions, streams, events ------------===//

#include "executor/cuda/CudaRank.h"

#include "kernels/Elementwise.h"
#include "kernels/cuda/Launch.h"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

namespace sharc::exec {

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

Status CudaRank::convert(kernels::ConstTensorView src, kernels::TensorView dst,
                         int64_t numel) {
  SHARC_CUDA(cudaSetDevice(device()));
  // y = float(1) * x rounds x to y's type; on the legacy stream, which the
  // plan's non-blocking streams would not wait for, so finished here.
  SHARC_TRY(kernels::cuda::scale({src, dst, numel, 1.0}, nullptr));
  SHARC_CUDA(cudaStreamSynchronize(nullptr));
  return Status::ok();
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
    // Shared GPUs the host runs the collectives for: managed regions.
    cudaError_t error =
        backend_.hostCollectives()
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

} // namespace sharc::exec
