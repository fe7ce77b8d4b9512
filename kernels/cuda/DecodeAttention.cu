//===- DecodeAttention.cu - a new position against the cache on the device ===//
//
// Implements the math stated in kernels/DecodeAttention.h in two launches:
// the cache write (grid (T * B, Hkv): each block rotates one new key head by
// its row's position and stores it and the value head into the caches), then
// the attention (grid T * B * Hq, 128 threads: one block per query head; the
// rotated query and the head's scores over positions 0..p sit in shared
// memory, a warp per position forms each dot product, and the block reduces
// the maximum and the sum of exponentials before the threads take the
// output's columns). invFreq is the host's table (RopeFreqs.h), so the
// angles start from the cpu's bits; cos, sin, exp and the dot products'
// order may differ from the cpu's by rounding only.
//
// Generation is latency-bound (B * Hq blocks of one position each), so the
// kernel keeps to the simple shape: the whole cache row is read once per
// query head, C floats of scores at most in shared memory.
//
//===----------------------------------------------------------------------===//

#include "kernels/DecodeAttention.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/RopeFreqs.h"

#include <cuda_bf16.h>

#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

/// `value` rounded to the storage type of `view`, as a store then a load.
__device__ __forceinline__ float roundedLike(ConstTensorView view,
                                             float value) {
  return view.dtype == DType::BF16
             ? __bfloat162float(__float2bfloat16_rn(value))
             : value;
}

__global__ void
decodeCacheWriteKernel(DecodeAttentionArgs args,
                       const __grid_constant__ RopeInvFreqs invFreq) {
  // n = t * B + b: row t of sample b.
  int64_t n = blockIdx.x, b = n % args.batch, g = blockIdx.y;
  int64_t headDim = args.headDim, half = headDim / 2;
  int64_t kvWidth = args.numKvHeads * headDim;
  int64_t p = args.positions[n];
  int64_t from = n * kvWidth + g * headDim;
  int64_t to = (p * args.batch + b) * kvWidth + g * headDim;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float angle = static_cast<float>(p) * invFreq.values[i];
    float cosine = cosf(angle), sine = sinf(angle);
    float first = loadAs(args.k, from + i);
    float second = loadAs(args.k, from + i + half);
    storeAs(args.kCache, to + i, first * cosine - second * sine);
    storeAs(args.kCache, to + i + half, second * cosine + first * sine);
  }
  if (headDim % 2 != 0 && threadIdx.x == 0)
    storeAs(args.kCache, to + headDim - 1, loadAs(args.k, from + headDim - 1));
  for (int64_t d = threadIdx.x; d < headDim; d += blockDim.x)
    storeAs(args.vCache, to + d, loadAs(args.v, from + d));
}

__global__ void
decodeAttentionKernel(DecodeAttentionArgs args,
                      const __grid_constant__ RopeInvFreqs invFreq) {
  extern __shared__ float shared[];
  int64_t headDim = args.headDim, half = headDim / 2;
  int64_t n = blockIdx.x / args.numHeads, h = blockIdx.x % args.numHeads;
  int64_t b = n % args.batch;
  int64_t group = args.numHeads / args.numKvHeads;
  int64_t kvWidth = args.numKvHeads * headDim;
  int64_t rowPitch = args.batch * kvWidth;
  int64_t kvBase = b * kvWidth + (h / group) * headDim;
  int64_t qBase = (n * args.numHeads + h) * headDim;
  int64_t p = args.positions[n];
  ConstTensorView kCache{args.kCache.data, args.kCache.dtype};
  ConstTensorView vCache{args.vCache.data, args.vCache.dtype};
  float *query = shared;                   // headDim
  float *scores = shared + headDim;        // p + 1
  float *scratch = scores + args.cacheLen; // one per warp

  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    float angle = static_cast<float>(p) * invFreq.values[i];
    float cosine = cosf(angle), sine = sinf(angle);
    float first = loadAs(args.q, qBase + i);
    float second = loadAs(args.q, qBase + i + half);
    query[i] = roundedLike(args.q, first * cosine - second * sine);
    query[i + half] = roundedLike(args.q, second * cosine + first * sine);
  }
  if (headDim % 2 != 0 && threadIdx.x == 0)
    query[headDim - 1] = loadAs(args.q, qBase + headDim - 1);
  __syncthreads();

  float scale = 1.0f / sqrtf(static_cast<float>(headDim));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t t = warp; t <= p; t += kWarps) {
    const int64_t row = t * rowPitch + kvBase;
    float dot = 0.0f;
    for (int64_t d = lane; d < headDim; d += 32)
      dot += query[d] * loadAs(kCache, row + d);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2)
      dot += __shfl_xor_sync(0xffffffffu, dot, offset);
    if (lane == 0)
      scores[t] = scale * dot;
  }
  __syncthreads();
  float maxScore = -INFINITY;
  for (int64_t t = threadIdx.x; t <= p; t += blockDim.x)
    maxScore = fmaxf(maxScore, scores[t]);
  maxScore = blockReduce(maxScore, MaxOp{}, scratch);
  float sumExp = 0.0f;
  for (int64_t t = threadIdx.x; t <= p; t += blockDim.x)
    sumExp += expf(scores[t] - maxScore);
  sumExp = blockReduce(sumExp, SumOp{}, scratch);
  float lse = maxScore + logf(sumExp);
  for (int64_t t = threadIdx.x; t <= p; t += blockDim.x)
    scores[t] = expf(scores[t] - lse);
  __syncthreads();
  for (int64_t d = threadIdx.x; d < headDim; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t t = 0; t <= p; ++t)
      acc += scores[t] * loadAs(vCache, t * rowPitch + kvBase + d);
    storeAs(args.out, qBase + d, acc);
  }
}

} // namespace

Status decodeAttention(const DecodeAttentionArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("decodeAttentionKernel",
                              {args.q.dtype, args.k.dtype, args.v.dtype,
                               args.kCache.dtype, args.vCache.dtype,
                               args.out.dtype}));
  if (args.headDim / 2 > kRopeMaxHalf)
    return Status::invalidInput(
        "decodeAttentionKernel: head dim " + std::to_string(args.headDim) +
        " exceeds the device maximum " + std::to_string(2 * kRopeMaxHalf));
  if (args.rows <= 0 || args.batch <= 0 || args.numHeads <= 0 ||
      args.headDim <= 0)
    return Status::ok();
  int64_t sharedBytes = (args.headDim + args.cacheLen + kWarps) *
                        static_cast<int64_t>(sizeof(float));
  int device = 0, limit = 0;
  SHARC_CUDA(cudaGetDevice(&device));
  SHARC_CUDA(cudaDeviceGetAttribute(
      &limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (sharedBytes > limit)
    return Status::invalidInput(
        "decodeAttentionKernel: a cache of " + std::to_string(args.cacheLen) +
        " positions needs " + std::to_string(sharedBytes) +
        " bytes of shared memory, more than the device's " +
        std::to_string(limit));
  SHARC_CUDA(cudaFuncSetAttribute(decodeAttentionKernel,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(sharedBytes)));
  RopeInvFreqs invFreq = ropeInvFreqs(args.headDim, args.theta);
  int64_t count = args.rows * args.batch;
  decodeCacheWriteKernel<<<dim3(static_cast<unsigned>(count),
                                static_cast<unsigned>(args.numKvHeads)),
                           kThreads, 0, stream>>>(args, invFreq);
  SHARC_TRY(launchStatus("decodeCacheWriteKernel"));
  decodeAttentionKernel<<<static_cast<unsigned>(count * args.numHeads),
                          kThreads, sharedBytes, stream>>>(args, invFreq);
  return launchStatus("decodeAttentionKernel");
}

} // namespace sharc::kernels::cuda
