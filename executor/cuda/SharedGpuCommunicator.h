//===- SharedGpuCommunicator.h - ranks sharing one GPU ----------*- C++ -*-===//
// defines: SharedGpuCommunicator
//
// When a plan has more ranks than the node has GPUs (sharc-run
// --share-gpus), ranks share GPUs round-robin. NCCL refuses two ranks on
// one device; where the GPUs in use can read each other's memory,
// PeerMemoryCommunicator.h runs the collectives on them. Where they cannot,
// the collectives go through the host instead (this class): each rank's
// regions are CUDA managed memory, and a collective first waits for its
// stream (which orders it after everything the plan made it wait for),
// then runs the cpu backend's in-process LocalCommunicator on the managed
// buffers, whose result later launches on any stream see. Slow (a host
// round trip and page migrations per collective) and meant for checking
// multi-rank plans on a small machine: kernels, streams, events and the
// order of every transfer are the real ones (transfers pair in order, as
// NCCL's do, not by tag as the cpu's), the wire is not NCCL.
#pragma once

#include "executor/Communicator.h"

#include <cuda_runtime.h>

namespace sharc::exec {

class SharedGpuCommunicator final : public Communicator {
public:
  SharedGpuCommunicator(LocalCommunicator local, cudaStream_t stream)
      : local_(local), stream_(stream) {}

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
  /// Returns once the stream has run everything enqueued on it.
  Status settle();

  LocalCommunicator local_;
  cudaStream_t stream_;
};

} // namespace sharc::exec
