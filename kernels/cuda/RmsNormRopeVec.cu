//===- RmsNormRopeVec.cu - norm + rope on 16-byte vectors -----------------===//
//
// RmsNormRope.cu's fast path, for heads whose halves are whole 16-byte
// vectors (head dim a multiple of 16 in bf16, of 8 in f32) and aligned
// views. A head is owned by a group of L lanes (L the power of two at or
// above the vectors of a half, at most 32): lane i of the group loads
// vector i of the low half and vector i of the high half, so the pairs a
// rotation mixes stay in one thread, and forms the E angles of its own
// frequencies once for every head of the position it works on.
//
// The work is tasks: one position and up to kUnits heads per group of each
// of the warp's 32 / L groups, loaded together so their latencies overlap.
// The generic kernels in RmsNormRope.cu spend most of their issue slots on
// what this layout does once per task instead of once per pair of heads:
// the angles, 64-bit index division and w's loads (ncu on the H200,
// MiniMind's q [2048, 4, 8 x 96] bf16: forward 24 us at 11% of DRAM
// throughput and 61% of issue slots; backward 50 us).
//
// The backward keeps the generic kernel's partition into blocks (one
// partial dw row each, the scratch rmsNormRopeGradScratchBytes sizes): block
// b takes tasks [b T / G, (b + 1) T / G) in order, each warp a contiguous
// slice of them, so a warp's tasks share positions and their angles. Each
// lane keeps its dw columns in registers; groups meet by butterfly
// shuffles and warps in shared memory in warp order, so dw is the same bits
// on every run.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/RmsNormRopeVec.h"

#include "kernels/Rope.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/RopeFreqs.h"
#include "kernels/cuda/Vec16.cuh"

#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>

namespace sharc::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = kWarpsPerBlock * 32;
/// Heads a group holds at once: the forward's loads (x) and the
/// backward's (x and dy) of a task are all in flight together. The
/// backward's blocks are its partition's (at most 384): three an SM run
/// them in one wave, which bounds its registers.
constexpr int kUnits = 4;
constexpr int kGradUnits = 2;
constexpr int kBlocksPerSm = 4, kGradBlocksPerSm = 3;

/// The lane's place: its group of L lanes and its vector in each half.
template <int L> struct LanePlace {
  int group, vec;
  __device__ LanePlace()
      : group(static_cast<int>(threadIdx.x % 32) / L),
        vec(static_cast<int>(threadIdx.x % 32) % L) {}
};

/// Sums `value` over the group's L lanes; every lane of the warp calls it.
template <int L> __device__ __forceinline__ float groupSum(float value) {
#pragma unroll
  for (int offset = L / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

/// The lane's E inverse frequencies (of pairs vec * E + e), read from the
/// block's shared copy of the table.
template <typename T> struct LaneFreqs {
  static constexpr int E = Vec<T>::kElems;
  float inv[E];
  __device__ void load(const float *shared, int vec, bool active) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      inv[e] = active ? shared[vec * E + e] : 0.0f;
  }
};

/// cos and sin of the lane's frequencies at one position.
template <typename T> struct LaneAngles {
  static constexpr int E = Vec<T>::kElems;
  float cosine[E], sine[E];
  __device__ void at(const LaneFreqs<T> &freqs, float position) {
#pragma unroll
    for (int e = 0; e < E; ++e)
      sincosf(position * freqs.inv[e], &sine[e], &cosine[e]);
  }
};

/// Copies the table into shared memory (all threads of the block call it).
__device__ __forceinline__ void shareFreqs(const RopeInvFreqs &table,
                                           float *shared, int half) {
  for (int j = threadIdx.x; j < half; j += blockDim.x)
    shared[j] = table.values[j];
  __syncthreads();
}

template <typename T, int L>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    rmsNormRopeVecKernel(const T *x, const T *w, T *y,
                         const __grid_constant__ RopeInvFreqs invFreq,
                         int64_t seqLen, int units, int half,
                         int tasksPerPosition, RowPositions positions,
                         float eps, HeadRows xRows) {
  constexpr int E = Vec<T>::kElems, kGroups = 32 / L;
  __shared__ float freqTable[kRopeMaxHalf];
  shareFreqs(invFreq, freqTable, half);
  LanePlace<L> place;
  const int numVecs = half / E, headDim = 2 * half;
  const bool lanes = place.vec < numVecs;
  int64_t task = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock +
                 static_cast<int64_t>(threadIdx.x / 32);
  if (task >= seqLen * tasksPerPosition)
    return; // the whole warp: its shuffles below take all its lanes
  int64_t s = task / tasksPerPosition;
  int firstUnit = static_cast<int>(task % tasksPerPosition) * kGroups * kUnits;
  T *yRow = y + s * units * headDim;
  uint4 lo[kUnits], hi[kUnits];
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    int unit = firstUnit + k * kGroups + place.group;
    if (lanes && unit < units) {
      const T *head = x + xRows.at(s, unit, headDim);
      lo[k] = loadRaw(head, place.vec);
      hi[k] = loadRaw(head + half, place.vec);
    }
  }
  LaneFreqs<T> freqs;
  freqs.load(freqTable, place.vec, lanes);
  LaneAngles<T> angles;
  angles.at(freqs, static_cast<float>(positions.at(s)));
  Vec<T> wLo{}, wHi{};
  if (lanes) {
    wLo = loadVec(w, place.vec);
    wHi = loadVec(w + half, place.vec);
  }
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    int unit = firstUnit + k * kGroups + place.group;
    bool active = lanes && unit < units;
    Vec<T> xLo{}, xHi{};
    if (active) {
      xLo = widen<T>(lo[k]);
      xHi = widen<T>(hi[k]);
    }
    float sum = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e)
      sum += xLo.v[e] * xLo.v[e] + xHi.v[e] * xHi.v[e];
    float meanSquare = groupSum<L>(sum) / static_cast<float>(headDim);
    if (!active)
      continue;
    float rstd = 1.0f / sqrtf(meanSquare + eps);
    float outLo[E], outHi[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      float a = (xLo.v[e] * rstd) * wLo.v[e];
      float b = (xHi.v[e] * rstd) * wHi.v[e];
      float c = angles.cosine[e], sn = angles.sine[e];
      outLo[e] = a * c - b * sn;
      outHi[e] = b * c + a * sn;
    }
    T *head = yRow + static_cast<int64_t>(unit) * headDim;
    storeVec(head, place.vec, outLo);
    storeVec(head + half, place.vec, outHi);
  }
}

template <typename T, int L>
__global__ void __launch_bounds__(kThreads, kGradBlocksPerSm)
    rmsNormRopeGradVecKernel(const T *x, const T *w, const T *dy, T *dx,
                             float *partials,
                             const __grid_constant__ RopeInvFreqs invFreq,
                             int64_t seqLen, int units, int half,
                             int tasksPerPosition, RowPositions positions,
                             float eps, HeadRows xRows, HeadRows dxRows) {
  constexpr int E = Vec<T>::kElems, kGroups = 32 / L;
  __shared__ float freqTable[kRopeMaxHalf];
  __shared__ float warpRows[kWarpsPerBlock][2 * kRopeMaxHalf];
  shareFreqs(invFreq, freqTable, half);
  LanePlace<L> place;
  const int numVecs = half / E, headDim = 2 * half;
  const bool lanes = place.vec < numVecs;
  const int warp = static_cast<int>(threadIdx.x / 32);
  LaneFreqs<T> freqs;
  freqs.load(freqTable, place.vec, lanes);
  Vec<T> wLo{}, wHi{};
  if (lanes) {
    wLo = loadVec(w, place.vec);
    wHi = loadVec(w + half, place.vec);
  }
  // The block's tasks, then the warp's contiguous slice of them.
  int64_t numTasks = seqLen * tasksPerPosition;
  int64_t blockBegin = numTasks * blockIdx.x / gridDim.x;
  int64_t blockEnd = numTasks * (blockIdx.x + 1) / gridDim.x;
  int64_t span = blockEnd - blockBegin;
  int64_t begin = blockBegin + span * warp / kWarpsPerBlock;
  int64_t end = blockBegin + span * (warp + 1) / kWarpsPerBlock;
  float dwLo[E] = {}, dwHi[E] = {};
  LaneAngles<T> angles;
  int64_t anglesAt = -1;
  for (int64_t task = begin; task < end; ++task) {
    int64_t s = task / tasksPerPosition;
    int firstUnit =
        static_cast<int>(task - s * tasksPerPosition) * kGroups * kGradUnits;
    int64_t rowOffset = s * units * headDim;
    uint4 xLoRaw[kGradUnits], xHiRaw[kGradUnits], gLoRaw[kGradUnits],
        gHiRaw[kGradUnits];
#pragma unroll
    for (int k = 0; k < kGradUnits; ++k) {
      int unit = firstUnit + k * kGroups + place.group;
      if (lanes && unit < units) {
        int64_t offset = rowOffset + static_cast<int64_t>(unit) * headDim;
        int64_t xOffset = xRows.at(s, unit, headDim);
        xLoRaw[k] = loadRaw(x + xOffset, place.vec);
        xHiRaw[k] = loadRaw(x + xOffset + half, place.vec);
        gLoRaw[k] = loadRaw(dy + offset, place.vec);
        gHiRaw[k] = loadRaw(dy + offset + half, place.vec);
      }
    }
    if (s != anglesAt) {
      // rope's backward rotates by -angle.
      angles.at(freqs, -static_cast<float>(positions.at(s)));
      anglesAt = s;
    }
#pragma unroll
    for (int k = 0; k < kGradUnits; ++k) {
      int unit = firstUnit + k * kGroups + place.group;
      bool active = lanes && unit < units;
      Vec<T> xLo{}, xHi{}, gLo{}, gHi{};
      if (active) {
        xLo = widen<T>(xLoRaw[k]);
        xHi = widen<T>(xHiRaw[k]);
        gLo = widen<T>(gLoRaw[k]);
        gHi = widen<T>(gHiRaw[k]);
      }
      float sumSquares = 0.0f, sumGradX = 0.0f;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        float c = angles.cosine[e], sn = angles.sine[e];
        float d0 = gLo.v[e], d1 = gHi.v[e];
        gLo.v[e] = d0 * c - d1 * sn;
        gHi.v[e] = d1 * c + d0 * sn;
        sumGradX +=
            gLo.v[e] * wLo.v[e] * xLo.v[e] + gHi.v[e] * wHi.v[e] * xHi.v[e];
        sumSquares += xLo.v[e] * xLo.v[e] + xHi.v[e] * xHi.v[e];
      }
      float meanSquare = groupSum<L>(sumSquares) / static_cast<float>(headDim);
      float gradX = groupSum<L>(sumGradX);
      if (!active)
        continue;
      float rstd = 1.0f / sqrtf(meanSquare + eps);
      float meanGradXhat = rstd * gradX / static_cast<float>(headDim);
      float outLo[E], outHi[E];
#pragma unroll
      for (int e = 0; e < E; ++e) {
        float xhatLo = xLo.v[e] * rstd, xhatHi = xHi.v[e] * rstd;
        dwLo[e] += gLo.v[e] * xhatLo;
        dwHi[e] += gHi.v[e] * xhatHi;
        outLo[e] = rstd * (gLo.v[e] * wLo.v[e] - xhatLo * meanGradXhat);
        outHi[e] = rstd * (gHi.v[e] * wHi.v[e] - xhatHi * meanGradXhat);
      }
      int64_t offset = dxRows.at(s, unit, headDim);
      storeVec(dx + offset, place.vec, outLo);
      storeVec(dx + offset + half, place.vec, outHi);
    }
  }
  // The groups' columns meet by butterfly, then the warps in warp order.
#pragma unroll
  for (int e = 0; e < E; ++e)
#pragma unroll
    for (int offset = L; offset < 32; offset *= 2) {
      dwLo[e] += __shfl_xor_sync(0xffffffffu, dwLo[e], offset);
      dwHi[e] += __shfl_xor_sync(0xffffffffu, dwHi[e], offset);
    }
  if (place.group == 0 && lanes)
#pragma unroll
    for (int e = 0; e < E; ++e) {
      warpRows[warp][place.vec * E + e] = dwLo[e];
      warpRows[warp][half + place.vec * E + e] = dwHi[e];
    }
  __syncthreads();
  sumRowsInOrder(warpRows, headDim,
                 partials + static_cast<int64_t>(blockIdx.x) * headDim);
}

/// Whether rows `pitch` elements apart (0: packed) keep 16-byte vectors
/// aligned.
bool pitchAligned(int64_t pitch, DType dtype) {
  return pitch * dtypeSize(dtype) % kVecBytes == 0;
}

/// Lanes per head (L) for these views, or 0 where the vector path does
/// not apply (the caller then runs the generic kernels).
int lanesFor(int64_t headDim, std::initializer_list<ConstTensorView> views) {
  DType dtype = views.begin()->dtype;
  if (dtype != DType::BF16 && dtype != DType::F32)
    return 0;
  for (const ConstTensorView &view : views)
    if (view.dtype != dtype || !vecAligned(view.data))
      return 0;
  int64_t elems = kVecBytes / dtypeSize(dtype);
  int64_t half = headDim / 2;
  if (headDim % 2 != 0 || half % elems != 0 || half > kRopeMaxHalf || half == 0)
    return 0;
  int64_t numVecs = half / elems;
  int lanes = 1;
  while (lanes < numVecs)
    lanes *= 2;
  return lanes <= 32 ? lanes : 0;
}

/// Tasks per position: each covers `perGroup` heads of every group of a
/// warp.
int tasksPerPositionFor(int64_t units, int lanes, int perGroup) {
  int64_t perTask = (32 / lanes) * perGroup;
  return static_cast<int>((units + perTask - 1) / perTask);
}

/// Calls launch(type tag, lanes tag) for the dtype and lanes.
template <typename Launch>
void dispatch(DType dtype, int lanes, Launch launch) {
  auto withLanes = [&](auto tag) {
    switch (lanes) {
    case 1:
      return launch(tag, std::integral_constant<int, 1>{});
    case 2:
      return launch(tag, std::integral_constant<int, 2>{});
    case 4:
      return launch(tag, std::integral_constant<int, 4>{});
    case 8:
      return launch(tag, std::integral_constant<int, 8>{});
    case 16:
      return launch(tag, std::integral_constant<int, 16>{});
    default:
      return launch(tag, std::integral_constant<int, 32>{});
    }
  };
  if (dtype == DType::BF16)
    withLanes(__nv_bfloat16{});
  else
    withLanes(float{});
}

} // namespace

bool rmsNormRopeVec(const RmsNormRopeArgs &a, DeviceStream stream) {
  int64_t units = a.batch * a.numHeads;
  int lanes = lanesFor(a.headDim, {a.x, a.w, ConstTensorView(a.y)});
  if (lanes == 0 || units <= 0 || units > INT32_MAX || a.seqLen <= 0 ||
      !pitchAligned(a.xPitch, a.x.dtype))
    return false;
  int tasksPerPosition = tasksPerPositionFor(units, lanes, kUnits);
  auto blocks = static_cast<unsigned>(
      ceilDiv(a.seqLen * tasksPerPosition, kWarpsPerBlock));
  dispatch(a.x.dtype, lanes, [&](auto tag, auto l) {
    using T = decltype(tag);
    rmsNormRopeVecKernel<T, decltype(l)::value>
        <<<blocks, kThreads, 0, stream>>>(
            static_cast<const T *>(a.x.data), static_cast<const T *>(a.w.data),
            static_cast<T *>(a.y.data), ropeInvFreqs(a.headDim, a.theta),
            a.seqLen, static_cast<int>(units), static_cast<int>(a.headDim / 2),
            tasksPerPosition, a.positions(), static_cast<float>(a.eps),
            headRows(a.numHeads, a.batch, a.headDim, a.xPitch));
  });
  return true;
}

bool rmsNormRopeGradVec(const RmsNormRopeGradArgs &a, int64_t blocks,
                        DeviceStream stream) {
  int64_t units = a.batch * a.numHeads;
  int lanes = lanesFor(a.headDim, {a.x, a.w, a.dy, ConstTensorView(a.dx)});
  if (lanes == 0 || units <= 0 || units > INT32_MAX || blocks <= 0 ||
      !pitchAligned(a.xPitch, a.x.dtype) ||
      !pitchAligned(a.dxPitch, a.dx.dtype))
    return false;
  int tasksPerPosition = tasksPerPositionFor(units, lanes, kGradUnits);
  dispatch(a.x.dtype, lanes, [&](auto tag, auto l) {
    using T = decltype(tag);
    rmsNormRopeGradVecKernel<T, decltype(l)::value>
        <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
            static_cast<const T *>(a.x.data), static_cast<const T *>(a.w.data),
            static_cast<const T *>(a.dy.data), static_cast<T *>(a.dx.data),
            static_cast<float *>(a.scratch), ropeInvFreqs(a.headDim, a.theta),
            a.seqLen, static_cast<int>(units), static_cast<int>(a.headDim / 2),
            tasksPerPosition, a.positions(), static_cast<float>(a.eps),
            headRows(a.numHeads, a.batch, a.headDim, a.xPitch),
            headRows(a.numHeads, a.batch, a.headDim, a.dxPitch));
  });
  return true;
}

} // namespace sharc::kernels::cuda
