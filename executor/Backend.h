//===- Backend.h - where a plan runs: memory, streams, events ---*- C++ -*-===//
// defines: BackendOptions, RankDevice, Backend, createBackend,
//          resolveBackend, deviceFreeBytes
//
// The runtime binds and orders a plan's instructions; a Backend supplies
// what they run on. Per rank a RankDevice owns the plan's regions (one
// allocation each, sized by the plan), a LaunchContext per stream (the
// stream, its communicator, the GEMM engine, the kernels' scratch) and the
// events between streams. The runtime never touches rank memory itself:
// parameters, batches and outputs move through upload/download, poison
// through fill, and parameters are drawn where they live (drawNormal).
//
// Two ways to run a step, chosen by enqueues():
//  - cpu: a host thread per stream of every rank; a launch runs to
//    completion, wait() blocks the thread until the event is signalled.
//  - cuda: one host thread per rank enqueues every instruction of every
//    stream in plan order; wait() and signal() are stream-ordered
//    (cudaStreamWaitEvent, cudaEventRecord), so a wait must come after its
//    signal in the list, which the plan contract guarantees; finishStep()
//    blocks until the rank's streams drain, with the collectives' deadline.
//
//   auto backend = createBackend("auto", plan, options);   // cpu or cuda
//   auto rank = (*backend)->createRank(0);
//   SHARC_TRY((*rank)->upload((*rank)->at(buffer), host, numBytes));
#pragma once

#include "executor/OpTable.h"
#include "executor/Processes.h"
#include "executor/Trace.h"
#include "kernels/ParamDraw.h"
#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sharc::exec {

struct BackendOptions {
  /// Deadline of every event wait, collective and step drain.
  double timeoutSeconds = 60.0;
  /// Fill the activation region with NaN bytes at set-up.
  bool poisonActivations = false;
  /// Create the timing events of RankDevice::beginTimed.
  bool profile = false;
  /// The ranks this process drives (createRank is asked for those alone);
  /// a count of 0 means every rank of the plan.
  RankSpan span = {};
  /// The run's processes, which agree on NCCL's unique ids (cuda) or carry
  /// the collectives' messages (cpu); null: one.
  Processes *processes = nullptr;
  /// cuda: more ranks than GPUs, rank r on GPU r % GPUs, collectives by
  /// copies between the ranks' memory (executor/cuda/
  /// PeerMemoryCommunicator.h; through the host where GPUs cannot reach
  /// each other, SharedGpuCommunicator.h).
  bool shareGpus = false;
};

class RankDevice {
public:
  virtual ~RankDevice() = default;
  /// The storage of a buffer: its region's base plus its planned offset.
  virtual void *at(const plan::Buffer &buffer) const = 0;
  /// Synchronous copies between host memory and this rank's memory.
  virtual Status upload(void *dst, const void *src, int64_t numBytes) = 0;
  virtual Status download(void *dst, const void *src,
                          int64_t numBytes) const = 0;
  /// Zeroes numBytes bytes at dst, done when it returns (as an upload of
  /// zeros, without the host buffer and the copy).
  virtual Status zero(void *dst, int64_t numBytes) = 0;
  /// Draws a parameter's shard in place (kernels/ParamDraw.h, rowStarts in
  /// host memory), done when it returns: the same bits on every backend.
  virtual Status drawNormal(const kernels::NormalDrawArgs &args) = 0;
  /// Rounds numel float elements at src to dst's type (a bf16 weight from
  /// its f32 master), done when it returns.
  virtual Status convert(kernels::ConstTensorView src, kernels::TensorView dst,
                         int64_t numel) = 0;
  /// Sets numBytes bytes at dst to `byte`, ordered on `stream`.
  virtual Status fill(int64_t stream, void *dst, uint8_t byte,
                      int64_t numBytes) = 0;
  /// Every activation byte to NaN, before a step in checking mode.
  virtual Status poisonActivations() = 0;
  virtual const LaunchContext &context(int64_t stream) const = 0;
  /// Once, after every instruction of the rank is bound: gives stream s
  /// bytesPerStream[s] bytes of scratch (none for a missing or 0 entry) in
  /// its LaunchContext. The cpu's kernels need none.
  virtual Status
  allocateScratch(const std::vector<int64_t> &bytesPerStream) = 0;
  /// Starts a step: clears the events of the last one. Called on the
  /// thread that runs (or enqueues) the rank's instructions before any of
  /// them, on the cpu before any stream thread starts.
  virtual void beginStep() = 0;
  virtual Status wait(int64_t stream, int64_t event) = 0;
  virtual Status signal(int64_t stream, int64_t event) = 0;
  /// Makes work enqueued on stream `to` from now on wait for the work
  /// enqueued on `from` so far: evaluation runs its instructions in plan
  /// order (Runtime::runOutputPrefix). Nothing to do where the caller runs
  /// the streams' instructions one after another itself (the cpu).
  virtual Status order(int64_t from, int64_t to) {
    (void)from, (void)to;
    return Status::ok();
  }
  /// Returns once everything enqueued has finished (cpu: at once).
  virtual Status finishStep() = 0;
  /// Wakes every wait of this rank with an error.
  virtual void abort() = 0;

  /// Profiling on a device (Runtime's recordTrace): bracket instruction
  /// `index` on `stream` with timing events; after finishStep, timings()
  /// gives every bracketed instruction's span from the step's start, per
  /// stream. Unused on the cpu, where the host clock times each launch.
  virtual Status beginTimed(int64_t stream, int64_t index) {
    return Status::ok();
  }
  virtual Status endTimed(int64_t stream, int64_t index) {
    return Status::ok();
  }
  virtual Result<std::vector<std::vector<TraceRecord>>> timings() {
    return std::vector<std::vector<TraceRecord>>{};
  }
  /// Step constants (OpTable.h's StepConstants) on a device: once, after
  /// binding, `bytes` of device memory whose address every stream's
  /// LaunchContext then carries; before each step, the table's upload,
  /// ordered before any of the step's work on every stream. The cpu's
  /// launches take the step from their context instead.
  virtual Status allocateStepConstants(int64_t bytes) { return Status::ok(); }
  virtual Status uploadStepConstants(const void *table, int64_t bytes) {
    return Status::ok();
  }
  /// CUDA graphs: capture one pass's enqueued work (every stream's) between
  /// beginCapture and endCapture, then replayCaptured enqueues all of it as
  /// one graph launch. Each `slot` holds one pass: the runtime's training
  /// step is slot 0, each evaluation program (an output's instructions) one
  /// more. Devices that cannot capture say so in canCapture.
  virtual bool canCapture() const { return false; }
  virtual bool hasCaptured(int64_t slot) const {
    (void)slot;
    return false;
  }
  virtual Status beginCapture(int64_t slot) {
    (void)slot;
    return Status::invalidInput("this backend cannot capture a step");
  }
  virtual Status endCapture(int64_t slot) {
    (void)slot;
    return Status::invalidInput("this backend cannot capture a step");
  }
  virtual Status replayCaptured(int64_t slot) {
    (void)slot;
    return Status::invalidInput("this backend cannot capture a step");
  }
  /// Whether an update since the last call stored a NaN or an infinity (the
  /// flag every LaunchContext's nonFinite points at), clearing it; called
  /// after finishStep. A plain host read on both backends: on a device the
  /// flag is in host memory the kernels write through the bus, so a step
  /// that stays finite costs no copy.
  virtual bool takeNonFiniteUpdate() = 0;
  /// Checking mode: how many of the numel float elements at `data` are NaN
  /// or infinite once `stream`'s work so far has finished (waits for it on
  /// a device).
  virtual Result<int64_t> countNonFinite(int64_t stream, const void *data,
                                         DType dtype, int64_t numel) = 0;
  /// Working memory the device allocated beside the plan's regions
  /// (library workspaces, kernel scratch, staging); 0 on the cpu.
  virtual int64_t workspaceBytes() const { return 0; }
  /// Device memory this process holds on the rank's device (every
  /// allocation, the CUDA context, NCCL's and cuBLASLt's buffers
  /// included); -1 where there is no device.
  virtual int64_t deviceBytesInUse() const { return -1; }
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// Launches are enqueued on device streams by one thread per rank.
  virtual bool enqueues() const = 0;
  virtual Result<std::unique_ptr<RankDevice>> createRank(int64_t rank) = 0;
  /// Wakes every rank's collectives after a failure.
  virtual void abort() = 0;
  /// Clears an abort between steps.
  virtual void reset() = 0;
  /// After a failed step, once every rank's thread has returned: cancels
  /// what is still enqueued (NCCL collectives waiting for a peer that
  /// stopped), so that nothing waits forever. The backend may be unusable
  /// afterwards.
  virtual void cancelEnqueued() {}
  /// Frees every rank's device (or host) resources held by the backend.
  virtual void release() {}
};

/// "cpu" or "cuda": what "auto" means for a process driving `localRanks`
/// ranks (cuda when this build has it and the node has a GPU for each,
/// else cpu); any other name is returned as it is.
std::string resolveBackend(const std::string &name, int64_t localRanks);

/// The GPUs of ranks that share them when "auto" runs a plan of
/// `worldSize` ranks in one process: this build has CUDA, the node has at
/// least one GPU but fewer than `worldSize`, and each of them can read the
/// others' memory (so the collectives run on the GPUs, not the host);
/// else 0.
int64_t gpusToShare(int64_t worldSize);

/// The device memory each of `worldSize` ranks can still allocate on the
/// resolved backend `name` (the least over its GPUs); -1 for the cpu, whose
/// ranks share the host, or where no device answers.
int64_t deviceFreeBytes(const std::string &name, int64_t worldSize);

/// "cpu", "cuda", or "auto": cuda when this build has it and the node has a
/// GPU for every rank this process drives (options.span), else cpu. An unknown
/// name, or cuda without a build or enough devices, is invalid input naming
/// what exists.
Result<std::unique_ptr<Backend>> createBackend(const std::string &name,
                                               const plan::Plan &plan,
                                               const BackendOptions &options);

} // namespace sharc::exec
