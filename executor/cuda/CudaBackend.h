//===- CudaBackend.h - plans on NVIDIA GPUs ---------------------*- C++ -*-===//
// defines: cudaDevicesVisible, cudaDevicesReachEachOther,
//          cudaLeastFreeBytes, createCudaBackend
//
// A process drives the ranks of its span (Backend.h's BackendOptions),
// the first on GPU localIndex x span.count of its node (rank r on GPU r
// when one process drives them all). Per rank: one device allocation per
// region of the plan (nothing allocates during a step), one CUDA stream
// per plan stream, a cudaEvent (timing off) per plan event, a cuBLASLt Gemm
// with its own workspace and an NcclCommunicator per stream. One host
// thread per rank enqueues the instruction list in plan order; finishStep
// polls the streams until they drain, and past the deadline aborts the
// NCCL communicators and names the rank, so a collective that never
// finishes is an error, not a hang.
#pragma once

#include "executor/Backend.h"

namespace sharc::exec {

/// CUDA devices this process can use; 0 without a driver or a device.
int64_t cudaDevicesVisible();
/// Whether each of devices 0 .. numDevices-1 can read every other's memory
/// (peer access; true for one device).
bool cudaDevicesReachEachOther(int64_t numDevices);
/// The least free memory among devices 0 .. numDevices-1; -1 if none.
int64_t cudaLeastFreeBytes(int64_t numDevices);

Result<std::unique_ptr<Backend>>
createCudaBackend(const plan::Plan &plan, const BackendOptions &options);

} // namespace sharc::exec
