//===- RmsNormRope.cu - per-head RMSNorm fused with rope on the device ----===//
//
// Implements the math stated in kernels/RmsNormRope.h. The work is tiles
// of N heads at one position (N = 4 forward, 2 backward, where x and dy of
// two tiles are held at once); a warp owns a tile, lane l the rotate-half
// pairs (j, j + D/2) for j = (k * 32 + l) * V + v (V = 2 elements per load
// where D/2 is even, else 1), so the two halves a rotation mixes are in
// one thread, a head's sum of squares is one warp butterfly and each lane
// forms cos/sin of its own frequencies: no barrier, no shared table. The
// forward runs a warp per tile. The backward gives block b the tiles
// [b T / G, (b + 1) T / G) of T (G = rmsNormRopeGradBlocks, fixed by the
// sizes), its warps taking every kWarps-th in order with the next tile's
// loads in flight; each lane keeps its dw columns in registers, the warps'
// sums meet in shared memory in warp order and leave one partial row per
// block, which RmsNorm.cu's sumPartialRows adds in a fixed order.
//
// Measured on one H200 (MiniMind, q [2048, 4, 8 x 96] and k [.., 4 x 96]
// bf16, CUDA events per instruction): the kernels are bound by latency,
// not DRAM (q and k took the same time). Blocks that walked several
// positions with a barrier and a shared cos/sin table per position took
// 21 us (forward) and 30 us (backward) per call. Heads whose halves are
// whole 16-byte vectors (MiniMind's 96, 128) take the vector path,
// RmsNormRopeVec.cu, first; these kernels take the rest.
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNormRope.h"

#include "kernels/Rope.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/RmsNormRopeVec.h"
#include "kernels/cuda/RmsNormVec.h"
#include "kernels/cuda/RopeFreqs.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace sharc::kernels::cuda {
namespace {

constexpr int kWarps = kRmsNormRopeWarps;
/// Pair groups per lane (a template argument, so registers are sized to
/// the head): one up to D/2 = 32 * V, else up to kMostSteps.
constexpr int kMostSteps = 4;
/// Heads of a tile, forward and backward.
constexpr int kUnits = 4;
constexpr int kGradUnits = kRmsNormRopeGradUnits;
/// Backward blocks resident on one SM: 3 x 132 SMs hold all
/// kRmsNormRopeGradMaxBlocks in one wave (at 4 per SM, 64 registers, the
/// tiles' registers spilled).
constexpr int kBlocksPerSm = 3;

/// V consecutive elements of T as floats.
template <typename T, int V> struct Pack {
  float v[V];
};

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> loadPack(const T *p) {
  Pack<T, V> out;
  if constexpr (V == 2 && sizeof(T) == 2) {
    float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
    out.v[0] = f.x;
    out.v[1] = f.y;
  } else if constexpr (V == 2) {
    float2 f = *reinterpret_cast<const float2 *>(p);
    out.v[0] = f.x;
    out.v[1] = f.y;
  } else if constexpr (sizeof(T) == 2) {
    out.v[0] = __bfloat162float(*p);
  } else {
    out.v[0] = *p;
  }
  return out;
}

template <typename T, int V>
__device__ __forceinline__ void storePack(T *p, const float (&v)[V]) {
  if constexpr (V == 2 && sizeof(T) == 2)
    *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(v[0], v[1]);
  else if constexpr (V == 2)
    *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
  else if constexpr (sizeof(T) == 2)
    *p = __float2bfloat16_rn(v[0]);
  else
    *p = v[0];
}

__device__ __forceinline__ float warpSum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// cos and sin of this lane's frequencies at one position (sine negated
/// for the backward's rotation).
template <int V, int kSteps> struct LaneAngles {
  float cosine[kSteps][V], sine[kSteps][V];

  __device__ LaneAngles(const RopeInvFreqs &invFreq, int half, float position,
                        bool inverse) {
    int lane = threadIdx.x % 32;
#pragma unroll
    for (int k = 0; k < kSteps; ++k)
#pragma unroll
      for (int v = 0; v < V; ++v) {
        int j = (k * 32 + lane) * V + v;
        float angle = j < half ? position * invFreq.values[j] : 0.0f;
        cosine[k][v] = cosf(angle);
        sine[k][v] = inverse ? -sinf(angle) : sinf(angle);
      }
  }
};

/// A warp's kUnits heads starting at unit `first` of one position: lane
/// l's pairs of each, loaded together so their latencies overlap.
template <typename T, int V, int kSteps, int N> struct Heads {
  Pack<T, V> lo[N][kSteps], hi[N][kSteps];

  __device__ void load(const T *base, const HeadRows &rows, int64_t s,
                       int64_t first, int64_t units, int headDim) {
    int half = headDim / 2, lane = threadIdx.x % 32;
#pragma unroll
    for (int u = 0; u < N; ++u) {
      if (first + u >= units)
        break;
      const T *head = base + rows.at(s, static_cast<int>(first + u), headDim);
#pragma unroll
      for (int k = 0; k < kSteps; ++k) {
        int j = (k * 32 + lane) * V;
        if (j >= half)
          break;
        lo[u][k] = loadPack<T, V>(head + j);
        hi[u][k] = loadPack<T, V>(head + j + half);
      }
    }
  }
};

/// The sum of squares of head u's elements in this lane.
template <typename T, int V, int kSteps, int N>
__device__ __forceinline__ float laneSumSquares(const Heads<T, V, kSteps, N> &x,
                                                int u, int half) {
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kSteps; ++k) {
    if ((k * 32 + static_cast<int>(threadIdx.x % 32)) * V >= half)
      break;
#pragma unroll
    for (int v = 0; v < V; ++v)
      sum +=
          x.lo[u][k].v[v] * x.lo[u][k].v[v] + x.hi[u][k].v[v] * x.hi[u][k].v[v];
  }
  return sum;
}

/// y of the heads [first, first + kUnits) of one position.
template <typename T, int V, int kSteps>
__device__ __forceinline__ void
normRotate(const Heads<T, V, kSteps, kUnits> &xs, const T *w, T *yRow,
           int64_t first, int64_t units, int headDim,
           const LaneAngles<V, kSteps> &angles, float eps) {
  int half = headDim / 2, lane = threadIdx.x % 32;
#pragma unroll
  for (int u = 0; u < kUnits; ++u) {
    float meanSquare =
        warpSum(laneSumSquares(xs, u, half)) / static_cast<float>(headDim);
    if (first + u >= units)
      break;
    float rstd = 1.0f / sqrtf(meanSquare + eps);
    T *head = yRow + (first + u) * headDim;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      int j = (k * 32 + lane) * V;
      if (j >= half)
        break;
      Pack<T, V> wLo = loadPack<T, V>(w + j),
                 wHi = loadPack<T, V>(w + j + half);
      float outLo[V], outHi[V];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        float a = (xs.lo[u][k].v[v] * rstd) * wLo.v[v];
        float b = (xs.hi[u][k].v[v] * rstd) * wHi.v[v];
        float c = angles.cosine[k][v], sn = angles.sine[k][v];
        outLo[v] = a * c - b * sn;
        outHi[v] = b * c + a * sn;
      }
      storePack<T, V>(head + j, outLo);
      storePack<T, V>(head + j + half, outHi);
    }
  }
}

/// dx of the heads [first, first + kGradUnits) of one position, adding their
/// dy * xhat to the lane's dw columns.
template <typename T, int V, int kSteps>
__device__ __forceinline__ void
normRotateGrad(const Heads<T, V, kSteps, kGradUnits> &xs,
               Heads<T, V, kSteps, kGradUnits> &gs, const T *w, T *dx,
               const HeadRows &dxRows, int64_t s, int64_t first, int64_t units,
               int headDim, const LaneAngles<V, kSteps> &angles, float eps,
               float (&dwLo)[kSteps][V], float (&dwHi)[kSteps][V]) {
  int half = headDim / 2, lane = threadIdx.x % 32;
#pragma unroll
  for (int u = 0; u < kGradUnits; ++u) {
    // rope's backward first: the rotation by -angle (sine holds -sin).
    float sumGradX = 0.0f;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      int j = (k * 32 + lane) * V;
      if (j >= half)
        break;
      Pack<T, V> wLo = loadPack<T, V>(w + j),
                 wHi = loadPack<T, V>(w + j + half);
#pragma unroll
      for (int v = 0; v < V; ++v) {
        float c = angles.cosine[k][v], sn = angles.sine[k][v];
        float d0 = gs.lo[u][k].v[v], d1 = gs.hi[u][k].v[v];
        gs.lo[u][k].v[v] = d0 * c - d1 * sn;
        gs.hi[u][k].v[v] = d1 * c + d0 * sn;
        sumGradX += gs.lo[u][k].v[v] * wLo.v[v] * xs.lo[u][k].v[v] +
                    gs.hi[u][k].v[v] * wHi.v[v] * xs.hi[u][k].v[v];
      }
    }
    float meanSquare =
        warpSum(laneSumSquares(xs, u, half)) / static_cast<float>(headDim);
    float gradX = warpSum(sumGradX);
    if (first + u >= units)
      break;
    float rstd = 1.0f / sqrtf(meanSquare + eps);
    float meanGradXhat = rstd * gradX / static_cast<float>(headDim);
    T *head = dx + dxRows.at(s, static_cast<int>(first + u), headDim);
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      int j = (k * 32 + lane) * V;
      if (j >= half)
        break;
      Pack<T, V> wLo = loadPack<T, V>(w + j),
                 wHi = loadPack<T, V>(w + j + half);
      float outLo[V], outHi[V];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        float xhatLo = xs.lo[u][k].v[v] * rstd;
        float xhatHi = xs.hi[u][k].v[v] * rstd;
        dwLo[k][v] += gs.lo[u][k].v[v] * xhatLo;
        dwHi[k][v] += gs.hi[u][k].v[v] * xhatHi;
        outLo[v] = rstd * (gs.lo[u][k].v[v] * wLo.v[v] - xhatLo * meanGradXhat);
        outHi[v] = rstd * (gs.hi[u][k].v[v] * wHi.v[v] - xhatHi * meanGradXhat);
      }
      storePack<T, V>(head + j, outLo);
      storePack<T, V>(head + j + half, outHi);
    }
  }
}

template <typename T, int V, int kSteps>
__global__ void __launch_bounds__(kWarps * 32)
    rmsNormRopeKernel(const T *x, const T *w, T *y,
                      const __grid_constant__ RopeInvFreqs invFreq,
                      int64_t seqLen, int64_t unitsPerPosition, int headDim,
                      RowPositions positions, float eps, HeadRows xRows) {
  int64_t tilesPerPosition = (unitsPerPosition + kUnits - 1) / kUnits;
  int64_t tile = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (tile >= seqLen * tilesPerPosition)
    return; // the whole warp: the butterflies below take all its lanes
  int64_t s = tile / tilesPerPosition;
  int64_t first = (tile % tilesPerPosition) * kUnits;
  int64_t row = s * unitsPerPosition * headDim;
  Heads<T, V, kSteps, kUnits> heads;
  heads.load(x, xRows, s, first, unitsPerPosition, headDim);
  LaneAngles<V, kSteps> angles(invFreq, headDim / 2,
                               static_cast<float>(positions.at(s)), false);
  normRotate(heads, w, y + row, first, unitsPerPosition, headDim, angles, eps);
}

template <typename T, int V, int kSteps>
__global__ void __launch_bounds__(kWarps * 32, kBlocksPerSm)
    rmsNormRopeGradKernel(const T *x, const T *w, const T *dy, T *dx,
                          float *partials,
                          const __grid_constant__ RopeInvFreqs invFreq,
                          int64_t seqLen, int64_t unitsPerPosition, int headDim,
                          RowPositions positions, float eps, HeadRows xRows,
                          HeadRows dyRows, HeadRows dxRows) {
  __shared__ float warpRows[kWarps][2 * kRopeMaxHalf];
  int half = headDim / 2;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t tilesPerPosition = (unitsPerPosition + kGradUnits - 1) / kGradUnits;
  int64_t numTiles = seqLen * tilesPerPosition;
  int64_t end = numTiles * (blockIdx.x + 1) / gridDim.x;
  float dwLo[kSteps][V] = {}, dwHi[kSteps][V] = {};
  Heads<T, V, kSteps, kGradUnits> xs, gs, nextX, nextG;
  auto load = [&](int64_t tile, Heads<T, V, kSteps, kGradUnits> &xTile,
                  Heads<T, V, kSteps, kGradUnits> &gTile) {
    int64_t s = tile / tilesPerPosition;
    int64_t first = tile % tilesPerPosition * kGradUnits;
    xTile.load(x, xRows, s, first, unitsPerPosition, headDim);
    gTile.load(dy, dyRows, s, first, unitsPerPosition, headDim);
  };
  int64_t tile = numTiles * blockIdx.x / gridDim.x + warp;
  if (tile < end)
    load(tile, xs, gs);
  for (; tile < end; tile += kWarps) {
    if (tile + kWarps < end)
      load(tile + kWarps, nextX, nextG);
    int64_t s = tile / tilesPerPosition;
    LaneAngles<V, kSteps> angles(invFreq, half,
                                 static_cast<float>(positions.at(s)), true);
    normRotateGrad(xs, gs, w, dx, dxRows, s,
                   tile % tilesPerPosition * kGradUnits, unitsPerPosition,
                   headDim, angles, eps, dwLo, dwHi);
    xs = nextX;
    gs = nextG;
  }
  // The warps' dw rows meet in warp order: the same bits on every run.
#pragma unroll
  for (int k = 0; k < kSteps; ++k)
#pragma unroll
    for (int v = 0; v < V; ++v) {
      int j = (k * 32 + lane) * V + v;
      if (j < half) {
        warpRows[warp][j] = dwLo[k][v];
        warpRows[warp][j + half] = dwHi[k][v];
      }
    }
  __syncthreads();
  sumRowsInOrder(warpRows, headDim,
                 partials + static_cast<int64_t>(blockIdx.x) * headDim);
}

/// Everything a launch needs, or an error naming what does not fit.
/// Elements per load (pack) the head allows, or an error naming what does
/// not fit.
Result<int> packFor(const char *kernel, int64_t headDim,
                    std::initializer_list<DType> dtypes) {
  for (DType dtype : dtypes)
    if (dtype != *dtypes.begin() ||
        (dtype != DType::F32 && dtype != DType::BF16))
      return Status::invalidInput(
          std::string(kernel) +
          ": every view must be f32, or every view bf16, on the device");
  int64_t half = headDim / 2;
  int pack = half % 2 == 0 ? 2 : 1;
  if (headDim % 2 != 0 || half > int64_t{kMostSteps} * 32 * pack)
    return Status::invalidInput(
        std::string(kernel) + ": head dim " + std::to_string(headDim) +
        " must be even and at most " + std::to_string(kMostSteps * 32 * 4));
  return pack;
}

/// Whether two elements of `dtype` load as one from each pointer.
bool pairsAligned(std::initializer_list<const void *> pointers, DType dtype) {
  for (const void *pointer : pointers)
    if (reinterpret_cast<uintptr_t>(pointer) % (2 * dtypeSize(dtype)) != 0)
      return false;
  return true;
}

template <typename T> struct TypeTag {
  using type = T;
};
template <int N> using IntTag = std::integral_constant<int, N>;

/// Calls launch(TypeTag<storage>, IntTag<V>, IntTag<steps>) for the views'
/// dtype, `pack` elements per load and the fewest steps the head needs.
template <typename Launch>
void dispatch(DType dtype, int pack, int64_t headDim, Launch launch) {
  auto withSteps = [&](auto t, auto v) {
    if (headDim / 2 <= 32 * decltype(v)::value)
      launch(t, v, IntTag<1>{});
    else
      launch(t, v, IntTag<kMostSteps>{});
  };
  auto withPack = [&](auto t) {
    if (pack == 2)
      withSteps(t, IntTag<2>{});
    else
      withSteps(t, IntTag<1>{});
  };
  if (dtype == DType::BF16)
    withPack(TypeTag<__nv_bfloat16>{});
  else
    withPack(TypeTag<float>{});
}

template <typename T, int V, int kSteps>
void launchForward(const RmsNormRopeArgs &a, unsigned blocks,
                   DeviceStream stream) {
  rmsNormRopeKernel<T, V, kSteps><<<blocks, kWarps * 32, 0, stream>>>(
      static_cast<const T *>(a.x.data), static_cast<const T *>(a.w.data),
      static_cast<T *>(a.y.data), ropeInvFreqs(a.headDim, a.theta), a.seqLen,
      a.batch * a.numHeads, static_cast<int>(a.headDim), a.positions(),
      static_cast<float>(a.eps),
      headRows(a.numHeads, a.batch, a.headDim, a.xPitch));
}

template <typename T, int V, int kSteps>
void launchBackward(const RmsNormRopeGradArgs &a, unsigned blocks,
                    DeviceStream stream) {
  rmsNormRopeGradKernel<T, V, kSteps><<<blocks, kWarps * 32, 0, stream>>>(
      static_cast<const T *>(a.x.data), static_cast<const T *>(a.w.data),
      static_cast<const T *>(a.dy.data), static_cast<T *>(a.dx.data),
      static_cast<float *>(a.scratch), ropeInvFreqs(a.headDim, a.theta),
      a.seqLen, a.batch * a.numHeads, static_cast<int>(a.headDim),
      a.positions(), static_cast<float>(a.eps),
      headRows(a.numHeads, a.batch, a.headDim, a.xPitch),
      headRows(a.numHeads, a.batch, a.headDim, 0),
      headRows(a.numHeads, a.batch, a.headDim, a.dxPitch));
}

} // namespace

Status rmsNormRope(const RmsNormRopeArgs &args, DeviceStream stream) {
  auto pack = packFor("rmsNormRopeKernel", args.headDim,
                      {args.x.dtype, args.w.dtype, args.y.dtype});
  if (!pack)
    return pack.status();
  if (rmsNormRopeVec(args, stream))
    return launchStatus("rmsNormRopeVecKernel");
  int64_t units = args.batch * args.numHeads;
  int64_t tiles = args.seqLen * ceilDiv(units, kUnits);
  if (tiles <= 0)
    return Status::ok();
  auto blocks = static_cast<unsigned>(ceilDiv(tiles, kWarps));
  if (*pack == 2 &&
      (!pairsAligned({args.x.data, args.w.data, args.y.data}, args.x.dtype) ||
       args.xPitch % 2 != 0))
    *pack = 1;
  dispatch(args.x.dtype, *pack, args.headDim, [&](auto t, auto v, auto steps) {
    launchForward<typename decltype(t)::type, decltype(v)::value,
                  decltype(steps)::value>(args, blocks, stream);
  });
  return launchStatus("rmsNormRopeKernel");
}

int64_t rmsNormRopeGradScratchBytes(const RmsNormRopeGradArgs &args) {
  return rmsNormRopeGradBlocks(args.seqLen, args.batch * args.numHeads) *
         std::max<int64_t>(args.headDim, 0) *
         static_cast<int64_t>(sizeof(float));
}

Status rmsNormRopeGrad(const RmsNormRopeGradArgs &args, DeviceStream stream) {
  auto pack = packFor("rmsNormRopeGradKernel", args.headDim,
                      {args.x.dtype, args.w.dtype, args.dy.dtype, args.dx.dtype,
                       args.dw.dtype});
  if (!pack)
    return pack.status();
  auto blocks = static_cast<unsigned>(
      rmsNormRopeGradBlocks(args.seqLen, args.batch * args.numHeads));
  if (blocks > 0 && !args.scratch)
    return Status::invalidInput(
        "rmsNormRopeGradKernel: no scratch, " +
        std::to_string(rmsNormRopeGradScratchBytes(args)) + " bytes needed");
  if (blocks > 0 && rmsNormRopeGradVec(args, blocks, stream)) {
    SHARC_TRY(launchStatus("rmsNormRopeGradVecKernel"));
  } else if (blocks > 0) {
    if (*pack == 2 &&
        (!pairsAligned({args.x.data, args.w.data, args.dy.data, args.dx.data},
                       args.x.dtype) ||
         args.xPitch % 2 != 0 || args.dxPitch % 2 != 0))
      *pack = 1;
    dispatch(args.x.dtype, *pack, args.headDim,
             [&](auto t, auto v, auto steps) {
               launchBackward<typename decltype(t)::type, decltype(v)::value,
                              decltype(steps)::value>(args, blocks, stream);
             });
    SHARC_TRY(launchStatus("rmsNormRopeGradKernel"));
  }
  // With no rows dw is still written: zeros, as on the cpu.
  return sumPartialRows(static_cast<const float *>(args.scratch), blocks,
                        args.dw, args.headDim, stream);
}

} // namespace sharc::kernels::cuda
