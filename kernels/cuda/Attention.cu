//===- Attention.cu - causal GQA attention forward and backward -----------===//
//
// Implements the math stated in kernels/Attention.h with flash-attention
// tiling: scores exist only in registers; the forward keeps an online softmax
// (running max m and sum l per row), the backward recomputes p from lse.
// Every kernel runs 128-thread blocks of 4 warps, warp w owning rows
// 16w..16w+15 of its block's tile. Each 16x8 accumulator tile is held in the
// mma.sync m16n8k16 layout (lane 4g+t owns rows g and g+8, columns 2t and
// 2t+1) whichever policy does the arithmetic:
//   MmaBf16  bf16 tiles in shared memory, tensor-core mma.sync, fp32 sums;
//   FmaF32   fp32 tiles in shared memory, CUDA-core FMAs (F32 storage).
// D is the head dim rounded up to 64, 96 or 128; tiles are zero-padded.
//
// attentionForwardKernel  grid (batch*numHeads, ceil(seqLen/64)), block 128.
//   A block owns 64 queries of one head and walks the key tiles of 64 up to
//   the diagonal; a thread owns 2 query rows x D/4 columns of out.
// attentionGradKvKernel   grid (batch*numKvHeads, ceil(seqLen/64)), block 128.
//   A block owns 64 keys of one KV head and walks the group's query heads and
//   their query tiles of 32 from the diagonal on, so dk and dv are summed in
//   one fixed order without atomics; a thread owns 2 key rows x D/4 columns
//   of dk and of dv.
// attentionGradQKernel    grid (batch*numHeads, ceil(seqLen/64)), block 128.
//   A block owns 64 queries and walks the key tiles up to the diagonal; a
//   thread owns 2 query rows x D/4 columns of dq.
// delta = sum_d dout*out is recomputed for each query tile (no scratch
// memory). Grids put the longest causal tiles first in launch order.
// "The diagonal" is where key positions pass query positions: both may be
// two runs (the balanced cp split), so the walks' bounds and each thread's
// per-row mask bounds come from positions (the tile loops then compare
// row indices), and a row before every key ends with out 0.
//
// Bound: compute. BF16 aims at the mma.sync rate (tiles are loaded
// synchronously; no cp.async pipeline yet); F32 at the CUDA-core FMA rate,
// its inner loops issuing one shared-memory wavefront per ~4 FMAs.
//
//===----------------------------------------------------------------------===//

#include "kernels/Attention.h"
#include "kernels/cuda/AttentionTiles.cuh"
#include "kernels/cuda/Launch.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace sharc::kernels::cuda {
namespace {

using namespace attention_tiles;

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// Where the (batch b, query head h) slice starts in each layout.
struct Slice {
  int64_t qRowStride, kvRowStride; ///< elements from one position to the next
  int64_t qOffset, kvOffset, lseOffset;
  int64_t vRowStride, vOffset, dvRowStride, dvOffset; ///< v, dv may be columns
};

__device__ inline Slice sliceOf(const Shape &shape, int b, int h) {
  const int kvHead = h / (shape.numHeads / shape.numKvHeads);
  return {int64_t(shape.batch) * shape.numHeads * shape.headDim,
          int64_t(shape.batch) * shape.numKvHeads * shape.headDim,
          (int64_t(b) * shape.numHeads + h) * shape.headDim,
          (int64_t(b) * shape.numKvHeads + kvHead) * shape.headDim,
          (int64_t(b) * shape.numHeads + h) * shape.seqLen,
          shape.batch * shape.vPitch,
          b * shape.vPitch + int64_t(kvHead) * shape.headDim,
          shape.batch * shape.dvPitch,
          b * shape.dvPitch + int64_t(kvHead) * shape.headDim};
}

template <typename T> struct ForwardParams {
  const T *q, *k, *v;
  T *out;
  float *lse;
  Shape shape;
};

template <typename T> struct GradParams {
  const T *q, *k, *v, *out, *dout;
  const float *lse, *dlse; ///< dlse may be null (0)
  T *dq, *dk, *dv;
  Shape shape;
};

/// s = -inf where the key is not among the `seen` keys of its row (rows
/// row0 and row0 + 8; seenKeys: those at or before the query's position,
/// a prefix, and none past kvSeqLen, since a partial last tile's rows past
/// the keys were loaded as zeros and a query past every key, ring
/// attention's earlier blocks, would otherwise weigh them); columns are
/// keys key0 + 8nt (+1). Comparing row indices against a per-row bound
/// keeps the position arithmetic out of the tile loop.
template <int NT>
__device__ void maskUnseenKeys(float (&s)[NT][4], const int (&seen)[2],
                               int key0) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (key0 + 8 * nt + (c & 1) >= seen[c >> 1])
        s[nt][c] = -INFINITY;
}

/// Folds one key tile of raw scores into the running max m (log2 units),
/// the lane's partial row sum l and the output o; s becomes p.
template <int NT, int DT>
__device__ void onlineSoftmax(float (&s)[NT][4], float (&m)[2], float (&l)[2],
                              float (&o)[DT][4], float scaleLog2) {
  float tileMax[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      tileMax[c >> 1] = fmaxf(tileMax[c >> 1], s[nt][c]);
  float alpha[2], base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // Once a row has seen a key mNew is finite, alpha = exp2(-inf) = 0 on
    // that tile, and a later tile all masked for the row leaves m and l as
    // they were. A row that has seen none yet (ring attention's balanced
    // blocks: its position precedes these keys) keeps m = -inf; it is
    // shifted by 0 instead, so its p and alpha are 0 rather than NaN.
    float mNew = fmaxf(m[r], quadMax(tileMax[r]) * scaleLog2);
    base[r] = mNew == -INFINITY ? 0.f : mNew;
    alpha[r] = exp2f(m[r] - base[r]);
    m[r] = mNew;
    l[r] *= alpha[r];
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      s[nt][c] = exp2f(fmaf(s[nt][c], scaleLog2, -base[c >> 1]));
      l[c >> 1] += s[nt][c];
    }
#pragma unroll
  for (int dt = 0; dt < DT; ++dt)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      o[dt][c] *= alpha[c >> 1];
}

template <typename Math, typename T, int D>
__global__ void __launch_bounds__(kThreads)
    attentionForwardKernel(ForwardParams<T> p) {
  using Elem = typename Math::Elem;
  constexpr int kStride = D + Math::kPad;
  extern __shared__ __align__(16) unsigned char smem[];
  Elem *qTile = reinterpret_cast<Elem *>(smem);
  Elem *kTile = qTile + kTileRows * kStride;
  Elem *vTile = kTile + kTileRows * kStride;

  const Shape &shape = p.shape;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.x % shape.numHeads;
  const Slice at = sliceOf(shape, blockIdx.x / shape.numHeads, h);
  const int qBlock = static_cast<int>(gridDim.y - 1 - blockIdx.y);
  loadTile<kTileRows, D, kStride>(qTile, p.q + at.qOffset, at.qRowStride,
                                  qBlock * kTileRows, shape);

  const int row0 = qBlock * kTileRows + warp * 16 + lane / 4;
  // Key tiles up to the block's last query position; those reaching past
  // its first query need the mask (square: only the diagonal one).
  const Shape keys = keysOf(shape);
  const int firstQuery = queryPosition(shape, qBlock * kTileRows);
  const int numSeen =
      seenKeys(shape, queryPosition(shape, qBlock * kTileRows + kTileRows - 1));
  const int seen[2] = {seenKeys(shape, queryPosition(shape, row0)),
                       seenKeys(shape, queryPosition(shape, row0 + 8))};
  float o[D / 8][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  for (int kBlock = 0; kBlock * kTileRows < numSeen; ++kBlock) {
    __syncthreads();
    loadTile<kTileRows, D, kStride>(kTile, p.k + at.kvOffset, at.kvRowStride,
                                    kBlock * kTileRows, keys);
    loadTile<kTileRows, D, kStride>(vTile, p.v + at.vOffset, at.vRowStride,
                                    kBlock * kTileRows, keys);
    __syncthreads();
    float s[kTileRows / 8][4] = {};
    Math::template abT<D>(s, qTile + warp * 16 * kStride, kTile, kStride);
    if (keyPosition(shape, (kBlock + 1) * kTileRows - 1) > firstQuery ||
        (kBlock + 1) * kTileRows > shape.kvSeqLen)
      maskUnseenKeys(s, seen, kBlock * kTileRows + 2 * (lane % 4));
    onlineSoftmax(s, m, l, o, shape.scaleLog2);
    Math::abReg(o, s, vTile, kStride);
  }

  // A row that saw no key has l = 0 and o = 0: out 0, lse kEmptyRowLse.
  const float rowSum[2] = {quadSum(l[0]), quadSum(l[1])};
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (rowSum[c >> 1] > 0.f)
        o[dt][c] /= rowSum[c >> 1];
  storeRows(p.out + at.qOffset, at.qRowStride, o, 1.f, row0, shape);
  for (int r = 0; r < 2; ++r)
    if (lane % 4 == 0 && row0 + 8 * r < shape.seqLen)
      p.lse[at.lseOffset + row0 + 8 * r] =
          rowSum[r] > 0.f ? (m[r] + log2f(rowSum[r])) * kLn2 : kEmptyRowLse;
}

// Works on transposed tiles, rows = keys: s^T = K Q^T, dp^T = V dout^T, then
// dv += p^T dout and dk += ds^T q, so p^T and ds^T feed abReg directly.
template <typename Math, typename T, int D>
__global__ void __launch_bounds__(kThreads)
    attentionGradKvKernel(GradParams<T> p) {
  using Elem = typename Math::Elem;
  constexpr int kStride = D + Math::kPad;
  extern __shared__ __align__(16) unsigned char smem[];
  Elem *kTile = reinterpret_cast<Elem *>(smem);
  Elem *vTile = kTile + kTileRows * kStride;
  Elem *qTile = vTile + kTileRows * kStride;
  Elem *doutTile = qTile + kGradQueries * kStride;
  float *lse2 = reinterpret_cast<float *>(doutTile + kGradQueries * kStride);
  float *delta = lse2 + kGradQueries;

  const Shape &shape = p.shape;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int b = blockIdx.x / shape.numKvHeads;
  const int groupSize = shape.numHeads / shape.numKvHeads;
  const int firstHead = blockIdx.x % shape.numKvHeads * groupSize;
  const int kBlock = blockIdx.y;
  const Slice kv = sliceOf(shape, b, firstHead);
  const Shape keys = keysOf(shape);
  loadTile<kTileRows, D, kStride>(kTile, p.k + kv.kvOffset, kv.kvRowStride,
                                  kBlock * kTileRows, keys);
  loadTile<kTileRows, D, kStride>(vTile, p.v + kv.vOffset, kv.vRowStride,
                                  kBlock * kTileRows, keys);

  const int key0 = kBlock * kTileRows + warp * 16 + lane / 4;
  const int numQTiles = (shape.seqLen + kGradQueries - 1) / kGradQueries;
  // The first query tile with a query at or after this key tile's first
  // key.
  const int firstQTile = static_cast<int>(shape.queries.firstRowFrom(
                             keyPosition(shape, kBlock * kTileRows))) /
                         kGradQueries;
  // The first query row that sees key row key0 (and key0 + 8): the rows
  // before it are at earlier positions. Two compares an element, so no
  // tile-level test of whether the mask is needed.
  const int firstSeer[2] = {
      static_cast<int>(shape.queries.firstRowFrom(keyPosition(shape, key0))),
      static_cast<int>(
          shape.queries.firstRowFrom(keyPosition(shape, key0 + 8)))};
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  for (int h = firstHead; h < firstHead + groupSize; ++h) {
    const Slice at = sliceOf(shape, b, h);
    for (int qTileIndex = firstQTile; qTileIndex < numQTiles; ++qTileIndex) {
      const int query0 = qTileIndex * kGradQueries;
      __syncthreads();
      loadTile<kGradQueries, D, kStride>(qTile, p.q + at.qOffset, at.qRowStride,
                                         query0, shape);
      loadTile<kGradQueries, D, kStride>(doutTile, p.dout + at.qOffset,
                                         at.qRowStride, query0, shape);
      loadRowStats<kGradQueries>(lse2, delta, p.lse + at.lseOffset,
                                 p.dlse ? p.dlse + at.lseOffset : nullptr,
                                 p.dout + at.qOffset, p.out + at.qOffset,
                                 at.qRowStride, query0, shape);
      __syncthreads();
      float sT[kGradQueries / 8][4] = {}, dpT[kGradQueries / 8][4] = {};
      Math::template abT<D>(sT, kTile + warp * 16 * kStride, qTile, kStride);
      Math::template abT<D>(dpT, vTile + warp * 16 * kStride, doutTile,
                            kStride);
#pragma unroll
      for (int nt = 0; nt < kGradQueries / 8; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int col = 8 * nt + 2 * (lane % 4) + (c & 1);
          const int query = query0 + col;
          const bool masked =
              query < firstSeer[c >> 1] || query >= shape.seqLen;
          const float prob =
              masked ? 0.f
                     : exp2f(fmaf(sT[nt][c], shape.scaleLog2, -lse2[col]));
          dpT[nt][c] = prob * (dpT[nt][c] - delta[col]);
          sT[nt][c] = prob;
        }
      Math::abReg(dv, sT, doutTile, kStride);
      Math::abReg(dk, dpT, qTile, kStride);
    }
  }
  storeRows(p.dv + kv.dvOffset, kv.dvRowStride, dv, 1.f, key0, keys);
  storeRows(p.dk + kv.kvOffset, kv.kvRowStride, dk, shape.scale, key0, keys);
}

template <typename Math, typename T, int D>
__global__ void __launch_bounds__(kThreads)
    attentionGradQKernel(GradParams<T> p) {
  using Elem = typename Math::Elem;
  constexpr int kStride = D + Math::kPad;
  extern __shared__ __align__(16) unsigned char smem[];
  Elem *qTile = reinterpret_cast<Elem *>(smem);
  Elem *doutTile = qTile + kTileRows * kStride;
  Elem *kTile = doutTile + kTileRows * kStride;
  Elem *vTile = kTile + kTileRows * kStride;
  float *lse2 = reinterpret_cast<float *>(vTile + kTileRows * kStride);
  float *delta = lse2 + kTileRows;

  const Shape &shape = p.shape;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int h = blockIdx.x % shape.numHeads;
  const Slice at = sliceOf(shape, blockIdx.x / shape.numHeads, h);
  const int query0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * kTileRows;
  loadTile<kTileRows, D, kStride>(qTile, p.q + at.qOffset, at.qRowStride,
                                  query0, shape);
  loadTile<kTileRows, D, kStride>(doutTile, p.dout + at.qOffset, at.qRowStride,
                                  query0, shape);
  loadRowStats<kTileRows>(lse2, delta, p.lse + at.lseOffset,
                          p.dlse ? p.dlse + at.lseOffset : nullptr,
                          p.dout + at.qOffset, p.out + at.qOffset,
                          at.qRowStride, query0, shape);
  __syncthreads();
  const int local0 = warp * 16 + lane / 4, row0 = query0 + local0;
  const float rowLse2[2] = {lse2[local0], lse2[local0 + 8]};
  const float rowDelta[2] = {delta[local0], delta[local0 + 8]};

  // As the forward: key tiles up to the block's last query position.
  const Shape keys = keysOf(shape);
  const int firstQuery = queryPosition(shape, query0);
  const int numSeen =
      seenKeys(shape, queryPosition(shape, query0 + kTileRows - 1));
  const int seen[2] = {seenKeys(shape, queryPosition(shape, row0)),
                       seenKeys(shape, queryPosition(shape, row0 + 8))};
  float dq[D / 8][4] = {};
  for (int key0 = 0; key0 < numSeen; key0 += kTileRows) {
    __syncthreads();
    loadTile<kTileRows, D, kStride>(kTile, p.k + at.kvOffset, at.kvRowStride,
                                    key0, keys);
    loadTile<kTileRows, D, kStride>(vTile, p.v + at.vOffset, at.vRowStride,
                                    key0, keys);
    __syncthreads();
    float s[kTileRows / 8][4] = {}, dp[kTileRows / 8][4] = {};
    Math::template abT<D>(s, qTile + warp * 16 * kStride, kTile, kStride);
    Math::template abT<D>(dp, doutTile + warp * 16 * kStride, vTile, kStride);
    if (keyPosition(shape, key0 + kTileRows - 1) > firstQuery ||
        key0 + kTileRows > shape.kvSeqLen)
      maskUnseenKeys(s, seen, key0 + 2 * (lane % 4));
#pragma unroll
    for (int nt = 0; nt < kTileRows / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = c >> 1;
        const float prob = exp2f(fmaf(s[nt][c], shape.scaleLog2, -rowLse2[r]));
        dp[nt][c] = prob * (dp[nt][c] - rowDelta[r]);
      }
    Math::abReg(dq, dp, kTile, kStride);
  }
  storeRows(p.dq + at.qOffset, at.qRowStride, dq, shape.scale, row0, shape);
}

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

template <typename T>
using MathFor = std::conditional_t<std::is_same_v<T, Bf16> && kBf16TensorCores,
                                   MmaBf16, FmaF32>;

template <typename Math, int D> constexpr size_t tileBytes(int rows) {
  return size_t(rows) * (D + Math::kPad) * sizeof(typename Math::Elem);
}

template <typename T> struct TypeTag {
  using type = T;
};

/// Calls body(TypeTag<T>, integral_constant<int, D>) for the storage type
/// and the head-dim bucket D >= headDim.
template <typename Body>
Status dispatch(DType dtype, int64_t headDim, Body &&body) {
  auto withDim = [&](auto tag) -> Status {
    if (headDim <= 64)
      return body(tag, std::integral_constant<int, 64>());
    if (headDim <= 96)
      return body(tag, std::integral_constant<int, 96>());
    return body(tag, std::integral_constant<int, 128>());
  };
  if (dtype == DType::BF16)
    return withDim(TypeTag<Bf16>());
  return withDim(TypeTag<float>());
}

template <typename Kernel, typename Params>
Status launch(Kernel kernel, const char *name, dim3 grid, size_t smemBytes,
              DeviceStream stream, const Params &params) {
  // Above 48 KiB dynamic shared memory needs an explicit opt-in.
  SHARC_CUDA(cudaFuncSetAttribute(kernel,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smemBytes)));
  kernel<<<grid, kThreads, smemBytes, stream>>>(params);
  return launchStatus(name);
}

/// Validates the sizes shared by both argument structs; on success `shape`
/// holds them as ints (the grid bound keeps every one in range).
int64_t dvPitchOf(const AttentionArgs &) { return 0; }
int64_t dvPitchOf(const AttentionGradArgs &args) { return args.dvPitch; }

template <typename Args> Status checkShape(const Args &args, Shape &shape) {
  if (args.seqLen < 0 || args.batch < 0)
    return Status::invalidInput(
        "attention: seqLen (" + std::to_string(args.seqLen) + ") and batch (" +
        std::to_string(args.batch) + ") must be non-negative");
  // Positions relative to the first key. Each run of queries and of keys
  // (the balanced split has two) starts inside the rows and past the
  // previous run's end, so positions grow with the row (the tile bounds
  // rely on it). A query before every key (ring attention's balanced
  // blocks) sees none: out 0, lse kEmptyRowLse; a block that no query sees
  // is never launched. A query past the last key (ring attention's earlier
  // blocks) sees them all: the walks stop at kvSeqLen.
  RowPositions queries = args.queries(), keys = args.keyPositions();
  auto ordered = [](const RowPositions &rows, int64_t numRows) {
    return rows.isOneRun() || (rows.secondRow < numRows &&
                               rows.secondStart >= rows.start + rows.secondRow);
  };
  const int64_t lastQuery = args.seqLen > 0 ? queries.at(args.seqLen - 1) : 0;
  const int64_t lastKey = keys.at(args.keys() - 1);
  constexpr int64_t kPositionBound = INT32_MAX / 2;
  if (!ordered(queries, args.seqLen) || !ordered(keys, args.keys()) ||
      lastQuery < 0 || queries.start < -kPositionBound ||
      lastQuery > kPositionBound || lastKey > kPositionBound)
    return Status::invalidInput(
        "attention: " + std::to_string(args.seqLen) +
        " query rows at positions " + std::to_string(args.queryStart) +
        (queries.isOneRun()
             ? ""
             : " and from row " + std::to_string(args.querySecondRow) + " " +
                   std::to_string(args.querySecondStart)) +
        " and " + std::to_string(args.keys()) + " keys at " +
        std::to_string(args.keyStart) +
        (keys.isOneRun()
             ? ""
             : " and from row " + std::to_string(args.keySecondRow) + " " +
                   std::to_string(args.keySecondStart)) +
        " are not ordered runs where some query sees a key");
  if (args.numHeads <= 0 || args.numKvHeads <= 0 ||
      args.numHeads % args.numKvHeads != 0)
    return Status::invalidInput("attention: numKvHeads (" +
                                std::to_string(args.numKvHeads) +
                                ") must be positive and divide numHeads (" +
                                std::to_string(args.numHeads) + ")");
  if (args.headDim < 8 || args.headDim > 128 || args.headDim % 8 != 0)
    return Status::invalidInput(
        "attention: headDim must be a multiple of 8 in [8, 128], got " +
        std::to_string(args.headDim));
  if (ceilDiv(args.keys(), kTileRows) > 65535 ||
      args.batch * args.numHeads > INT32_MAX)
    return Status::invalidInput(
        "attention: seqLen " + std::to_string(args.seqLen) + " x batch " +
        std::to_string(args.batch) + " exceeds the launch grid");
  const int64_t packedKv = args.numKvHeads * args.headDim;
  const int64_t vPitch = args.vPitch > 0 ? args.vPitch : packedKv;
  const int64_t dvPitch = dvPitchOf(args) > 0 ? dvPitchOf(args) : packedKv;
  if (vPitch < packedKv || dvPitch < packedKv || vPitch % 8 != 0 ||
      dvPitch % 8 != 0)
    return Status::invalidInput(
        "attention: v's and dv's rows must hold " + std::to_string(packedKv) +
        " elements and start on 8-element boundaries, got pitches " +
        std::to_string(vPitch) + " and " + std::to_string(dvPitch));
  float scale = 1.0f / std::sqrt(static_cast<float>(args.headDim));
  shape = {static_cast<int>(args.seqLen),
           static_cast<int>(args.batch),
           static_cast<int>(args.numHeads),
           static_cast<int>(args.numKvHeads),
           static_cast<int>(args.headDim),
           scale,
           scale * kLog2e,
           static_cast<int>(args.keys()),
           queries,
           keys,
           vPitch,
           dvPitch};
  return Status::ok();
}

/// All views share one dtype, F32 or BF16, and are 16-byte aligned (the
/// kernels move 8 elements at a time); lse is aligned for floats.
Status checkViews(std::initializer_list<ConstTensorView> views,
                  const float *lse, bool isEmpty) {
  DType dtype = views.begin()->dtype;
  for (const ConstTensorView &view : views)
    if (view.dtype != dtype)
      return Status::invalidInput(std::string("attention: tensors mix ") +
                                  dtypeName(dtype) + " and " +
                                  dtypeName(view.dtype));
  if (dtype != DType::F32 && dtype != DType::BF16)
    return Status::invalidInput(
        std::string("attention: dtype must be f32 or bf16, got ") +
        dtypeName(dtype));
  if (isEmpty)
    return Status::ok();
  for (const ConstTensorView &view : views)
    if (!view.data || reinterpret_cast<uintptr_t>(view.data) % 16 != 0)
      return Status::invalidInput("attention: tensor data must be non-null "
                                  "and 16-byte aligned");
  if (!lse || reinterpret_cast<uintptr_t>(lse) % alignof(float) != 0)
    return Status::invalidInput("attention: lse must be non-null and aligned");
  return Status::ok();
}

} // namespace

Status attention(const AttentionArgs &args, DeviceStream stream) {
  Shape shape;
  SHARC_TRY(checkShape(args, shape));
  const bool isEmpty = args.seqLen == 0 || args.batch == 0;
  SHARC_TRY(checkViews({args.q, args.k, args.v, args.out}, args.lse, isEmpty));
  if (isEmpty)
    return Status::ok();
  return dispatch(args.q.dtype, args.headDim, [&](auto tag, auto dim) {
    using T = typename decltype(tag)::type;
    using Math = MathFor<T>;
    constexpr int D = decltype(dim)::value;
    ForwardParams<T> params{static_cast<const T *>(args.q.data),
                            static_cast<const T *>(args.k.data),
                            static_cast<const T *>(args.v.data),
                            static_cast<T *>(args.out.data),
                            args.lse,
                            shape};
    dim3 grid(shape.batch * shape.numHeads, ceilDiv(shape.seqLen, kTileRows));
    return launch(attentionForwardKernel<Math, T, D>, "attentionForwardKernel",
                  grid, tileBytes<Math, D>(3 * kTileRows), stream, params);
  });
}

Status attentionGrad(const AttentionGradArgs &args, DeviceStream stream) {
  Shape shape;
  SHARC_TRY(checkShape(args, shape));
  const bool isEmpty = args.seqLen == 0 || args.batch == 0;
  SHARC_TRY(checkViews(
      {args.q, args.k, args.v, args.out, args.dout, args.dq, args.dk, args.dv},
      args.lse, isEmpty));
  if (isEmpty)
    return Status::ok();
  return dispatch(args.q.dtype, args.headDim, [&](auto tag, auto dim) {
    using T = typename decltype(tag)::type;
    using Math = MathFor<T>;
    constexpr int D = decltype(dim)::value;
    GradParams<T> params{static_cast<const T *>(args.q.data),
                         static_cast<const T *>(args.k.data),
                         static_cast<const T *>(args.v.data),
                         static_cast<const T *>(args.out.data),
                         static_cast<const T *>(args.dout.data),
                         args.lse,
                         args.dlse,
                         static_cast<T *>(args.dq.data),
                         static_cast<T *>(args.dk.data),
                         static_cast<T *>(args.dv.data),
                         shape};
    const int numSeqBlocks = ceilDiv(shape.seqLen, kTileRows);
    const int numKeyBlocks = ceilDiv(shape.kvSeqLen, kTileRows);
    size_t kvBytes = tileBytes<Math, D>(2 * kTileRows + 2 * kGradQueries) +
                     2 * kGradQueries * sizeof(float);
    SHARC_TRY(launch(attentionGradKvKernel<Math, T, D>, "attentionGradKvKernel",
                     dim3(shape.batch * shape.numKvHeads, numKeyBlocks),
                     kvBytes, stream, params));
    size_t qBytes =
        tileBytes<Math, D>(4 * kTileRows) + 2 * kTileRows * sizeof(float);
    return launch(attentionGradQKernel<Math, T, D>, "attentionGradQKernel",
                  dim3(shape.batch * shape.numHeads, numSeqBlocks), qBytes,
                  stream, params);
  });
}

} // namespace sharc::kernels::cuda
