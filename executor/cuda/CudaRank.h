//===- CudaRank.h - one rank's GPU: regions, streams, events ----*- C++ -*-===//
// defines: CudaRankOwner, CudaRank
//
// A CudaRank is the RankDevice of one rank on one GPU (CudaBackend.h says
// what it holds). It asks the backend that made it (CudaRankOwner) for its
// communicators and, while it drains a step, for NCCL's asynchronous
// errors and the deadline.
#pragma once

#include "executor/Backend.h"
#include "executor/cuda/MappedFlag.h"
#include "executor/cuda/StepGraph.h"
#include "executor/cuda/StreamEngines.h"
#include "kernels/cuda/Launch.h"
#include "planner/plan/DeviceWorkspace.h"

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace sharc::exec {

/// What a rank needs of its backend.
class CudaRankOwner {
public:
  virtual ~CudaRankOwner() = default;
  /// Ranks share GPUs: a step cannot be captured (each rank's capture
  /// would wait on events of the others').
  virtual bool shared() const = 0;
  /// Shared GPUs that cannot read each other's memory: regions are managed
  /// memory and collectives run on the host.
  virtual bool hostCollectives() const = 0;
  virtual bool aborted() const = 0;
  virtual double timeoutSeconds() const = 0;
  /// Rank `rank`'s communicator for plan stream `stream`.
  virtual std::unique_ptr<Communicator>
  communicator(int64_t rank, int64_t stream, cudaStream_t cudaStream,
               void *staging, int64_t stagingBytes) = 0;
  /// NCCL's asynchronous error for `rank`, where NCCL runs.
  virtual Status asyncError(int64_t rank) = 0;
  virtual void abortCollectives() = 0;
};

class CudaRank final : public RankDevice {
public:
  CudaRank(CudaRankOwner &backend, int64_t rank, int device)
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
  Status drawNormal(const kernels::NormalDrawArgs &args) override {
    SHARC_CUDA(cudaSetDevice(device()));
    return kernels::cuda::drawNormal(args);
  }
  Status convert(kernels::ConstTensorView src, kernels::TensorView dst,
                 int64_t numel) override;
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
  bool hasCaptured(int64_t slot) const override {
    auto found = graphs_.find(slot);
    return found != graphs_.end() && found->second.captured();
  }
  Status beginCapture(int64_t slot) override {
    return graphs_[slot].begin(streams_);
  }
  Status endCapture(int64_t slot) override { return graphs_[slot].end(); }
  Status replayCaptured(int64_t slot) override {
    return graphs_[slot].replay();
  }
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

  CudaRankOwner &backend_;
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
  /// Per capture slot (RankDevice::hasCaptured): the step, evaluations.
  std::map<int64_t, StepGraph> graphs_;
  /// Checking mode's device counter of non-finite elements.
  unsigned long long *nonFiniteCount_ = nullptr;
};

} // namespace sharc::exec
