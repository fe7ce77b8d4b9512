//===- RmsNormRope.cu - per-head RMSNorm fused with rope on the device ----===//
//
// Implements the math stated in kernels/RmsNormRope.h. A warp owns kUnits
// heads at a time (their loads in flight together); lane l holds the
// rotate-half pairs (j, j + D/2) for j = (k * 32 + l) * V + v (V = 2
// elements per load where D/2 is even, else 1), so the two halves a
// rotation mixes are in one thread and a head's sum of squares is one warp
// butterfly. A block owns whole positions: one in the forward, a fixed
// range in the backward (grid = min(seqLen, kMaxBlocks)). The block forms
// cos/sin of each frequency once per position in shared memory (a first
// version had every lane form its own, and every warp again: slower than
// rms_norm and rope apart); invFreq is built on the host by the cpu's
// expression, as Rope.cu does.
//
// The backward keeps each lane's dw columns in registers over the block's
// units, meets the warps' sums in shared memory in warp order and leaves
// one partial row per block; RmsNorm.cu's sumPartialRows adds the rows in
// a fixed order. Bound: DRAM bandwidth, x and y (forward) or x, dy and dx
// (backward) once each; against rms_norm then rope, the normalised head is
// neither stored nor read back (and in the backward the rotated gradient).
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNormRope.h"

#include "kernels/Rope.h"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/RmsNormVec.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace sharc::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxBlocks = static_cast<int>(kRmsNormGradMaxBlocks);
/// Pair groups per lane (a template argument, so registers are sized to
/// the head): one up to D/2 = 32 * V, else up to kMostSteps.
constexpr int kMostSteps = 4;
/// Heads a warp works on at once, forward and backward (the backward holds
/// x and dy of each, and of the next position's: 64 registers fit two).
constexpr int kUnits = 4;
constexpr int kGradUnits = 2;
/// Blocks resident on one SM: 4 x 132 SMs hold all kMaxBlocks in one wave
/// (at 79 registers only 3 fitted, and 512 blocks ran in 1.3 waves).
constexpr int kBlocksPerSm = 4;
constexpr int kMaxHalf = 512;

struct InvFreqTable {
  float values[kMaxHalf];
};

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

/// cos and sin of every frequency at `position` into the block's table
/// (sine negated for the backward's rotation); the caller synchronises.
/// Two tables alternate by position, so one barrier per position suffices:
/// a thread writing a table two positions later has passed the barrier
/// that every reader of its last contents reached after reading.
__device__ __forceinline__ void writeAngles(float *cosine, float *sine,
                                            const InvFreqTable &invFreq,
                                            int half, float position,
                                            bool inverse) {
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    float angle = position * invFreq.values[j];
    cosine[j] = cosf(angle);
    sine[j] = inverse ? -sinf(angle) : sinf(angle);
  }
}

/// A warp's kUnits heads starting at unit `first` of one position: lane
/// l's pairs of each, loaded together so their latencies overlap.
template <typename T, int V, int kSteps, int N> struct Heads {
  Pack<T, V> lo[N][kSteps], hi[N][kSteps];

  __device__ void load(const T *base, int64_t first, int64_t units,
                       int headDim) {
    int half = headDim / 2, lane = threadIdx.x % 32;
#pragma unroll
    for (int u = 0; u < N; ++u) {
      if (first + u >= units)
        break;
      const T *head = base + (first + u) * headDim;
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
           int64_t first, int64_t units, int headDim, const float *cosine,
           const float *sine, float eps) {
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
        float c = cosine[j + v], sn = sine[j + v];
        outLo[v] = a * c - b * sn;
        outHi[v] = b * c + a * sn;
      }
      storePack<T, V>(head + j, outLo);
      storePack<T, V>(head + j + half, outHi);
    }
  }
}

/// dx of the heads [first, first + kUnits) of one position, adding their
/// dy * xhat to the lane's dw columns.
template <typename T, int V, int kSteps>
__device__ __forceinline__ void
normRotateGrad(const Heads<T, V, kSteps, kGradUnits> &xs,
               Heads<T, V, kSteps, kGradUnits> &gs, const T *w, T *dxRow,
               int64_t first, int64_t units, int headDim, const float *cosine,
               const float *sine, float eps, float (&dwLo)[kSteps][V],
               float (&dwHi)[kSteps][V]) {
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
        float c = cosine[j + v], sn = sine[j + v];
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
    T *head = dxRow + (first + u) * headDim;
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

/// Both kernels walk the block's positions the same way: the warp's first
/// heads of the next position are loaded before this position's are
/// computed (a software pipeline: DRAM stays busy through the arithmetic,
/// the shuffles and the barrier), further heads of a position with more
/// than kWarps * kUnits are loaded as they come.
template <typename T, int V, int kSteps>
__global__ void __launch_bounds__(kWarps * 32, kBlocksPerSm)
    rmsNormRopeKernel(const T *x, const T *w, T *y,
                      const __grid_constant__ InvFreqTable invFreq,
                      int64_t seqLen, int64_t unitsPerPosition, int headDim,
                      int64_t positionOffset, float eps) {
  __shared__ float cosines[2][kMaxHalf], sines[2][kMaxHalf];
  int half = headDim / 2;
  int64_t row = unitsPerPosition * headDim;
  int64_t sBegin = seqLen * blockIdx.x / gridDim.x;
  int64_t sEnd = seqLen * (blockIdx.x + 1) / gridDim.x;
  int64_t start = (threadIdx.x / 32) * kUnits;
  Heads<T, V, kSteps, kUnits> heads, next;
  if (sBegin < sEnd)
    heads.load(x + sBegin * row, start, unitsPerPosition, headDim);
  for (int64_t s = sBegin; s < sEnd; ++s) {
    writeAngles(cosines[s % 2], sines[s % 2], invFreq, half,
                static_cast<float>(s + positionOffset), false);
    __syncthreads();
    if (s + 1 < sEnd)
      next.load(x + (s + 1) * row, start, unitsPerPosition, headDim);
    for (int64_t first = start; first < unitsPerPosition;
         first += kWarps * kUnits) {
      if (first != start)
        heads.load(x + s * row, first, unitsPerPosition, headDim);
      normRotate(heads, w, y + s * row, first, unitsPerPosition, headDim,
                 cosines[s % 2], sines[s % 2], eps);
    }
    heads = next;
  }
}

template <typename T, int V, int kSteps>
__global__ void __launch_bounds__(kWarps * 32, kBlocksPerSm)
    rmsNormRopeGradKernel(const T *x, const T *w, const T *dy, T *dx,
                          float *partials,
                          const __grid_constant__ InvFreqTable invFreq,
                          int64_t seqLen, int64_t unitsPerPosition, int headDim,
                          int64_t positionOffset, float eps) {
  __shared__ float cosines[2][kMaxHalf], sines[2][kMaxHalf];
  __shared__ float warpRows[kWarps][2 * kMaxHalf];
  int half = headDim / 2;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t row = unitsPerPosition * headDim;
  int64_t sBegin = seqLen * blockIdx.x / gridDim.x;
  int64_t sEnd = seqLen * (blockIdx.x + 1) / gridDim.x;
  int64_t start = warp * kGradUnits;
  float dwLo[kSteps][V] = {}, dwHi[kSteps][V] = {};
  Heads<T, V, kSteps, kGradUnits> xs, gs, nextX, nextG;
  if (sBegin < sEnd) {
    xs.load(x + sBegin * row, start, unitsPerPosition, headDim);
    gs.load(dy + sBegin * row, start, unitsPerPosition, headDim);
  }
  for (int64_t s = sBegin; s < sEnd; ++s) {
    writeAngles(cosines[s % 2], sines[s % 2], invFreq, half,
                static_cast<float>(s + positionOffset), true);
    __syncthreads();
    if (s + 1 < sEnd) {
      nextX.load(x + (s + 1) * row, start, unitsPerPosition, headDim);
      nextG.load(dy + (s + 1) * row, start, unitsPerPosition, headDim);
    }
    for (int64_t first = start; first < unitsPerPosition;
         first += kWarps * kGradUnits) {
      if (first != start) {
        xs.load(x + s * row, first, unitsPerPosition, headDim);
        gs.load(dy + s * row, first, unitsPerPosition, headDim);
      }
      normRotateGrad(xs, gs, w, dx + s * row, first, unitsPerPosition, headDim,
                     cosines[s % 2], sines[s % 2], eps, dwLo, dwHi);
    }
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
  float *partialRow = partials + static_cast<int64_t>(blockIdx.x) * headDim;
  for (int c = threadIdx.x; c < headDim; c += blockDim.x) {
    float sum = warpRows[0][c];
    for (int r = 1; r < kWarps; ++r)
      sum += warpRows[r][c];
    partialRow[c] = sum;
  }
}

/// Everything a launch needs, or an error naming what does not fit.
struct Shape {
  unsigned numBlocks = 0;
  int pack = 1;
};

Result<Shape> shapeFor(const char *kernel, int64_t seqLen, int64_t headDim,
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
  return Shape{static_cast<unsigned>(std::min<int64_t>(seqLen, kMaxBlocks)),
               pack};
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

InvFreqTable invFreqFor(int64_t headDim, double theta) {
  InvFreqTable table{};
  for (int64_t i = 0; i < headDim / 2; ++i)
    table.values[i] = ropeInverseFrequency<float>(i, headDim, theta);
  return table;
}

template <typename T, int V, int kSteps>
void launchForward(const RmsNormRopeArgs &a, unsigned blocks,
                   DeviceStream stream) {
  rmsNormRopeKernel<T, V, kSteps><<<blocks, kWarps * 32, 0, stream>>>(
      static_cast<const T *>(a.x.data), static_cast<const T *>(a.w.data),
      static_cast<T *>(a.y.data), invFreqFor(a.headDim, a.theta), a.seqLen,
      a.batch * a.numHeads, static_cast<int>(a.headDim), a.positionOffset,
      static_cast<float>(a.eps));
}

template <typename T, int V, int kSteps>
void launchBackward(const RmsNormRopeGradArgs &a, unsigned blocks,
                    DeviceStream stream) {
  rmsNormRopeGradKernel<T, V, kSteps><<<blocks, kWarps * 32, 0, stream>>>(
      static_cast<const T *>(a.x.data), static_cast<const T *>(a.w.data),
      static_cast<const T *>(a.dy.data), static_cast<T *>(a.dx.data),
      static_cast<float *>(a.scratch), invFreqFor(a.headDim, a.theta), a.seqLen,
      a.batch * a.numHeads, static_cast<int>(a.headDim), a.positionOffset,
      static_cast<float>(a.eps));
}

} // namespace

Status rmsNormRope(const RmsNormRopeArgs &args, DeviceStream stream) {
  auto shape = shapeFor("rmsNormRopeKernel", args.seqLen, args.headDim,
                        {args.x.dtype, args.w.dtype, args.y.dtype});
  if (!shape)
    return shape.status();
  if (shape->numBlocks == 0 || args.batch * args.numHeads == 0)
    return Status::ok();
  unsigned blocks = shape->numBlocks;
  int pack =
      shape->pack == 2 && pairsAligned({args.x.data, args.w.data, args.y.data},
                                       args.x.dtype)
          ? 2
          : 1;
  dispatch(args.x.dtype, pack, args.headDim, [&](auto t, auto v, auto steps) {
    launchForward<typename decltype(t)::type, decltype(v)::value,
                  decltype(steps)::value>(args, blocks, stream);
  });
  return launchStatus("rmsNormRopeKernel");
}

int64_t rmsNormRopeGradScratchBytes(const RmsNormRopeGradArgs &args) {
  return std::min<int64_t>(std::max<int64_t>(args.seqLen, 0), kMaxBlocks) *
         std::max<int64_t>(args.headDim, 0) *
         static_cast<int64_t>(sizeof(float));
}

Status rmsNormRopeGrad(const RmsNormRopeGradArgs &args, DeviceStream stream) {
  auto shape = shapeFor("rmsNormRopeGradKernel", args.seqLen, args.headDim,
                        {args.x.dtype, args.w.dtype, args.dy.dtype,
                         args.dx.dtype, args.dw.dtype});
  if (!shape)
    return shape.status();
  if (shape->numBlocks > 0 && !args.scratch)
    return Status::invalidInput(
        "rmsNormRopeGradKernel: no scratch, " +
        std::to_string(rmsNormRopeGradScratchBytes(args)) + " bytes needed");
  unsigned blocks = args.batch * args.numHeads == 0 ? 0 : shape->numBlocks;
  if (blocks > 0) {
    int pack = shape->pack == 2 && pairsAligned({args.x.data, args.w.data,
                                                 args.dy.data, args.dx.data},
                                                args.x.dtype)
                   ? 2
                   : 1;
    dispatch(args.x.dtype, pack, args.headDim, [&](auto t, auto v, auto steps) {
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
