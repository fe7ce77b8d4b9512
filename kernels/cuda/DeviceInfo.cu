//===- DeviceInfo.cu - CUDA device query and toolchain check --------------===//
//
// addKernel: a 1-D grid of 256-thread blocks, one element per thread; it is
// a toolchain check, so no bound is aimed for.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/DeviceInfo.h"

#include <cuda_runtime.h>

#include <string>

namespace sharc::kernels::cuda {
namespace {

__global__ void addKernel(const float *a, const float *b, float *y,
                          int64_t numel) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < numel)
    y[i] = a[i] + b[i];
}

Status check(cudaError_t error, const char *call) {
  if (error == cudaSuccess)
    return Status::ok();
  return Status::runtimeError(std::string("CUDA: ") + call + ": " +
                              cudaGetErrorString(error));
}

#define SHARC_DEVICE_INFO_CHECK(call)                                          \
  do {                                                                         \
    Status status = check((call), #call);                                      \
    if (!status.isOk())                                                        \
      return status;                                                           \
  } while (false)

/// Three device buffers, freed on every path out.
struct DeviceBuffers {
  float *a = nullptr, *b = nullptr, *y = nullptr;
  ~DeviceBuffers() {
    cudaFree(a);
    cudaFree(b);
    cudaFree(y);
  }
};

} // namespace

int deviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // so a later error check does not report this one
    return 0;
  }
  return count;
}

Status addOnDevice(const float *a, const float *b, float *y, int64_t numel) {
  size_t numBytes = static_cast<size_t>(numel) * sizeof(float);
  DeviceBuffers buffers;
  SHARC_DEVICE_INFO_CHECK(cudaSetDevice(0));
  SHARC_DEVICE_INFO_CHECK(cudaMalloc(&buffers.a, numBytes));
  SHARC_DEVICE_INFO_CHECK(cudaMalloc(&buffers.b, numBytes));
  SHARC_DEVICE_INFO_CHECK(cudaMalloc(&buffers.y, numBytes));
  SHARC_DEVICE_INFO_CHECK(
      cudaMemcpy(buffers.a, a, numBytes, cudaMemcpyHostToDevice));
  SHARC_DEVICE_INFO_CHECK(
      cudaMemcpy(buffers.b, b, numBytes, cudaMemcpyHostToDevice));
  constexpr int kBlock = 256;
  int64_t numBlocks = (numel + kBlock - 1) / kBlock;
  if (numBlocks > 0)
    addKernel<<<static_cast<unsigned>(numBlocks), kBlock>>>(
        buffers.a, buffers.b, buffers.y, numel);
  SHARC_DEVICE_INFO_CHECK(cudaGetLastError());
  SHARC_DEVICE_INFO_CHECK(
      cudaMemcpy(y, buffers.y, numBytes, cudaMemcpyDeviceToHost));
  return Status::ok();
}

} // namespace sharc::kernels::cuda
