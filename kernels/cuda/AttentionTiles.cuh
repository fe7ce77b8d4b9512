//===- AttentionTiles.cuh - tile loads and warp products for attention ---===//
//
// The building blocks of kernels/cuda/Attention.cu (its header comment gives
// the tiling): 16-byte global <-> shared moves, zero-padded tile loads, the
// per-row statistics of the backward, and the two warp-tile product
// policies, FmaF32 (CUDA cores, fp32 tiles) and MmaBf16 (tensor-core
// mma.sync m16n8k16 on bf16 tiles, fp32 sums). Only Attention.cu includes it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/SequencePositions.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace sharc::kernels::cuda::attention_tiles {

using Bf16 = __nv_bfloat16;

constexpr int kThreads = 128;
/// Queries per block (forward, dq) and keys per block (dk/dv): 16 per warp.
constexpr int kTileRows = 64;
/// Query tile of the dk/dv loop; smaller than 64 so that dk, dv, s and dp
/// fit in registers together at D = 128.
constexpr int kGradQueries = 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
/// false runs BF16 storage through FmaF32 as well (same tiling, fp32 tiles).
constexpr bool kBf16TensorCores = true;

/// seqLen counts queries; kvSeqLen keys, and query i sits at global
/// position queries.at(i), key j at keys.at(j) (kernels/Attention.h: one
/// run each, or the balanced split's two; seqLen and 0.. when square).
/// Positions grow with the row, so a tile's first and last rows bound its
/// keys, and the keys a query sees are a prefix of the block.
struct Shape {
  int seqLen, batch, numHeads, numKvHeads, headDim;
  float scale, scaleLog2;
  int kvSeqLen;
  RowPositions queries; ///< relative to the first key (Args::queries())
  RowPositions keys;    ///< from 0 (Args::keyPositions())
  /// Elements from one [s, b] row of v (dv) to the next: vPitch (dvPitch),
  /// resolved to numKvHeads * headDim where packed.
  int64_t vPitch, dvPitch;
};

/// Global position of query row `row` (past seqLen: the last run
/// continued, an upper bound for a partial tile).
__device__ inline int queryPosition(const Shape &shape, int row) {
  return static_cast<int>(shape.queries.at(row));
}

/// Position of key row `row`, continued past kvSeqLen as queryPosition.
__device__ inline int keyPosition(const Shape &shape, int row) {
  return static_cast<int>(shape.keys.at(row));
}

/// How many keys a query at `position` sees: those before the first key
/// past it (0 when it precedes them all).
__device__ inline int seenKeys(const Shape &shape, int position) {
  return min(shape.kvSeqLen,
             static_cast<int>(shape.keys.firstRowFrom(int64_t(position) + 1)));
}

/// The shape whose rows are the keys, for loading and storing K/V rows.
__device__ inline Shape keysOf(const Shape &shape) {
  Shape keys = shape;
  keys.seqLen = shape.kvSeqLen;
  return keys;
}

//===----------------------------------------------------------------------===//
// Global <-> shared memory, 8 elements (one 16-byte bf16 chunk) at a time
//===----------------------------------------------------------------------===//

__device__ inline void loadFloats(const float *src, float (&x)[8]) {
  float4 lo = *reinterpret_cast<const float4 *>(src);
  float4 hi = *reinterpret_cast<const float4 *>(src + 4);
  x[0] = lo.x, x[1] = lo.y, x[2] = lo.z, x[3] = lo.w;
  x[4] = hi.x, x[5] = hi.y, x[6] = hi.z, x[7] = hi.w;
}

__device__ inline void loadFloats(const Bf16 *src, float (&x)[8]) {
  uint4 bits = *reinterpret_cast<const uint4 *>(src);
  uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = __uint_as_float(words[i] << 16);
    x[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

template <typename T>
__device__ inline void copyChunk(float *dst, const T *src) {
  float x[8];
  loadFloats(src, x);
  *reinterpret_cast<float4 *>(dst) = make_float4(x[0], x[1], x[2], x[3]);
  *reinterpret_cast<float4 *>(dst + 4) = make_float4(x[4], x[5], x[6], x[7]);
}

__device__ inline void copyChunk(Bf16 *dst, const Bf16 *src) {
  *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
}

__device__ inline void zeroChunk(float *dst) {
  *reinterpret_cast<float4 *>(dst) = make_float4(0.f, 0.f, 0.f, 0.f);
  *reinterpret_cast<float4 *>(dst + 4) = make_float4(0.f, 0.f, 0.f, 0.f);
}

__device__ inline void zeroChunk(Bf16 *dst) {
  *reinterpret_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
}

__device__ inline void storePair(float *dst, float a, float b) {
  *reinterpret_cast<float2 *>(dst) = make_float2(a, b);
}

__device__ inline void storePair(Bf16 *dst, float a, float b) {
  *reinterpret_cast<__nv_bfloat162 *>(dst) = __floats2bfloat162_rn(a, b);
}

/// Rows [firstRow, firstRow + kRows) of one head into a [kRows][kStride]
/// tile; rows past seqLen and columns past headDim are zero.
template <int kRows, int D, int kStride, typename Elem, typename T>
__device__ void loadTile(Elem *tile, const T *src, int64_t rowStride,
                         int firstRow, const Shape &shape) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    int r = i / kChunks, col = (i % kChunks) * 8;
    int row = firstRow + r;
    if (row < shape.seqLen && col < shape.headDim)
      copyChunk(tile + r * kStride + col, src + row * rowStride + col);
    else
      zeroChunk(tile + r * kStride + col);
  }
}

/// lse2[r] = lse * log2(e) and delta[r] = sum_d dout*out - dlse for the
/// kRows rows from firstRow (dlse null: 0; kernels/Attention.h);
/// kThreads / kRows adjacent lanes share a row and combine their partial
/// sums in a fixed order, so delta is deterministic.
template <int kRows, typename T>
__device__ void loadRowStats(float *lse2, float *delta, const float *lse,
                             const float *dlse, const T *dout, const T *out,
                             int64_t rowStride, int firstRow,
                             const Shape &shape) {
  constexpr int kPerRow = kThreads / kRows;
  const int r = threadIdx.x / kPerRow, part = threadIdx.x % kPerRow;
  const int row = firstRow + r;
  float sum = 0.f;
  if (row < shape.seqLen)
    for (int col = part * 8; col < shape.headDim; col += 8 * kPerRow) {
      float x[8], y[8];
      loadFloats(dout + row * rowStride + col, x);
      loadFloats(out + row * rowStride + col, y);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        sum = fmaf(x[i], y[i], sum);
    }
#pragma unroll
  for (int offset = 1; offset < kPerRow; offset *= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (part == 0) {
    delta[r] = dlse && row < shape.seqLen ? sum - dlse[row] : sum;
    lse2[r] = row < shape.seqLen ? lse[row] * kLog2e : 0.f;
  }
}

/// Writes the warp's 16 x 8*NT accumulator rows (row0 and row0 + 8 for this
/// lane) times scale, skipping rows past seqLen and columns past headDim.
template <int NT, typename T>
__device__ void storeRows(T *dst, int64_t rowStride, const float (&acc)[NT][4],
                          float scale, int row0, const Shape &shape) {
  const int col0 = 2 * (threadIdx.x % 4);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if (8 * nt >= shape.headDim)
      continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int row = row0 + 8 * half;
      if (row < shape.seqLen)
        storePair(dst + row * rowStride + 8 * nt + col0,
                  acc[nt][2 * half] * scale, acc[nt][2 * half + 1] * scale);
    }
  }
}

__device__ inline float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ inline float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

//===----------------------------------------------------------------------===//
// Warp tile products. Both policies compute, for the calling warp,
//   abT:   acc[16 x 8NT] += A[16 x K] * B[8NT x K]^T   (A, B in smem)
//   abReg: acc[16 x 8NT] += A[16 x 8KT] * B[8KT x 8NT] (A in acc layout)
// with every shared-memory tile row-major and `stride` elements per row.
//===----------------------------------------------------------------------===//

struct FmaF32 {
  using Elem = float;
  /// 16-byte rows that are 16 bytes apart mod 128: float4 reads of 8 rows
  /// hit 32 distinct banks.
  static constexpr int kPad = 4;

  static __device__ float dot4(float4 x, float4 y, float sum) {
    sum = fmaf(x.x, y.x, sum);
    sum = fmaf(x.y, y.y, sum);
    sum = fmaf(x.z, y.z, sum);
    return fmaf(x.w, y.w, sum);
  }

  template <int K, int NT>
  static __device__ void abT(float (&acc)[NT][4], const float *a,
                             const float *b, int stride) {
    const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const float *aTop = a + g * stride, *aBottom = a + (g + 8) * stride;
    const float *bLane = b + 2 * t * stride;
#pragma unroll 2
    for (int k = 0; k < K; k += 4) {
      float4 top = *reinterpret_cast<const float4 *>(aTop + k);
      float4 bottom = *reinterpret_cast<const float4 *>(aBottom + k);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float4 col = *reinterpret_cast<const float4 *>(
              bLane + (8 * nt + e) * stride + k);
          acc[nt][e] = dot4(top, col, acc[nt][e]);
          acc[nt][2 + e] = dot4(bottom, col, acc[nt][2 + e]);
        }
    }
  }

  /// A[row][k] lives in the lane of its row quad that owns column k, so it
  /// is fetched with a shuffle rather than a round trip through smem.
  template <int NT, int KT>
  static __device__ void abReg(float (&acc)[NT][4], const float (&a)[KT][4],
                               const float *b, int stride) {
    const int lane = threadIdx.x % 32, quadBase = lane & ~3;
    const float *bLane = b + 2 * (lane % 4);
#pragma unroll
    for (int kt = 0; kt < KT; ++kt)
#pragma unroll
      for (int owner = 0; owner < 4; ++owner)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float top = __shfl_sync(0xffffffffu, a[kt][e], quadBase + owner);
          float bottom =
              __shfl_sync(0xffffffffu, a[kt][2 + e], quadBase + owner);
          const float *bRow = bLane + (8 * kt + 2 * owner + e) * stride;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            float2 pair = *reinterpret_cast<const float2 *>(bRow + 8 * nt);
            acc[nt][0] = fmaf(top, pair.x, acc[nt][0]);
            acc[nt][1] = fmaf(top, pair.y, acc[nt][1]);
            acc[nt][2] = fmaf(bottom, pair.x, acc[nt][2]);
            acc[nt][3] = fmaf(bottom, pair.y, acc[nt][3]);
          }
        }
  }
};

struct MmaBf16 {
  using Elem = Bf16;
  /// Rows 16 bytes apart mod 128, so each ldmatrix 8x8 load is conflict-free.
  static constexpr int kPad = 8;

  static __device__ void ldmatrix(uint32_t (&frag)[4], const Bf16 *row) {
    uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(frag[0]), "=r"(frag[1]), "=r"(frag[2]), "=r"(frag[3])
                 : "r"(address));
  }

  static __device__ void ldmatrixTrans(uint32_t (&frag)[4], const Bf16 *row) {
    uint32_t address = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile(
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
        : "=r"(frag[0]), "=r"(frag[1]), "=r"(frag[2]), "=r"(frag[3])
        : "r"(address));
  }

  static __device__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }

  static __device__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return static_cast<uint32_t>(__bfloat16_as_ushort(pair.x)) |
           static_cast<uint32_t>(__bfloat16_as_ushort(pair.y)) << 16;
  }

  // In an x4 ldmatrix, lanes 8i..8i+7 address the rows of 8x8 matrix i.
  // For A the matrices are (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows
  // 0-7, k 8-15), (rows 8-15, k 8-15): fragment registers a0..a3. For B^T
  // stored as rows n they are (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k
  // 0-7), (n 8-15, k 8-15): b0, b1 of two n-tiles.
  template <int K, int NT>
  static __device__ void abT(float (&acc)[NT][4], const Bf16 *a, const Bf16 *b,
                             int stride) {
    static_assert(K % 16 == 0 && NT % 2 == 0, "whole 16x16 fragments");
    const int lane = threadIdx.x % 32, matrix = lane / 8, r = lane % 8;
    const Bf16 *aLane = a + ((matrix & 1) * 8 + r) * stride + (matrix / 2) * 8;
    const Bf16 *bLane = b + ((matrix / 2) * 8 + r) * stride + (matrix & 1) * 8;
#pragma unroll
    for (int kc = 0; kc < K / 16; ++kc) {
      uint32_t aFrag[4];
      ldmatrix(aFrag, aLane + kc * 16);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t bFrag[4];
        ldmatrix(bFrag, bLane + np * 16 * stride + kc * 16);
        mma(acc[2 * np], aFrag, bFrag[0], bFrag[1]);
        mma(acc[2 * np + 1], aFrag, bFrag[2], bFrag[3]);
      }
    }
  }

  // Two adjacent 16x8 accumulator tiles are exactly one 16x16 A fragment.
  // B is stored as rows k, so it is loaded transposed: matrices (k 0-7,
  // n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
  template <int NT, int KT>
  static __device__ void abReg(float (&acc)[NT][4], const float (&a)[KT][4],
                               const Bf16 *b, int stride) {
    static_assert(KT % 2 == 0 && NT % 2 == 0, "whole 16x16 fragments");
    const int lane = threadIdx.x % 32, matrix = lane / 8, r = lane % 8;
    const Bf16 *bLane = b + ((matrix & 1) * 8 + r) * stride + (matrix / 2) * 8;
#pragma unroll
    for (int kc = 0; kc < KT / 2; ++kc) {
      const uint32_t aFrag[4] = {pack(a[2 * kc][0], a[2 * kc][1]),
                                 pack(a[2 * kc][2], a[2 * kc][3]),
                                 pack(a[2 * kc + 1][0], a[2 * kc + 1][1]),
                                 pack(a[2 * kc + 1][2], a[2 * kc + 1][3])};
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        uint32_t bFrag[4];
        ldmatrixTrans(bFrag, bLane + kc * 16 * stride + np * 16);
        mma(acc[2 * np], aFrag, bFrag[0], bFrag[1]);
        mma(acc[2 * np + 1], aFrag, bFrag[2], bFrag[3]);
      }
    }
  }
};

} // namespace sharc::kernels::cuda::attention_tiles
