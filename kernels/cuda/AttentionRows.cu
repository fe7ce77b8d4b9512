//===- AttentionRows.cu - rows of a blocked attention's results ----------===//
//
// One thread per element pair: the rows are a few MB at the shapes context
// parallelism runs (1024 keys x batch 4 x 384 columns at MiniMind's cp 2),
// read and written once, next to an SDPA backward of tens of GFLOP.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/AttentionRows.h"

#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>

namespace sharc::kernels::cuda {

namespace {

constexpr int kThreads = 256;

/// Element pairs of even widths (two bf16 per 4-byte access), singles
/// otherwise; `width` is counted in the access's elements.
template <typename Element, typename Sum>
__global__ void addRowsKernel(Element *dst, int64_t dstPitch,
                              const Element *src, int64_t rows, int64_t width,
                              Sum sum) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= rows * width)
    return;
  int64_t row = i / width, column = i % width;
  Element &out = dst[row * dstPitch + column];
  out = sum(out, src[i]);
}

struct SumPair {
  __device__ __nv_bfloat162 operator()(__nv_bfloat162 a,
                                       __nv_bfloat162 b) const {
    float2 x = __bfloat1622float2(a), y = __bfloat1622float2(b);
    return __floats2bfloat162_rn(x.x + y.x, x.y + y.y);
  }
};

struct SumOne {
  __device__ __nv_bfloat16 operator()(__nv_bfloat16 a, __nv_bfloat16 b) const {
    return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
  }
};

__global__ void fillRowsKernel(float *dst, int64_t pitch, int64_t rows,
                               int64_t width, float value) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < rows * width)
    dst[(i / width) * pitch + i % width] = value;
}

} // namespace

Status fillFloatRows(float *dst, int64_t pitch, int64_t rows, int64_t width,
                     float value, DeviceStream stream) {
  if (rows <= 0 || width <= 0)
    return Status::ok();
  fillRowsKernel<<<ceilDiv(rows * width, kThreads), kThreads, 0, stream>>>(
      dst, pitch, rows, width, value);
  return launchStatus("fillRowsKernel");
}

Status addBf16Rows(void *dst, int64_t dstPitch, const void *src, int64_t rows,
                   int64_t width, DeviceStream stream) {
  if (rows <= 0 || width <= 0)
    return Status::ok();
  bool pairs = width % 2 == 0 && dstPitch % 2 == 0 &&
               reinterpret_cast<uintptr_t>(dst) % 4 == 0 &&
               reinterpret_cast<uintptr_t>(src) % 4 == 0;
  if (pairs) {
    int64_t count = rows * (width / 2);
    addRowsKernel<<<ceilDiv(count, kThreads), kThreads, 0, stream>>>(
        static_cast<__nv_bfloat162 *>(dst), dstPitch / 2,
        static_cast<const __nv_bfloat162 *>(src), rows, width / 2, SumPair{});
  } else {
    addRowsKernel<<<ceilDiv(rows * width, kThreads), kThreads, 0, stream>>>(
        static_cast<__nv_bfloat16 *>(dst), dstPitch,
        static_cast<const __nv_bfloat16 *>(src), rows, width, SumOne{});
  }
  return launchStatus("addRowsKernel");
}

} // namespace sharc::kernels::cuda
