//===- BlockReduce.cuh - block reductions of the losses ---------*- C++ -*-===//
//
// Shared by the dense and the vocab-parallel cross entropy: which labels
// count (kernels/CrossEntropy.h: any label outside [0, validVocab) is
// ignored) and a block reduction whose result has the same bits in every
// thread and on every run.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace sharc::kernels::cuda {

__device__ __forceinline__ bool isCounted(int32_t label, int64_t validVocab) {
  return label >= 0 && label < validVocab;
}

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// Reduction over the block, the same bits in every thread (butterflies,
/// then every thread combines the warps' values in order). Every thread of
/// the block must call it; `scratch` holds one T per warp.
template <typename T, typename Op>
__device__ inline T blockReduce(T value, Op op, T *scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  if (threadIdx.x % 32 == 0)
    scratch[threadIdx.x / 32] = value;
  __syncthreads();
  T total = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w)
    total = op(total, scratch[w]);
  __syncthreads();
  return total;
}

} // namespace sharc::kernels::cuda
