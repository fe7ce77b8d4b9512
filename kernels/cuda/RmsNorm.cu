//===- RmsNorm.cu - grouped RMSNorm forward and backward on the device ----===//
//
// Implements the math stated in kernels/RmsNorm.h with cpu/RmsNorm.cpp's
// expression order. A "unit" is one group of one row (rows * cols /
// groupSize of them); a "team" is a power-of-two number of threads, 32 to
// 1024, about groupSize / 4, that owns one unit: its threads stride over the
// unit's columns and reduce through warp shuffles (and shared memory when
// the team spans warps), so every thread of a team holds the same sum.
//
// rmsNormKernel, rmsNormGradKernel: grid ceil(units / teams per block),
// block max(team, 256) threads; one team per unit. The unit is read from
// DRAM once (the second and third passes hit L1/L2). Bound: DRAM bandwidth,
// 2 (forward) or 3 (backward) tensors of rows * cols elements.
//
// rmsNormDwKernel: dw is a reduction over every unit, and RmsNormGradArgs
// has no workspace for per-block partial sums, so the reduction stays on
// chip: one thread-block cluster of kClusterBlocks 1024-thread blocks. Each
// team accumulates dy * xhat for its units into its own shared-memory row
// (rstd recomputed), the teams of a block are summed in order, and the
// blocks of the cluster in rank order through distributed shared memory.
// The order is fixed, so dw is deterministic. Bound: the bandwidth of
// kClusterBlocks SMs reading x and dy once, well under DRAM bandwidth.
// A workspace argument would allow per-block partials over the whole grid
// and a second pass.
//
// rmsNormGrad runs the dw kernel before the dx kernel, so dx may alias dy;
// y may alias x since each thread reads its elements before it writes them.
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNorm.h"
#include "kernels/cuda/Launch.h"

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <initializer_list>
#include <string>

namespace sharc::kernels::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kMinBlockThreads = 256;
constexpr int kMaxTeam = 1024;
constexpr int kClusterBlocks = 8;
constexpr int kDwThreads = 1024;
constexpr int64_t kDefaultSharedBytes = 48 * 1024;

__device__ __forceinline__ float loadAs(ConstTensorView view, int64_t i) {
  if (view.dtype == DType::BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(view.data)[i]);
  return static_cast<const float *>(view.data)[i];
}

__device__ __forceinline__ void storeAs(TensorView view, int64_t i,
                                        float value) {
  if (view.dtype == DType::BF16)
    static_cast<__nv_bfloat16 *>(view.data)[i] = __float2bfloat16_rn(value);
  else
    static_cast<float *>(view.data)[i] = value;
}

/// Sum over the calling thread's team, the same bits in each of its
/// threads. Every thread of the block must call it (it may synchronise the
/// block); `scratch` holds one float per warp.
__device__ float teamSum(float value, int teamSize, float *scratch) {
  // A butterfly: lanes i and i ^ offset add the same two values, so all
  // lanes end with the same bits.
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  if (teamSize <= 32)
    return value;
  int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0)
    scratch[warp] = value;
  __syncthreads();
  int warpsPerTeam = teamSize / 32;
  int firstWarp = warp / warpsPerTeam * warpsPerTeam;
  float total = 0.0f;
  for (int w = 0; w < warpsPerTeam; ++w)
    total += scratch[firstWarp + w];
  __syncthreads();
  return total;
}

/// rstd of the unit at `base` (any value when inactive). Every thread of
/// the block must call it.
__device__ float unitRstd(ConstTensorView x, int64_t base, bool active,
                          int64_t groupSize, int teamSize, float eps,
                          float *scratch) {
  int lane = threadIdx.x % teamSize;
  float sumSquares = 0.0f;
  if (active)
    for (int64_t c = lane; c < groupSize; c += teamSize) {
      float value = loadAs(x, base + c);
      sumSquares += value * value;
    }
  float meanSquare =
      teamSum(sumSquares, teamSize, scratch) / static_cast<float>(groupSize);
  return 1.0f / sqrtf(meanSquare + eps);
}

__global__ void rmsNormKernel(ConstTensorView x, ConstTensorView w,
                              TensorView y, int64_t numUnits, int64_t groupSize,
                              int teamSize, float eps) {
  __shared__ float scratch[32];
  int64_t unit = static_cast<int64_t>(blockIdx.x) * (blockDim.x / teamSize) +
                 threadIdx.x / teamSize;
  bool active = unit < numUnits;
  int64_t base = unit * groupSize;
  float rstd = unitRstd(x, base, active, groupSize, teamSize, eps, scratch);
  if (!active)
    return;
  for (int64_t c = threadIdx.x % teamSize; c < groupSize; c += teamSize) {
    float normalized = loadAs(x, base + c) * rstd;
    storeAs(y, base + c, normalized * loadAs(w, c));
  }
}

__global__ void rmsNormGradKernel(ConstTensorView x, ConstTensorView w,
                                  ConstTensorView dy, TensorView dx,
                                  int64_t numUnits, int64_t groupSize,
                                  int teamSize, float eps) {
  __shared__ float scratch[32];
  int64_t unit = static_cast<int64_t>(blockIdx.x) * (blockDim.x / teamSize) +
                 threadIdx.x / teamSize;
  bool active = unit < numUnits;
  int64_t base = unit * groupSize;
  int lane = threadIdx.x % teamSize;
  float rstd = unitRstd(x, base, active, groupSize, teamSize, eps, scratch);
  float sumGradXhat = 0.0f;
  if (active)
    for (int64_t c = lane; c < groupSize; c += teamSize) {
      float xhat = loadAs(x, base + c) * rstd;
      sumGradXhat += loadAs(dy, base + c) * loadAs(w, c) * xhat;
    }
  float meanGradXhat =
      teamSum(sumGradXhat, teamSize, scratch) / static_cast<float>(groupSize);
  if (!active)
    return;
  for (int64_t c = lane; c < groupSize; c += teamSize) {
    float xhat = loadAs(x, base + c) * rstd;
    float grad = loadAs(dy, base + c) * loadAs(w, c);
    storeAs(dx, base + c, rstd * (grad - xhat * meanGradXhat));
  }
}

__global__ void __cluster_dims__(kClusterBlocks, 1, 1)
    __launch_bounds__(kDwThreads)
        rmsNormDwKernel(ConstTensorView x, ConstTensorView dy, TensorView dw,
                        int64_t numUnits, int64_t groupSize, int teamSize,
                        float eps) {
  extern __shared__ float teamSums[]; // [teams per block][groupSize]
  __shared__ float scratch[32];
  cg::cluster_group cluster = cg::this_cluster();
  int rank = static_cast<int>(cluster.block_rank());
  int teamsPerBlock = blockDim.x / teamSize;
  int team = threadIdx.x / teamSize;
  int lane = threadIdx.x % teamSize;
  float *mySums = teamSums + static_cast<int64_t>(team) * groupSize;
  for (int64_t c = lane; c < groupSize; c += teamSize)
    mySums[c] = 0.0f;

  // Units go round-robin over the cluster's teams; each team adds its
  // units in increasing order.
  int64_t numTeams = static_cast<int64_t>(kClusterBlocks) * teamsPerBlock;
  int64_t myTeam = static_cast<int64_t>(rank) * teamsPerBlock + team;
  for (int64_t firstUnit = 0; firstUnit < numUnits; firstUnit += numTeams) {
    int64_t unit = firstUnit + myTeam;
    bool active = unit < numUnits;
    int64_t base = unit * groupSize;
    float rstd = unitRstd(x, base, active, groupSize, teamSize, eps, scratch);
    if (active)
      for (int64_t c = lane; c < groupSize; c += teamSize) {
        float xhat = loadAs(x, base + c) * rstd;
        mySums[c] += loadAs(dy, base + c) * xhat;
      }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < groupSize; c += blockDim.x) {
    float sum = teamSums[c];
    for (int t = 1; t < teamsPerBlock; ++t)
      sum += teamSums[t * groupSize + c];
    teamSums[c] = sum;
  }
  cluster.sync();
  // Block `rank` finishes every kClusterBlocks-th slice of blockDim columns.
  for (int64_t c = static_cast<int64_t>(rank) * blockDim.x + threadIdx.x;
       c < groupSize; c += static_cast<int64_t>(kClusterBlocks) * blockDim.x) {
    float sum = 0.0f;
    for (int b = 0; b < kClusterBlocks; ++b)
      sum += cluster.map_shared_rank(teamSums, b)[c];
    storeAs(dw, c, sum);
  }
  // Keep this block's shared memory alive until the others have read it.
  cluster.sync();
}

Status checkFloats(const char *kernel, std::initializer_list<DType> dtypes) {
  for (DType dtype : dtypes)
    if (dtype != DType::F32 && dtype != DType::BF16)
      return Status::invalidInput(std::string(kernel) + ": " +
                                  dtypeName(dtype) +
                                  " storage is not supported on the device "
                                  "(expected f32 or bf16)");
  return Status::ok();
}

Status checkShape(const char *kernel, int64_t cols, int64_t groupSize) {
  if (cols % groupSize == 0)
    return Status::ok();
  return Status::invalidInput(
      std::string(kernel) + ": cols " + std::to_string(cols) +
      " is not a multiple of the group size " + std::to_string(groupSize));
}

/// About four columns per thread, in a power of two of 32 to 1024 threads.
int teamSizeFor(int64_t groupSize) {
  int64_t wanted = ceilDiv(groupSize, 4);
  int teamSize = 32;
  while (teamSize < wanted && teamSize < kMaxTeam)
    teamSize *= 2;
  return teamSize;
}

struct UnitLaunch {
  unsigned numBlocks;
  int blockThreads, teamSize;
};

UnitLaunch unitLaunchFor(int64_t numUnits, int64_t groupSize) {
  int teamSize = teamSizeFor(groupSize);
  int blockThreads = std::max(teamSize, kMinBlockThreads);
  int64_t teamsPerBlock = blockThreads / teamSize;
  return {static_cast<unsigned>(ceilDiv(numUnits, teamsPerBlock)), blockThreads,
          teamSize};
}

Status launchDw(const RmsNormGradArgs &args, int64_t numUnits,
                DeviceStream stream) {
  int teamSize = teamSizeFor(args.groupSize);
  int64_t sharedBytes = static_cast<int64_t>(kDwThreads / teamSize) *
                        args.groupSize * static_cast<int64_t>(sizeof(float));
  if (sharedBytes > kDefaultSharedBytes)
    SHARC_CUDA(cudaFuncSetAttribute(rmsNormDwKernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(sharedBytes)));
  rmsNormDwKernel<<<kClusterBlocks, kDwThreads, sharedBytes, stream>>>(
      args.x, args.dy, args.dw, numUnits, args.groupSize, teamSize,
      static_cast<float>(args.eps));
  return launchStatus("rmsNormDwKernel");
}

} // namespace

Status rmsNorm(const RmsNormArgs &args, DeviceStream stream) {
  SHARC_TRY(
      checkFloats("rmsNormKernel", {args.x.dtype, args.w.dtype, args.y.dtype}));
  if (args.groupSize <= 0)
    return Status::ok();
  SHARC_TRY(checkShape("rmsNormKernel", args.cols, args.groupSize));
  int64_t numUnits = args.rows * (args.cols / args.groupSize);
  if (numUnits == 0)
    return Status::ok();
  UnitLaunch launch = unitLaunchFor(numUnits, args.groupSize);
  rmsNormKernel<<<launch.numBlocks, launch.blockThreads, 0, stream>>>(
      args.x, args.w, args.y, numUnits, args.groupSize, launch.teamSize,
      static_cast<float>(args.eps));
  return launchStatus("rmsNormKernel");
}

Status rmsNormGrad(const RmsNormGradArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloats("rmsNormGradKernel",
                        {args.x.dtype, args.w.dtype, args.dy.dtype,
                         args.dx.dtype, args.dw.dtype}));
  if (args.groupSize <= 0)
    return Status::ok();
  SHARC_TRY(checkShape("rmsNormGradKernel", args.cols, args.groupSize));
  int64_t numUnits = args.rows * (args.cols / args.groupSize);
  // dw first: it reads dy, which dx may overwrite.
  SHARC_TRY(launchDw(args, numUnits, stream));
  if (numUnits == 0)
    return Status::ok();
  UnitLaunch launch = unitLaunchFor(numUnits, args.groupSize);
  rmsNormGradKernel<<<launch.numBlocks, launch.blockThreads, 0, stream>>>(
      args.x, args.w, args.dy, args.dx, numUnits, args.groupSize,
      launch.teamSize, static_cast<float>(args.eps));
  return launchStatus("rmsNormGradKernel");
}

} // namespace sharc::kernels::cuda
