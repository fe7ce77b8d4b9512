//===- Launch.h - CUDA error checks and launch helpers ----------*- C++ -*-===//
// defines: cudaStatus, launchStatus, ceilDiv, SHARC_CUDA,
//          multiprocessorCount (cuda::)
//
// Every CUDA runtime call in kernels/cuda and executor/cuda goes through
// SHARC_CUDA, which turns a failure into a Status naming the call; every
// launcher ends with launchStatus so a bad launch configuration surfaces at
// the instruction that caused it rather than at the next synchronisation.
//
//   SHARC_CUDA(cudaMemsetAsync(ptr, 0, numBytes, stream));
//   rmsNormKernel<<<grid, block, 0, stream>>>(...);
//   return launchStatus("rmsNormKernel");
#pragma once

#include "planner/plan/Status.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace sharc::kernels::cuda {

inline Status cudaStatus(cudaError_t error, const char *call) {
  if (error == cudaSuccess)
    return Status::ok();
  return Status::runtimeError(std::string("CUDA: ") + call + ": " +
                              cudaGetErrorString(error));
}

/// The launch error of the kernel just enqueued, if any.
inline Status launchStatus(const char *kernel) {
  return cudaStatus(cudaGetLastError(), kernel);
}

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace sharc::kernels::cuda

#define SHARC_CUDA(call)                                                       \
  do {                                                                         \
    ::sharc::Status sharcCudaStatus =                                          \
        ::sharc::kernels::cuda::cudaStatus((call), #call);                     \
    if (!sharcCudaStatus.isOk())                                               \
      return sharcCudaStatus;                                                  \
  } while (0)

namespace sharc::kernels::cuda {
/// The current device's multiprocessors, for grids sized to fill it.
inline Status multiprocessorCount(int &count) {
  int device = 0;
  SHARC_CUDA(cudaGetDevice(&device));
  SHARC_CUDA(
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return Status::ok();
}
} // namespace sharc::kernels::cuda
