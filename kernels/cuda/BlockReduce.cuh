//===- BlockReduce.cuh - reductions with the same bits in every thread -*-===//
//
// Shared by the dense and the vocab-parallel cross entropy: which labels
// count (kernels/CrossEntropy.h: any label outside [0, validVocab) is
// ignored), the gradient's scale over them, and a block reduction whose
// result has the same bits in every thread and on every run; by both RMSNorm
// paths, the sum over a team of threads that owns one row and a block's dw
// row summed over its teams in order; and by both norm + rope paths, a
// block's dw row summed over its warps in order.
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

/// What every logit's gradient is scaled by in the losses' backward
/// kernels: dloss over the labels that count (at least one), each block
/// counting them itself rather than in a launch of its own. Every thread of
/// the block must call it; `scratch` holds one long long per warp.
__device__ inline float lossGradScale(const int32_t *labels, int64_t numTokens,
                                      int64_t validVocab, const float *dloss,
                                      long long *scratch) {
  long long numValid = 0;
  for (int64_t t = threadIdx.x; t < numTokens; t += blockDim.x)
    numValid += isCounted(labels[t], validVocab) ? 1 : 0;
  numValid = blockReduce(numValid, SumOp(), scratch);
  return *dloss / static_cast<float>(numValid > 1 ? numValid : 1);
}

/// Sum over a team of `teamLanes` (a power of two up to a block)
/// consecutive, aligned threads, the same bits in each of them: butterflies
/// within a warp (lanes i and i ^ offset add the same two values), then one
/// float per warp through `scratch` for a team of several warps. Every
/// thread of the block must call it.
__device__ __forceinline__ float teamSum(float value, int teamLanes,
                                         float *scratch) {
  int width = teamLanes < 32 ? teamLanes : 32;
  for (int offset = width / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  if (teamLanes <= 32)
    return value;
  int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0)
    scratch[warp] = value;
  __syncthreads();
  int warpsPerTeam = teamLanes / 32;
  int firstWarp = warp / warpsPerTeam * warpsPerTeam;
  float total = 0.0f;
  for (int w = 0; w < warpsPerTeam; ++w)
    total += scratch[firstWarp + w];
  __syncthreads();
  return total;
}

/// out[c] = the sum of rows[0][c] .. rows[kRows - 1][c] for c < cols, in
/// row order (the same bits on every run). Call after a barrier that made
/// the rows visible; the block's threads share the columns.
template <int kRows, int kCols>
__device__ inline void sumRowsInOrder(const float (&rows)[kRows][kCols],
                                      int cols, float *out) {
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float sum = rows[0][c];
    for (int r = 1; r < kRows; ++r)
      sum += rows[r][c];
    out[c] = sum;
  }
}

/// out[c] = rows[c] + rows[cols + c] + ... over `numRows` rows of `cols`
/// floats, in row order: a block's partial dw from its teams' sums. Call
/// after a barrier that made the rows visible.
__device__ inline void sumRowsInOrder(const float *rows, int numRows,
                                      int64_t cols, float *out) {
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float sum = rows[c];
    for (int r = 1; r < numRows; ++r)
      sum += rows[r * cols + c];
    out[c] = sum;
  }
}

} // namespace sharc::kernels::cuda
