//===- LseMerge.cu - attention partials merged by log-sum-exp -------------===//
//
// Implements the math stated in kernels/LseMerge.h.
//
// lseMergeKernel      1-D grid-stride grid of 256-thread blocks over the
//   output's elements; a thread owns one element and recomputes its row's
//   weights from the two lse values (two cached f32 loads per element).
// lseMergeGradKernel  a warp per row (s, b, h), 8 warps a block: lanes stride
//   over headDim, the row's dot product is a fixed-order shuffle sum, lane 0
//   writes dlse_x.
// Bound: DRAM bandwidth (3 and 4 row-sized streams respectively).
//
//===----------------------------------------------------------------------===//

#include "kernels/LseMerge.h"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"

#include <algorithm>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;

struct Rows {
  int64_t seqLen, batch, numHeads, headDim;
  /// lse's index of output row `row` = (s * batch + b) * numHeads + h.
  __device__ int64_t lseIndex(int64_t row) const {
    const int64_t h = row % numHeads, sb = row / numHeads;
    const int64_t b = sb % batch, s = sb / batch;
    return (b * numHeads + h) * seqLen + s;
  }
};

__global__ void lseMergeKernel(LseMergeArgs args, Rows rows, int64_t numel) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / rows.headDim, at = rows.lseIndex(row);
    const float lseA = args.lseA[at], lseB = args.lseB[at];
    const float shift = fmaxf(lseA, lseB);
    const float lse = shift + logf(expf(lseA - shift) + expf(lseB - shift));
    const float value = expf(lseA - lse) * loadAs(args.outA, i) +
                        expf(lseB - lse) * loadAs(args.outB, i);
    storeAs(args.out, i, value);
    if (i % rows.headDim == 0)
      args.lse[at] = lse;
  }
}

__global__ void lseMergeGradKernel(LseMergeGradArgs args, Rows rows,
                                   int64_t numRows) {
  const int lane = threadIdx.x % 32;
  const int64_t row = blockIdx.x * int64_t(kThreads / 32) + threadIdx.x / 32;
  if (row >= numRows)
    return;
  const int64_t at = rows.lseIndex(row), first = row * rows.headDim;
  const float weight = expf(args.lsePart[at] - args.lse[at]);
  float dot = 0.f;
  for (int64_t d = lane; d < rows.headDim; d += 32) {
    const float dout = loadAs(args.dout, first + d);
    dot = fmaf(dout, loadAs(args.part, first + d) - loadAs(args.out, first + d),
               dot);
    storeAs(args.dpart, first + d, weight * dout);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    dot += __shfl_xor_sync(0xffffffffu, dot, offset);
  if (lane == 0)
    args.dlsePart[at] = weight * ((args.dlse ? args.dlse[at] : 0.f) + dot);
}

Status checkRows(int64_t seqLen, int64_t batch, int64_t numHeads,
                 int64_t headDim) {
  if (seqLen < 0 || batch < 0 || numHeads < 0 || headDim <= 0)
    return Status::invalidInput(
        "lse_merge: sizes must be non-negative and headDim positive, got "
        "seqLen " +
        std::to_string(seqLen) + ", batch " + std::to_string(batch) +
        ", heads " + std::to_string(numHeads) + ", headDim " +
        std::to_string(headDim));
  return Status::ok();
}

} // namespace

Status lseMerge(const LseMergeArgs &args, DeviceStream stream) {
  SHARC_TRY(checkRows(args.seqLen, args.batch, args.numHeads, args.headDim));
  const int64_t numel = args.seqLen * args.batch * args.numHeads * args.headDim;
  if (numel == 0)
    return Status::ok();
  const Rows rows{args.seqLen, args.batch, args.numHeads, args.headDim};
  const int64_t blocks = std::min(ceilDiv(numel, kThreads), kMaxBlocks);
  lseMergeKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      args, rows, numel);
  return launchStatus("lseMergeKernel");
}

Status lseMergeGrad(const LseMergeGradArgs &args, DeviceStream stream) {
  SHARC_TRY(checkRows(args.seqLen, args.batch, args.numHeads, args.headDim));
  const int64_t numRows = args.seqLen * args.batch * args.numHeads;
  if (numRows == 0)
    return Status::ok();
  const Rows rows{args.seqLen, args.batch, args.numHeads, args.headDim};
  const int64_t blocks = ceilDiv(numRows, kThreads / 32);
  if (blocks > INT32_MAX)
    return Status::invalidInput("lse_merge_grad: " + std::to_string(numRows) +
                                " rows exceed the launch grid");
  lseMergeGradKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      args, rows, numRows);
  return launchStatus("lseMergeGradKernel");
}

} // namespace sharc::kernels::cuda
