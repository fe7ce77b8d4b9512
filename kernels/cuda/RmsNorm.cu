//===- RmsNorm.cu - grouped RMSNorm forward and backward on the device ----===//
//
// Implements the math stated in kernels/RmsNorm.h with cpu/RmsNorm.cpp's
// expression order. A "unit" is one group of one row (rows * cols /
// groupSize of them); a "team" is a power-of-two number of threads, 32 to
// 1024, about groupSize / 4, that owns one unit: its threads stride over the
// unit's columns and reduce through warp shuffles (and shared memory when
// the team spans warps), so every thread of a team holds the same sum.
//
// rmsNormKernel: grid ceil(units / teams per block), block max(team, 256)
// threads; one team per unit. The unit is read from DRAM once (the second
// pass hits L1). Bound: DRAM bandwidth, 2 tensors of rows * cols elements
// (x read, y written).
//
// rmsNormGrad runs two kernels and uses scratch (rmsNormGradScratchBytes):
//  - rmsNormGradKernel: grid min(kGradBlocks, ceil(units / teams per
//    block)), block max(team, kGradThreads) threads; block b owns the
//    contiguous units [b * units / grid, (b + 1) * units / grid), each team
//    one unit at a time, writes their dx and leaves its dw partial sums
//    (fp32, groupSize of them) in scratch row b. x, dy are read from DRAM
//    once (re-reads hit L1) and dx written once. Bound: DRAM bandwidth,
//    3 tensors of rows * cols elements: 8192 x 768 bf16 is 37.7 MB, about
//    9.4 us at 4 TB/s.
//  - rmsNormDwKernel: grid ceil(groupSize / 32), block 32 x 32; a column's
//    partials (one per block above) are summed in a fixed tree, so dw is
//    the same bits on every run and every GPU (the partition depends on the
//    sizes only). Reads grid * groupSize * 4 bytes from L2 (1.5 MB at
//    groupSize 768).
//
// The vector path (RmsNormVec.cu) replaces both
// where all views share one dtype, are 16-byte aligned and a group is whole
// 16-byte vectors, at most kMaxVecsPerLane per lane: a team of 1 to 256
// threads owns a unit, reads 16 bytes per load (8 bf16 or 4 f32) and
// reduces with shuffles (and, for a team of several warps, one float per
// warp through shared memory);
// the backward keeps each lane's dw columns in registers across its units
// and leaves one partial row per block for rmsNormDwKernel, as above. The
// generic path's scalar loads reached about 1 TB/s on an H200 (30 us for
// 8192 x 768 bf16).
//
// dx may alias dy (each thread reads dy[c] before it writes dx[c]); y may
// alias x since each thread reads its elements before it writes them.
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNorm.h"
#include "kernels/cuda/BlockReduce.cuh"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/RmsNormVec.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kMinBlockThreads = 256;
constexpr int kMaxTeam = 1024;
/// The backward's partition: at most kGradBlocks blocks of at least
/// kGradThreads threads, 262144 threads in all, one wave on a 132-SM H200
/// at four blocks per SM.
constexpr int kGradThreads = 512;
/// The dw sum's block: kSumCols columns, kSumRows partials at a time.
constexpr int kSumCols = 32;
constexpr int kSumRows = 32;
constexpr int kSumThreads = kSumCols * kSumRows;

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

/// One block of the backward: dx for the units [begin, end) it owns, and
/// their dw partial sums (dy * xhat per column) in partials[blockIdx.x].
/// Blocks own contiguous ranges fixed by numUnits and gridDim alone; a
/// team adds its units in increasing order into its own shared-memory row,
/// and the rows are summed in team order, so the partials are
/// deterministic. A thread reads dy[c] and r[c] before it writes dx[c] and
/// no other thread touches c, so dx may alias dy or r. r (data null for
/// none) is added to dx before its rounding.
__global__ void __launch_bounds__(kMaxTeam)
    rmsNormGradKernel(ConstTensorView x, ConstTensorView w, ConstTensorView dy,
                      ConstTensorView r, TensorView dx, float *partials,
                      int64_t numUnits, int64_t groupSize, int teamSize,
                      float eps) {
  extern __shared__ float teamSums[]; // [teams per block][groupSize]
  __shared__ float scratch[32];
  int teamsPerBlock = blockDim.x / teamSize;
  int team = threadIdx.x / teamSize;
  int lane = threadIdx.x % teamSize;
  // Column c of a team's row is only ever touched by the lane c % teamSize.
  float *mySums = teamSums + static_cast<int64_t>(team) * groupSize;
  for (int64_t c = lane; c < groupSize; c += teamSize)
    mySums[c] = 0.0f;
  int64_t begin = numUnits * blockIdx.x / gridDim.x;
  int64_t end = numUnits * (blockIdx.x + 1) / gridDim.x;
  // Every thread runs the same trip count: unitRstd and teamSum may
  // synchronise the block.
  for (int64_t first = begin; first < end; first += teamsPerBlock) {
    int64_t unit = first + team;
    bool active = unit < end;
    int64_t base = unit * groupSize;
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
      continue;
    for (int64_t c = lane; c < groupSize; c += teamSize) {
      float xhat = loadAs(x, base + c) * rstd;
      float dyValue = loadAs(dy, base + c);
      mySums[c] += dyValue * xhat;
      float grad = dyValue * loadAs(w, c);
      float out = rstd * (grad - xhat * meanGradXhat);
      if (r.data)
        out += loadAs(r, base + c);
      storeAs(dx, base + c, out);
    }
  }
  __syncthreads();
  sumRowsInOrder(teamSums, teamsPerBlock, groupSize,
                 partials + static_cast<int64_t>(blockIdx.x) * groupSize);
}

/// dw[c] = the numPartials rows of partials summed at column c: thread
/// (x, y) of a kSumCols x kSumRows block adds rows y, y + kSumRows, ... in
/// order, then the kSumRows sums are added in order.
__global__ void __launch_bounds__(kSumThreads)
    rmsNormDwKernel(const float *partials, int numPartials, TensorView dw,
                    int64_t groupSize) {
  __shared__ float rowSums[kSumRows][kSumCols + 1];
  int64_t c = static_cast<int64_t>(blockIdx.x) * kSumCols + threadIdx.x;
  float sum = 0.0f;
  if (c < groupSize)
    for (int b = threadIdx.y; b < numPartials; b += kSumRows)
      sum += partials[static_cast<int64_t>(b) * groupSize + c];
  rowSums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y != 0 || c >= groupSize)
    return;
  float total = rowSums[0][threadIdx.x];
  for (int r = 1; r < kSumRows; ++r)
    total += rowSums[r][threadIdx.x];
  storeAs(dw, c, total);
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

/// The backward's grid: depends on the sizes alone, so the partial sums,
/// and with them dw, are the same on every device.
UnitLaunch gradLaunchFor(const RmsNormGradArgs &args) {
  if (args.groupSize <= 0 || args.cols % args.groupSize != 0)
    return {0, 0, 0};
  int64_t numUnits = args.rows * (args.cols / args.groupSize);
  int teamSize = teamSizeFor(args.groupSize);
  int blockThreads = std::max(teamSize, kGradThreads);
  int64_t teamsPerBlock = blockThreads / teamSize;
  int64_t numBlocks =
      std::min<int64_t>(ceilDiv(numUnits, teamsPerBlock), kGradBlocks);
  return {static_cast<unsigned>(numBlocks), blockThreads, teamSize};
}

} // namespace

Status rmsNorm(const RmsNormArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("rmsNormKernel",
                              {args.x.dtype, args.w.dtype, args.y.dtype}));
  if (args.groupSize <= 0)
    return Status::ok();
  SHARC_TRY(checkShape("rmsNormKernel", args.cols, args.groupSize));
  int64_t numUnits = args.rows * (args.cols / args.groupSize);
  if (numUnits == 0)
    return Status::ok();
  if (rmsNormVec(args, stream))
    return launchStatus("rmsNormVecKernel");
  UnitLaunch launch = unitLaunchFor(numUnits, args.groupSize);
  rmsNormKernel<<<launch.numBlocks, launch.blockThreads, 0, stream>>>(
      args.x, args.w, args.y, numUnits, args.groupSize, launch.teamSize,
      static_cast<float>(args.eps));
  return launchStatus("rmsNormKernel");
}

Status sumPartialRows(const float *partials, int64_t numPartials, TensorView dw,
                      int64_t cols, DeviceStream stream) {
  auto sumBlocks = static_cast<unsigned>(ceilDiv(cols, kSumCols));
  rmsNormDwKernel<<<sumBlocks, dim3(kSumCols, kSumRows), 0, stream>>>(
      partials, static_cast<int>(numPartials), dw, cols);
  return launchStatus("rmsNormDwKernel");
}

int64_t rmsNormGradScratchBytes(const RmsNormGradArgs &args) {
  // Either path may run (the vector one needs aligned pointers, seen only
  // at launch): room for the larger partition.
  int64_t numBlocks = std::max<int64_t>(gradLaunchFor(args).numBlocks,
                                        rmsNormGradVecBlocks(args));
  return numBlocks * std::max<int64_t>(args.groupSize, 0) *
         static_cast<int64_t>(sizeof(float));
}

Status rmsNormGrad(const RmsNormGradArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("rmsNormGradKernel",
                              {args.x.dtype, args.w.dtype, args.dy.dtype,
                               args.dx.dtype, args.dw.dtype}));
  if (args.r.data && args.r.dtype != args.dx.dtype)
    return Status::invalidInput(
        "rmsNormGradKernel: the addend must have dx's dtype");
  if (args.groupSize <= 0)
    return Status::ok();
  SHARC_TRY(checkShape("rmsNormGradKernel", args.cols, args.groupSize));
  auto *partials = static_cast<float *>(args.scratch);
  if (int64_t vecBlocks = rmsNormGradVec(args, partials, stream)) {
    SHARC_TRY(launchStatus("rmsNormGradVecKernel"));
    return sumPartialRows(partials, vecBlocks, args.dw, args.groupSize, stream);
  }
  UnitLaunch launch = gradLaunchFor(args);
  if (launch.numBlocks > 0 && !args.scratch)
    return Status::invalidInput("rmsNormGradKernel: no scratch, " +
                                std::to_string(rmsNormGradScratchBytes(args)) +
                                " bytes needed");
  if (launch.numBlocks > 0) {
    int64_t sharedBytes =
        static_cast<int64_t>(launch.blockThreads / launch.teamSize) *
        args.groupSize * static_cast<int64_t>(sizeof(float));
    if (sharedBytes > kDefaultSharedBytes)
      SHARC_CUDA(cudaFuncSetAttribute(
          rmsNormGradKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
          static_cast<int>(sharedBytes)));
    int64_t numUnits = args.rows * (args.cols / args.groupSize);
    rmsNormGradKernel<<<launch.numBlocks, launch.blockThreads, sharedBytes,
                        stream>>>(
        args.x, args.w, args.dy, args.r, args.dx, partials, numUnits,
        args.groupSize, launch.teamSize, static_cast<float>(args.eps));
    SHARC_TRY(launchStatus("rmsNormGradKernel"));
  }
  // With no rows dw is still written: zeros, as on the cpu.
  return sumPartialRows(partials, launch.numBlocks, args.dw, args.groupSize,
                        stream);
}

} // namespace sharc::kernels::cuda
