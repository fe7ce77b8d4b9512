//===- Rope.cu - rotary position embedding on the device ------------------===//
//
// Implements the math stated in kernels/Rope.h. invFreq is built on the
// host by the cpu's own fp32 expression (std::pow on floats) and passed as
// a __grid_constant__ table, so both sides rotate by bit-identical angles;
// only cos/sin of the angle may differ by an ulp or two.
//
// Launch shape: grid (seqLen, ceil(headDim/2 / 32)), block (32, 8). Thread
// (x, y) owns frequency i = blockIdx.y * 32 + x at position blockIdx.x: it
// forms cos/sin once and rotates the (i, i + D/2) pair of rows y, y + 8, ...
// of the batch * numHeads rows at that position. Bound: DRAM bandwidth,
// 2 * numel * element size (the sin/cos work is shared by all the rows).
//
// Each pair is loaded before either half is stored, so y may alias x.
//
//===----------------------------------------------------------------------===//

#include "kernels/Rope.h"
#include "kernels/cuda/ElementAccess.cuh"
#include "kernels/cuda/Launch.h"
#include "kernels/cuda/RopeFreqs.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace sharc::kernels::cuda {
namespace {

constexpr int kPairsPerBlock = 32;
constexpr int kRowLanes = 8;

__global__ void ropeKernel(ConstTensorView x, TensorView y,
                           const __grid_constant__ RopeInvFreqs invFreq,
                           int64_t rowsPerPosition, int64_t headDim,
                           RowPositions positions, bool inverse) {
  int64_t s = blockIdx.x;
  int64_t half = headDim / 2;
  int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  int64_t firstRow = s * rowsPerPosition;
  if (i < half) {
    float position = static_cast<float>(positions.at(s));
    float angle = position * invFreq.values[i];
    float cosine = cosf(angle);
    float sine = inverse ? -sinf(angle) : sinf(angle);
    for (int64_t row = threadIdx.y; row < rowsPerPosition; row += blockDim.y) {
      int64_t base = (firstRow + row) * headDim;
      float first = loadAs(x, base + i);
      float second = loadAs(x, base + i + half);
      storeAs(y, base + i, first * cosine - second * sine);
      storeAs(y, base + i + half, second * cosine + first * sine);
    }
  }
  // An odd head dim leaves its last element unrotated, as the cpu does.
  if (headDim % 2 != 0 && blockIdx.y == 0 && threadIdx.x == 0)
    for (int64_t row = threadIdx.y; row < rowsPerPosition; row += blockDim.y) {
      int64_t last = (firstRow + row) * headDim + headDim - 1;
      storeAs(y, last, loadAs(x, last));
    }
}

} // namespace

Status rope(const RopeArgs &args, DeviceStream stream) {
  SHARC_TRY(checkFloatStorage("ropeKernel", {args.x.dtype, args.y.dtype}));
  int64_t half = args.headDim / 2;
  if (half > kRopeMaxHalf)
    return Status::invalidInput(
        "ropeKernel: head dim " + std::to_string(args.headDim) +
        " exceeds the device maximum " + std::to_string(2 * kRopeMaxHalf));
  int64_t rowsPerPosition = args.batch * args.numHeads;
  if (args.seqLen <= 0 || rowsPerPosition <= 0 || args.headDim <= 0)
    return Status::ok();
  // cpu/Rope.cpp's expression, evaluated by the same host libm.
  RopeInvFreqs invFreq = ropeInvFreqs(args.headDim, args.theta);
  dim3 grid(static_cast<unsigned>(args.seqLen),
            static_cast<unsigned>(
                std::max<int64_t>(1, ceilDiv(half, kPairsPerBlock))));
  dim3 block(kPairsPerBlock, kRowLanes);
  ropeKernel<<<grid, block, 0, stream>>>(args.x, args.y, invFreq,
                                         rowsPerPosition, args.headDim,
                                         args.positions(), args.inverse);
  return launchStatus("ropeKernel");
}

} // namespace sharc::kernels::cuda
