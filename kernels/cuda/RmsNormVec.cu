//===- RmsNormVec.cu - RMSNorm on 16-byte vectors -------------------------===//
//
// The fast path of kernels/cuda/RmsNorm.cu, for views of one dtype, 16-byte
// aligned, whose groups are whole 16-byte vectors, at most kMaxVecsPerLane
// per thread: a team of 1 to 256 threads owns a unit (one group of one
// row), reads 16 bytes per load (8 bf16 or 4 f32), holds them in registers
// between the sums and the stores (a kernel instance per vectors a lane,
// 1, 2, 4 or 8), and reduces with shuffles (and, for a team of several
// warps, one float per warp through shared memory). Teams are a warp or
// less where the lanes can hold the group, since wider teams meet behind
// barriers on every unit. The backward keeps each thread's dw columns in
// registers across the units of its block's fixed range and leaves one
// partial row per block, summed by RmsNorm.cu's rmsNormDwKernel; dw is
// therefore the same bits on every run.
//
// Measured on an H200 (bf16, CUDA events over 50 calls): 8192 x 768,
// forward 12.2 -> 7.2 us and backward 38.3 -> 19.0 us against teams of 128
// lanes (DRAM time 6.3 and 9.4); 16384 x 4096, 78.3 -> 75.3 and 215.7 ->
// 170.3 us. The generic path's scalar loads reached about 1 TB/s.
//
//===----------------------------------------------------------------------===//

#include "kernels/cuda/RmsNormVec.h"

#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/Vec16.cuh"

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace sharc::kernels::cuda {
namespace {

constexpr int kMaxVecsPerLane = 8;
constexpr int kVecBlockThreads = 256;

/// y for one unit per team; lane l of a team handles vectors l,
/// l + teamLanes, ... (at most kLaneVecs of them), kept in registers
/// between the sum of squares and the store, so x is read once.
template <typename T, int kLaneVecs>
__global__ void __launch_bounds__(kVecBlockThreads)
    rmsNormVecKernel(const T *x, const T *w, T *y, int64_t numUnits,
                     int numVecs, int teamLanes, float eps) {
  constexpr int E = Vec<T>::kElems;
  __shared__ float scratch[kVecBlockThreads / 32];
  int64_t unit =
      (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / teamLanes;
  int lane = threadIdx.x % teamLanes;
  bool active = unit < numUnits;
  const T *xUnit = x + unit * numVecs * E;
  uint4 xRaw[kLaneVecs];
  float sumSquares = 0.0f;
#pragma unroll
  for (int k = 0; k < kLaneVecs; ++k) {
    int vec = lane + k * teamLanes;
    if (!active || vec >= numVecs)
      break;
    xRaw[k] = loadRaw(xUnit, vec);
    Vec<T> xv = widen<T>(xRaw[k]);
#pragma unroll
    for (int i = 0; i < E; ++i)
      sumSquares += xv.v[i] * xv.v[i];
  }
  float meanSquare =
      teamSum(sumSquares, teamLanes, scratch) / static_cast<float>(numVecs * E);
  if (!active)
    return;
  float rstd = 1.0f / sqrtf(meanSquare + eps);
  T *yUnit = y + unit * numVecs * E;
#pragma unroll
  for (int k = 0; k < kLaneVecs; ++k) {
    int vec = lane + k * teamLanes;
    if (vec >= numVecs)
      break;
    Vec<T> xv = widen<T>(xRaw[k]), wv = loadVec(w, vec);
    float out[E];
#pragma unroll
    for (int i = 0; i < E; ++i)
      out[i] = (xv.v[i] * rstd) * wv.v[i];
    storeVec(yUnit, vec, out);
  }
}

/// The backward for the units [begin, end) of block b (a partition fixed by
/// the sizes), teams taking every teamsPerBlock-th unit in order; each lane
/// keeps its x and dy vectors (at most kLaneVecs) in registers between the
/// two sums and dx, adds dy * xhat of its columns in registers, the teams'
/// sums meet in shared memory in team order, and the block's row goes to
/// partials[b].
template <typename T, int kLaneVecs>
__global__ void __launch_bounds__(kVecBlockThreads)
    rmsNormGradVecKernel(const T *x, const T *w, const T *dy, const T *r, T *dx,
                         float *partials, int64_t numUnits, int numVecs,
                         int teamLanes, float eps) {
  constexpr int E = Vec<T>::kElems;
  extern __shared__ float teamSums[]; // [teams per block][numVecs * E]
  __shared__ float scratch[kVecBlockThreads / 32];
  int teamsPerBlock = blockDim.x / teamLanes;
  int team = threadIdx.x / teamLanes;
  int lane = threadIdx.x % teamLanes;
  int64_t groupSize = static_cast<int64_t>(numVecs) * E;
  float dwSums[kLaneVecs][E] = {};
  int64_t begin = numUnits * blockIdx.x / gridDim.x;
  int64_t end = numUnits * (blockIdx.x + 1) / gridDim.x;
  // Every lane runs the same trip count, since a warp may hold several
  // teams and the shuffles take all its lanes.
  for (int64_t first = begin; first < end; first += teamsPerBlock) {
    int64_t unit = first + team;
    bool active = unit < end;
    const T *xUnit = x + unit * groupSize;
    const T *dyUnit = dy + unit * groupSize;
    uint4 xRaw[kLaneVecs], dyRaw[kLaneVecs];
    float sumSquares = 0.0f, sumGradX = 0.0f;
#pragma unroll
    for (int k = 0; k < kLaneVecs; ++k) {
      int vec = lane + k * teamLanes;
      if (!active || vec >= numVecs)
        break;
      xRaw[k] = loadRaw(xUnit, vec);
      dyRaw[k] = loadRaw(dyUnit, vec);
      Vec<T> xv = widen<T>(xRaw[k]), dyv = widen<T>(dyRaw[k]),
             wv = loadVec(w, vec);
#pragma unroll
      for (int i = 0; i < E; ++i) {
        sumSquares += xv.v[i] * xv.v[i];
        sumGradX += dyv.v[i] * wv.v[i] * xv.v[i];
      }
    }
    // A team within a warp reduces both sums in one chain of shuffles.
    if (teamLanes <= 32) {
      for (int offset = teamLanes / 2; offset > 0; offset /= 2) {
        sumSquares += __shfl_xor_sync(0xffffffffu, sumSquares, offset);
        sumGradX += __shfl_xor_sync(0xffffffffu, sumGradX, offset);
      }
    } else {
      sumSquares = teamSum(sumSquares, teamLanes, scratch);
      sumGradX = teamSum(sumGradX, teamLanes, scratch);
    }
    float rstd = 1.0f / sqrtf(sumSquares / static_cast<float>(groupSize) + eps);
    // mean of g * xhat = rstd * mean of dy * w * x
    float meanGradXhat = rstd * sumGradX / static_cast<float>(groupSize);
    if (!active)
      continue;
    T *dxUnit = dx + unit * groupSize;
#pragma unroll
    for (int k = 0; k < kLaneVecs; ++k) {
      int vec = lane + k * teamLanes;
      if (vec >= numVecs)
        break;
      Vec<T> xv = widen<T>(xRaw[k]), dyv = widen<T>(dyRaw[k]),
             wv = loadVec(w, vec);
      float out[E];
#pragma unroll
      for (int i = 0; i < E; ++i) {
        float xhat = xv.v[i] * rstd;
        dwSums[k][i] += dyv.v[i] * xhat;
        out[i] = rstd * (dyv.v[i] * wv.v[i] - xhat * meanGradXhat);
      }
      // The addend (may be dx itself: this lane reads its vector first).
      if (r) {
        Vec<T> rv = loadVec(r + unit * groupSize, vec);
#pragma unroll
        for (int i = 0; i < E; ++i)
          out[i] += rv.v[i];
      }
      storeVec(dxUnit, vec, out);
    }
  }
  float *mySums = teamSums + static_cast<int64_t>(team) * groupSize;
#pragma unroll
  for (int k = 0; k < kLaneVecs; ++k) {
    int vec = lane + k * teamLanes;
    if (vec >= numVecs)
      break;
#pragma unroll
    for (int i = 0; i < E; ++i)
      mySums[static_cast<int64_t>(vec) * E + i] = dwSums[k][i];
  }
  __syncthreads();
  sumRowsInOrder(teamSums, teamsPerBlock, groupSize,
                 partials + static_cast<int64_t>(blockIdx.x) * groupSize);
}

/// The vector path's shape: lanes per team and blocks, or none (numBlocks
/// 0) where the sizes or dtypes do not fit it.
struct VecLaunch {
  unsigned numBlocks = 0;
  int teamLanes = 0, numVecs = 0;
};

/// Pointers are checked at launch; the shape alone (what scratch sizing
/// sees) decides the rest.
VecLaunch vecShapeFor(DType dtype, int64_t rows, int64_t cols,
                      int64_t groupSize, bool backward) {
  if (groupSize <= 0 || cols % groupSize != 0 ||
      (dtype != DType::BF16 && dtype != DType::F32))
    return {};
  int64_t elems = kVecBytes / dtypeSize(dtype);
  if (groupSize % elems != 0)
    return {};
  int64_t numVecs = groupSize / elems;
  // A team of at most a warp where its lanes can hold the group (up to
  // kMaxVecsPerLane vectors each), since a team of several warps meets in
  // shared memory behind barriers on every unit (see the header).
  int teamLanes = 1;
  while (teamLanes < numVecs && teamLanes < 32)
    teamLanes *= 2;
  // The forward holds at most 4 vectors a lane (75 us against 84 with 8
  // for 16384 x 4096 bf16); the backward up to 8, so its teams stay narrow.
  while (ceilDiv(numVecs, teamLanes) > (backward ? kMaxVecsPerLane : 4) &&
         teamLanes < kVecBlockThreads)
    teamLanes *= 2;
  // The backward's teams keep their dw rows in shared memory: fewer, wider
  // teams where a row per warp would not fit.
  while (backward && teamLanes < kVecBlockThreads &&
         (kVecBlockThreads / teamLanes) * groupSize * 4 > kDefaultSharedBytes)
    teamLanes *= 2;
  if (ceilDiv(numVecs, teamLanes) > kMaxVecsPerLane)
    return {};
  int64_t numUnits = rows * (cols / groupSize);
  int64_t teamsPerBlock = kVecBlockThreads / teamLanes;
  int64_t numBlocks = ceilDiv(numUnits, teamsPerBlock);
  if (backward) {
    numBlocks = std::min<int64_t>(numBlocks, kGradBlocks);
    // The block's dw rows in shared memory.
    if (teamsPerBlock * groupSize * 4 > kDefaultSharedBytes)
      return {};
  }
  return {static_cast<unsigned>(numBlocks), teamLanes,
          static_cast<int>(numVecs)};
}

bool sameDtype(std::initializer_list<DType> dtypes) {
  for (DType dtype : dtypes)
    if (dtype != *dtypes.begin())
      return false;
  return true;
}

VecLaunch vecLaunchFor(const RmsNormArgs &a) {
  if (!sameDtype({a.x.dtype, a.w.dtype, a.y.dtype}) || !vecAligned(a.x.data) ||
      !vecAligned(a.w.data) || !vecAligned(a.y.data))
    return {};
  return vecShapeFor(a.x.dtype, a.rows, a.cols, a.groupSize, false);
}

VecLaunch vecGradShapeFor(const RmsNormGradArgs &a) {
  if (!sameDtype({a.x.dtype, a.w.dtype, a.dy.dtype, a.dx.dtype}) ||
      (a.r.data && a.r.dtype != a.dx.dtype))
    return {};
  return vecShapeFor(a.x.dtype, a.rows, a.cols, a.groupSize, true);
}

bool vecGradAligned(const RmsNormGradArgs &a) {
  return vecAligned(a.x.data) && vecAligned(a.w.data) &&
         vecAligned(a.dy.data) && vecAligned(a.dx.data) &&
         (!a.r.data || vecAligned(a.r.data));
}

/// Calls `launch` with the kernel instance for `l`: vectors per lane
/// rounded up to 1, 2, 4 or 8, so registers hold no more than a lane uses.
template <typename T, template <typename, int> class Kernel, typename Launch>
void withLaneVecs(const VecLaunch &l, Launch &&launch) {
  int laneVecs = static_cast<int>(ceilDiv(l.numVecs, l.teamLanes));
  if (laneVecs <= 1)
    launch(Kernel<T, 1>::fn);
  else if (laneVecs <= 2)
    launch(Kernel<T, 2>::fn);
  else if (laneVecs <= 4)
    launch(Kernel<T, 4>::fn);
  else
    launch(Kernel<T, 8>::fn);
}

template <typename T, int N> struct Forward {
  static constexpr auto fn = rmsNormVecKernel<T, N>;
};
template <typename T, int N> struct Backward {
  static constexpr auto fn = rmsNormGradVecKernel<T, N>;
};

template <typename T>
void launchVec(const RmsNormArgs &a, const VecLaunch &l, DeviceStream stream) {
  withLaneVecs<T, Forward>(l, [&](auto kernel) {
    kernel<<<l.numBlocks, kVecBlockThreads, 0, stream>>>(
        static_cast<const T *>(a.x.data), static_cast<const T *>(a.w.data),
        static_cast<T *>(a.y.data), a.rows * (a.cols / a.groupSize), l.numVecs,
        l.teamLanes, static_cast<float>(a.eps));
  });
}

template <typename T>
void launchGradVec(const RmsNormGradArgs &a, const VecLaunch &l,
                   float *partials, DeviceStream stream) {
  int64_t sharedBytes =
      (kVecBlockThreads / l.teamLanes) * a.groupSize * int64_t(sizeof(float));
  withLaneVecs<T, Backward>(l, [&](auto kernel) {
    kernel<<<l.numBlocks, kVecBlockThreads, sharedBytes, stream>>>(
        static_cast<const T *>(a.x.data), static_cast<const T *>(a.w.data),
        static_cast<const T *>(a.dy.data), static_cast<const T *>(a.r.data),
        static_cast<T *>(a.dx.data), partials, a.rows * (a.cols / a.groupSize),
        l.numVecs, l.teamLanes, static_cast<float>(a.eps));
  });
}
} // namespace

bool rmsNormVec(const RmsNormArgs &args, DeviceStream stream) {
  VecLaunch vec = vecLaunchFor(args);
  if (vec.numBlocks == 0)
    return false;
  if (args.x.dtype == DType::BF16)
    launchVec<__nv_bfloat16>(args, vec, stream);
  else
    launchVec<float>(args, vec, stream);
  return true;
}

int64_t rmsNormGradVecBlocks(const RmsNormGradArgs &args) {
  return vecGradShapeFor(args).numBlocks;
}

int64_t rmsNormGradVec(const RmsNormGradArgs &args, float *partials,
                       DeviceStream stream) {
  VecLaunch vec = vecGradShapeFor(args);
  if (vec.numBlocks == 0 || !vecGradAligned(args) || !partials)
    return 0;
  if (args.x.dtype == DType::BF16)
    launchGradVec<__nv_bfloat16>(args, vec, partials, stream);
  else
    launchGradVec<float>(args, vec, partials, stream);
  return vec.numBlocks;
}

} // namespace sharc::kernels::cuda
