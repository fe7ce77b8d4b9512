//===- SharedGpuCommunicator.cpp - collectives of ranks on one GPU --------===//

#include "executor/cuda/SharedGpuCommunicator.h"

#include "kernels/cuda/Launch.h"

namespace sharc::exec {

Status SharedGpuCommunicator::settle() {
  SHARC_CUDA(cudaStreamSynchronize(stream_));
  return Status::ok();
}

Status SharedGpuCommunicator::allReduce(const void *send, void *recv,
                                        DType dtype, int64_t numel, ReduceOp op,
                                        const std::string &axis) {
  SHARC_TRY(settle());
  return local_.allReduce(send, recv, dtype, numel, op, axis);
}

Status SharedGpuCommunicator::allGather(const void *send, void *recv,
                                        DType dtype,
                                        const std::vector<int64_t> &sendShape,
                                        int64_t dim, const std::string &axis) {
  SHARC_TRY(settle());
  return local_.allGather(send, recv, dtype, sendShape, dim, axis);
}

Status
SharedGpuCommunicator::reduceScatter(const void *send, void *recv, DType dtype,
                                     const std::vector<int64_t> &sendShape,
                                     int64_t dim, const std::string &axis) {
  SHARC_TRY(settle());
  return local_.reduceScatter(send, recv, dtype, sendShape, dim, axis);
}

Status SharedGpuCommunicator::allToAll(const void *send, void *recv,
                                       DType dtype,
                                       const std::vector<int64_t> &sendShape,
                                       int64_t splitDim, int64_t concatDim,
                                       const std::string &axis) {
  SHARC_TRY(settle());
  return local_.allToAll(send, recv, dtype, sendShape, splitDim, concatDim,
                         axis);
}

// Transfers match as NCCL's do, the n-th recv from a peer taking the n-th
// send to it (one tag for all), so a plan whose stages list their
// transfers in orders NCCL would pair wrongly fails here too (a size
// mismatch, or a wrong tensor in the parity check), not only on GPUs.
Status SharedGpuCommunicator::send(const void *data, int64_t numBytes,
                                   int64_t peer, int64_t /*tag*/,
                                   const std::string &axis) {
  SHARC_TRY(settle());
  return local_.send(data, numBytes, peer, /*tag=*/0, axis);
}

Status SharedGpuCommunicator::recv(void *data, int64_t numBytes, int64_t peer,
                                   int64_t /*tag*/, const std::string &axis) {
  SHARC_TRY(settle());
  return local_.recv(data, numBytes, peer, /*tag=*/0, axis);
}

} // namespace sharc::exec
