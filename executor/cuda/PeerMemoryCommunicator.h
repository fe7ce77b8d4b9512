//===- PeerMemoryCommunicator.h - ranks reading peers' memory -*- C++ -*-===//
// defines: PeerMemoryWorld, PeerMemoryCommunicator
//
// The collectives of ranks that share GPUs (sharc-run --share-gpus) when
// every GPU in use can read every other's memory (one GPU, or peers over
// NVLink): one process holds every rank, so a rank's kernels read its
// peers' buffers directly, and nothing goes through the host. A collective
// meets its group once on the host to swap pointers and events (the
// LocalCommunicator's rendezvous, no data), then on the rank's stream:
// wait for each peer's "inputs ready" event, compute this rank's result
// (copies for gathers and all_to_all, kernels/cuda/MemberReduce.h for
// reductions, members in order as the cpu sums), record "done reading",
// meet again, wait for the peers' "done reading" events. A result that
// overlaps a member's input goes to a scratch buffer first and is copied
// over after the second wait. Every wait is on an event recorded before
// the host meeting, never on one to come, so streams that share a
// hardware queue cannot deadlock on each other.
//
// Sends never wait: the message is copied into a slot of the (sender,
// receiver) channel on the sender's stream, which the receiver copies out
// of on its stream and frees with an event; slots are reused once drained
// and grow only while more messages are in flight than ever before (the
// first step). Transfers pair in order, as NCCL's do.
//
// Where the GPUs cannot reach each other, SharedGpuCommunicator's host
// path runs instead (executor/cuda/CudaBackend.cpp).
//
//   CommWorld meetings(plan.mesh, timeoutSeconds);     // one per stream
//   PeerMemoryWorld world(plan.mesh, timeoutSeconds);  // one per stream
//   PeerMemoryCommunicator comm(meetings.communicator(rank), world,
//                               meetings, gpu, stream); // rank's GPU
//   SHARC_TRY(comm.allReduce(x, x, DType::BF16, n, ReduceOp::Sum, "tp"));
#pragma once

#include "executor/Communicator.h"

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sharc::exec {

/// The point-to-point channels of one stream's ranks.
class PeerMemoryWorld {
public:
  PeerMemoryWorld(std::vector<plan::MeshAxis> mesh, double timeoutSeconds)
      : mesh_(std::move(mesh)), timeoutSeconds_(timeoutSeconds) {}
  ~PeerMemoryWorld();
  PeerMemoryWorld(const PeerMemoryWorld &) = delete;
  PeerMemoryWorld &operator=(const PeerMemoryWorld &) = delete;

  /// A message buffer on its sender's GPU.
  struct Slot {
    void *data = nullptr;
    int64_t capacity = 0;
    int device = 0;
    cudaEvent_t filled = nullptr;  ///< on the sender's GPU
    cudaEvent_t drained = nullptr; ///< on the receiver's, made by it
  };
  struct Message {
    Slot *slot = nullptr;
    int64_t numBytes = 0;
  };
  struct Channel {
    std::deque<Message> queue; ///< sent, not yet received, in send order
    std::vector<Slot *> free;  ///< drained (their `drained` recorded)
  };

  const std::vector<plan::MeshAxis> &mesh() const { return mesh_; }
  double timeoutSeconds() const { return timeoutSeconds_; }
  /// Wakes receivers so they see an abort; clears nothing.
  void wakeAll();
  /// After an aborted step (no rank inside a transfer): drops the messages
  /// no recv took, as CommWorld::reset drops the cpu's.
  void reset();

private:
  friend class PeerMemoryCommunicator;
  std::vector<plan::MeshAxis> mesh_;
  double timeoutSeconds_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  /// (sender, receiver) -> channel
  std::map<std::pair<int64_t, int64_t>, Channel> channels_;
  std::vector<std::unique_ptr<Slot>> slots_;
  /// Each rank's "inputs ready" and "done reading" events. The world owns
  /// them, not the communicator, because a peer may still enqueue its wait
  /// on them after their rank's last collective returned.
  std::map<int64_t, std::pair<cudaEvent_t, cudaEvent_t>> events_;
};

class PeerMemoryCommunicator final : public Communicator {
public:
  /// `local` is this rank's view of the stream's CommWorld (the host
  /// meetings); `stream` is on the rank's GPU `device`.
  PeerMemoryCommunicator(LocalCommunicator local, PeerMemoryWorld &world,
                         const CommWorld &commWorld, int device,
                         cudaStream_t stream)
      : local_(local), world_(world), commWorld_(commWorld), device_(device),
        stream_(stream) {}
  ~PeerMemoryCommunicator() override;

  int64_t groupSize(const std::string &axis) const override {
    return local_.groupSize(axis);
  }
  int64_t groupIndex(const std::string &axis) const override {
    return local_.groupIndex(axis);
  }
  bool hasGroup(const std::string &axis) const override {
    return local_.hasGroup(axis);
  }
  Status allReduce(const void *send, void *recv, DType dtype, int64_t numel,
                   ReduceOp op, const std::string &axis) override;
  Status allGather(const void *send, void *recv, DType dtype,
                   const std::vector<int64_t> &sendShape, int64_t dim,
                   const std::string &axis) override;
  Status reduceScatter(const void *send, void *recv, DType dtype,
                       const std::vector<int64_t> &sendShape, int64_t dim,
                       const std::string &axis) override;
  Status allToAll(const void *send, void *recv, DType dtype,
                  const std::vector<int64_t> &sendShape, int64_t splitDim,
                  int64_t concatDim, const std::string &axis) override;
  Status send(const void *data, int64_t numBytes, int64_t peer, int64_t tag,
              const std::string &axis) override;
  Status recv(void *data, int64_t numBytes, int64_t peer, int64_t tag,
              const std::string &axis) override;

private:
  /// One collective as this member enqueues it: `compute` writes the result
  /// from every member's input to `out` (the recv buffer, or scratch when
  /// that overlaps an input); `scratchBytes` beyond the result it may use.
  struct Call {
    std::string signature;
    const void *send;
    int64_t sendBytes;
    void *recv;
    int64_t recvBytes;
    int64_t extraScratchBytes = 0;
    std::function<Status(const std::vector<const void *> &sends, int64_t index,
                         std::byte *out, std::byte *extra)>
        compute;
  };
  Status run(const std::string &axis, const Call &call);
  /// Scratch of at least `numBytes` on this rank's GPU.
  Result<std::byte *> scratch(int64_t numBytes);
  Status makeEvents();

  LocalCommunicator local_;
  PeerMemoryWorld &world_;
  const CommWorld &commWorld_;
  int device_;
  cudaStream_t stream_;
  cudaEvent_t ready_ = nullptr, done_ = nullptr; ///< the world's
  void *scratch_ = nullptr;
  int64_t scratchBytes_ = 0;
};

} // namespace sharc::exec
