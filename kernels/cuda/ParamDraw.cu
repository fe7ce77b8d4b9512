//===- ParamDraw.cu - the normal draw on the device
//------------------------===//
//
// Implements kernels/ParamDraw.h's cuda::drawNormal: the host's bits
// (cpu/ParamDraw.cpp), since both evaluate kernels::drawNormal, whose
// arithmetic is device intrinsics that round once and never fuse.
//
// Launch shape: a 1-D grid-stride grid of 256-thread blocks, one element
// per thread and step; the row of element i is i / columns. Bound: FP64
// arithmetic (about 70 double operations an element: two splitmix64 hashes,
// the log and the cosine series), well under a millisecond per hundred
// million elements on an H200, against seconds on the host.
//
//===----------------------------------------------------------------------===//

#include "kernels/ParamDraw.h"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

template <typename Element>
__device__ __forceinline__ void storeDrawn(Element *out, int64_t i,
                                           double value);

template <>
__device__ __forceinline__ void storeDrawn<float>(float *out, int64_t i,
                                                  double value) {
  out[i] = __double2float_rn(value);
}

/// Rounded to float first, then to bf16, as storeElement does.
template <>
__device__ __forceinline__ void
storeDrawn<__nv_bfloat16>(__nv_bfloat16 *out, int64_t i, double value) {
  out[i] = __float2bfloat16_rn(__double2float_rn(value));
}

template <typename Element>
__global__ void drawNormalKernel(Element *out, const int64_t *rowStarts,
                                 int64_t numel, int64_t columns, uint64_t key,
                                 double stddev) {
  int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = first; i < numel; i += stride) {
    int64_t row = i / columns;
    int64_t global = rowStarts[row] + (i - row * columns);
    storeDrawn(out, i, kernels::drawNormal(stddev, key, global));
  }
}

} // namespace

Status drawNormal(const NormalDrawArgs &args) {
  if (args.out.dtype != DType::F32 && args.out.dtype != DType::BF16)
    return Status::invalidInput(std::string("drawNormal: ") +
                                dtypeName(args.out.dtype) +
                                " storage on the device (f32 or bf16)");
  int64_t numel = args.rows * args.columns;
  if (numel == 0)
    return Status::ok();
  int64_t *rowStarts = nullptr;
  size_t tableBytes = static_cast<size_t>(args.rows) * sizeof(int64_t);
  SHARC_CUDA(cudaMalloc(&rowStarts, tableBytes));
  // Freed on every path; the draw is synchronous, so the table's last
  // reader has finished when it is freed.
  Status status = [&]() -> Status {
    SHARC_CUDA(cudaMemcpy(rowStarts, args.rowStarts, tableBytes,
                          cudaMemcpyHostToDevice));
    int blocks =
        static_cast<int>(std::min(kMaxBlocks, ceilDiv(numel, kThreads)));
    if (args.out.dtype == DType::F32)
      drawNormalKernel<<<blocks, kThreads>>>(
          static_cast<float *>(args.out.data), rowStarts, numel, args.columns,
          args.key, args.stddev);
    else
      drawNormalKernel<<<blocks, kThreads>>>(
          static_cast<__nv_bfloat16 *>(args.out.data), rowStarts, numel,
          args.columns, args.key, args.stddev);
    SHARC_TRY(launchStatus("drawNormalKernel"));
    SHARC_CUDA(cudaStreamSynchronize(nullptr));
    return Status::ok();
  }();
  cudaError_t freed = cudaFree(rowStarts);
  SHARC_TRY(status);
  SHARC_CUDA(freed);
  return Status::ok();
}

} // namespace sharc::kernels::cuda
