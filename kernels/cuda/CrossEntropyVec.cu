//===- CrossEntropyVec.cu - cross entropy on 16-byte vectors --------------===//
//
// The fast path of kernels/cuda/CrossEntropy.cu, for bf16 or f32 logits
// (and dlogits of the same dtype) 16-byte aligned, whose rows are whole
// 16-byte vectors: a warp owns a row, reads it 16 bytes per lane and load,
// and keeps a running (max, sum of exp(x - max)) per lane, the online
// softmax, so the log-sum-exp needs one pass over the row instead of two;
// the lanes' pairs meet by butterflies (merge is symmetric, so every lane
// gets the same bits) and no block barrier stands between rows. The
// generic kernels read bf16 one element at a time, two passes for the
// loss and three for the gradient behind block barriers: 137 us and 244 us
// for MiniMind's 8192 x 6400 bf16 logits on an H200, against 26 and 52 us
// of DRAM traffic (105 MB read, and as much written by the gradient).
//
// The loss: grid ceil(rows / kRowsPerBlock), a warp per row, each row's
// term lse - x[label] to the caller's scratch as the generic kernel leaves
// it (its sum kernel follows). The gradient: the caller's persistent grid;
// each block counts the valid labels once (as the generic kernel does),
// then its warps take rows in turn: one pass for the lse, a second (from
// L2) writing dlogits; columns at or past validVocab, and ignored rows,
// are written as zeros.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/CrossEntropyVec.h"

#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/Vec16.cuh"

#include <cuda_bf16.h>

namespace sharc::kernels::cuda {
namespace {

constexpr int kRowsPerBlock = 8;
constexpr int kBlockThreads = 32 * kRowsPerBlock;

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <typename T> __device__ __forceinline__ T fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

/// The online softmax's state: the largest logit seen and the sum of
/// exp(x - max) over the logits seen.
struct RunningLse {
  float max = -INFINITY, sum = 0.0f;
};

/// Adds n logits: rescales the sum once if they raise the max.
template <int N>
__device__ __forceinline__ void addLogits(RunningLse &r, const float (&x)[N]) {
  float top = x[0];
#pragma unroll
  for (int i = 1; i < N; ++i)
    top = fmaxf(top, x[i]);
  if (top > r.max) {
    r.sum *= expf(r.max - top);
    r.max = top;
  }
#pragma unroll
  for (int i = 0; i < N; ++i)
    r.sum += expf(x[i] - r.max);
}

/// Symmetric in its arguments (bit for bit), so butterflies agree.
__device__ __forceinline__ RunningLse merge(RunningLse a, RunningLse b) {
  float top = fmaxf(a.max, b.max);
  if (top == -INFINITY)
    return a;
  return {top, a.sum * expf(a.max - top) + b.sum * expf(b.max - top)};
}

/// log-sum-exp of row[0, validVocab) in every lane of the warp.
template <typename T>
__device__ float rowLse(const T *row, int64_t validVocab, int lane) {
  constexpr int E = Vec<T>::kElems;
  int64_t fullVecs = validVocab / E;
  RunningLse r;
#pragma unroll 4
  for (int64_t v = lane; v < fullVecs; v += 32)
    addLogits(r, loadVec(row, v).v);
  for (int64_t i = fullVecs * E + lane; i < validVocab; i += 32) {
    float x[1] = {toFloat(row[i])};
    addLogits(r, x);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    RunningLse other{__shfl_xor_sync(0xffffffffu, r.max, offset),
                     __shfl_xor_sync(0xffffffffu, r.sum, offset)};
    r = merge(r, other);
  }
  return r.max + logf(r.sum);
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    crossEntropyVecKernel(const T *logits, const int32_t *labels,
                          float *rowLoss, int64_t numTokens, int64_t vocab,
                          int64_t validVocab) {
  int lane = threadIdx.x % 32;
  int64_t t =
      static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (t >= numTokens)
    return; // the whole warp
  int32_t label = labels[t];
  if (!isCounted(label, validVocab)) {
    if (lane == 0)
      rowLoss[t] = 0.0f;
    return;
  }
  const T *row = logits + t * vocab;
  float lse = rowLse(row, validVocab, lane);
  if (lane == 0)
    rowLoss[t] = lse - toFloat(row[label]);
}

/// Zeros in row[begin, vocab): single elements up to a vector boundary,
/// then whole vectors (vocab is whole vectors).
template <typename T>
__device__ void zeroTail(T *row, int64_t begin, int64_t vocab, int lane) {
  constexpr int E = Vec<T>::kElems;
  int64_t firstVec = (begin + E - 1) / E;
  for (int64_t i = begin + lane; i < firstVec * E && i < vocab; i += 32)
    row[i] = fromFloat<T>(0.0f);
  float zeros[E] = {};
  for (int64_t v = firstVec + lane; v < vocab / E; v += 32)
    storeVec(row, v, zeros);
}

template <typename T>
__global__ void __launch_bounds__(kBlockThreads)
    crossEntropyGradVecKernel(const T *logits, const int32_t *labels,
                              const float *dloss, T *dlogits, int64_t numTokens,
                              int64_t vocab, int64_t validVocab) {
  constexpr int E = Vec<T>::kElems;
  __shared__ long long countScratch[32];
  float rowScale =
      lossGradScale(labels, numTokens, validVocab, dloss, countScratch);
  int lane = threadIdx.x % 32;
  int64_t fullVecs = validVocab / E;
  for (int64_t t =
           static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
       t < numTokens; t += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    int32_t label = labels[t];
    const T *row = logits + t * vocab;
    T *drow = dlogits + t * vocab;
    if (!isCounted(label, validVocab)) {
      zeroTail(drow, 0, vocab, lane);
      continue;
    }
    float lse = rowLse(row, validVocab, lane);
#pragma unroll 4
    for (int64_t v = lane; v < fullVecs; v += 32) {
      Vec<T> x = loadVec(row, v);
      float out[E];
#pragma unroll
      for (int i = 0; i < E; ++i) {
        float target = v * E + i == label ? 1.0f : 0.0f;
        out[i] = rowScale * (expf(x.v[i] - lse) - target);
      }
      storeVec(drow, v, out);
    }
    for (int64_t i = fullVecs * E + lane; i < validVocab; i += 32) {
      float target = i == label ? 1.0f : 0.0f;
      drow[i] = fromFloat<T>(rowScale * (expf(toFloat(row[i]) - lse) - target));
    }
    zeroTail(drow, validVocab, vocab, lane);
  }
}

/// Whether rows of `vocab` elements of `dtype` at `data` are whole,
/// aligned 16-byte vectors.
bool fits(const void *data, DType dtype, int64_t vocab) {
  return (dtype == DType::BF16 || dtype == DType::F32) && vecAligned(data) &&
         (vocab * dtypeSize(dtype)) % kVecBytes == 0;
}

} // namespace

bool crossEntropyVec(const CrossEntropyArgs &args, float *rowLoss,
                     DeviceStream stream) {
  if (!fits(args.logits.data, args.logits.dtype, args.vocab))
    return false;
  auto numBlocks = static_cast<unsigned>((args.numTokens + kRowsPerBlock - 1) /
                                         kRowsPerBlock);
  auto launch = [&](auto *logits) {
    crossEntropyVecKernel<<<numBlocks, kBlockThreads, 0, stream>>>(
        logits, args.labels, rowLoss, args.numTokens, args.vocab,
        args.validVocab);
  };
  if (args.logits.dtype == DType::BF16)
    launch(static_cast<const __nv_bfloat16 *>(args.logits.data));
  else
    launch(static_cast<const float *>(args.logits.data));
  return true;
}

bool crossEntropyGradVec(const CrossEntropyGradArgs &args, int64_t maxBlocks,
                         DeviceStream stream) {
  if (args.dlogits.dtype != args.logits.dtype ||
      !fits(args.logits.data, args.logits.dtype, args.vocab) ||
      !vecAligned(args.dlogits.data))
    return false;
  int64_t rowBlocks = (args.numTokens + kRowsPerBlock - 1) / kRowsPerBlock;
  auto numBlocks = static_cast<unsigned>(std::min(rowBlocks, maxBlocks));
  auto launch = [&](auto *logits, auto *dlogits) {
    crossEntropyGradVecKernel<<<numBlocks, kBlockThreads, 0, stream>>>(
        logits, args.labels, args.dloss, dlogits, args.numTokens, args.vocab,
        args.validVocab);
  };
  if (args.logits.dtype == DType::BF16)
    launch(static_cast<const __nv_bfloat16 *>(args.logits.data),
           static_cast<__nv_bfloat16 *>(args.dlogits.data));
  else
    launch(static_cast<const float *>(args.logits.data),
           static_cast<float *>(args.dlogits.data));
  return true;
}

} // namespace sharc::kernels::cuda
