//===- KernelsCudaNormRopeTest.cpp - fused norm + rope against the cpu ----===//
//
// cuda::rmsNormRope and rmsNormRopeGrad on random non-zero inputs, outputs
// poisoned first, against the cpu twin on the same stored inputs: f32
// within 1e-5 (dw, a sum over every row in another order, 1e-4), bf16
// within 1e-2. Head dims with an even (pairs loaded two at a time) and an
// odd number of pairs, MiniMind's 96 and the 128 of the compute-bound
// point, positions past 4096; dw repeats its bits on a second launch. x
// and dx also as columns of wider rows (the fused q/k/v projection's q and
// k), on the vector path and off it.
// Exits 77 (ctest's skip code) without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNormRope.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaPairs.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

TEST_CASE("cuda rms_norm_rope and its gradient match the cpu", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Shape {
    int64_t seqLen, batch, numHeads, headDim, positionOffset;
    double theta;
    int64_t secondRow = 0, secondStart = 0; ///< the balanced split's rows
  };
  const Shape shapes[] = {{37, 3, 5, 34, 0, 1e6},
                          {600, 2, 8, 96, 0, 1e6},
                          {9, 4, 4, 128, 5000, 1e6},
                          {13, 1, 3, 256, 17, 1e4},
                          {24, 2, 4, 64, 16, 1e6, 12, 72}};
  std::mt19937 rng(91);
  for (const Shape &s : shapes)
    for (DType dtype : kFloatTypes) {
      INFO("seq " << s.seqLen << ", head dim " << s.headDim << ", dtype "
                  << dtypeName(dtype));
      const int64_t numel = s.seqLen * s.batch * s.numHeads * s.headDim;
      Pair x(dtype, randomValues(numel, rng, 3.0));
      Pair w(dtype, randomValues(s.headDim, rng));
      Pair dy(dtype, randomValues(numel, rng));
      Pair y(dtype, numel), dx(dtype, numel), dw(dtype, s.headDim);
      auto forward = [&](bool onDevice) {
        return RmsNormRopeArgs{.x = x.in(onDevice),
                               .w = w.in(onDevice),
                               .y = y.out(onDevice),
                               .seqLen = s.seqLen,
                               .batch = s.batch,
                               .numHeads = s.numHeads,
                               .headDim = s.headDim,
                               .positionOffset = s.positionOffset,
                               .secondRow = s.secondRow,
                               .secondStart = s.secondStart,
                               .eps = 1e-6,
                               .theta = s.theta};
      };
      cpu::rmsNormRope(forward(false));
      requireRan(cuda::rmsNormRope(forward(true), nullptr));
      y.requireMatch(tolerance(dtype, 1e-5));

      auto backward = [&](bool onDevice) {
        return RmsNormRopeGradArgs{.x = x.in(onDevice),
                                   .w = w.in(onDevice),
                                   .dy = dy.in(onDevice),
                                   .dx = dx.out(onDevice),
                                   .dw = dw.out(onDevice),
                                   .seqLen = s.seqLen,
                                   .batch = s.batch,
                                   .numHeads = s.numHeads,
                                   .headDim = s.headDim,
                                   .positionOffset = s.positionOffset,
                                   .secondRow = s.secondRow,
                                   .secondStart = s.secondStart,
                                   .eps = 1e-6,
                                   .theta = s.theta};
      };
      RmsNormRopeGradArgs deviceArgs = backward(true);
      DeviceBuffer scratch(cuda::rmsNormRopeGradScratchBytes(deviceArgs));
      scratch.poison();
      deviceArgs.scratch = scratch.data();
      cpu::rmsNormRopeGrad(backward(false));
      requireRan(cuda::rmsNormRopeGrad(deviceArgs, nullptr));
      dx.requireMatch(tolerance(dtype, 1e-5));
      dw.requireMatch(tolerance(dtype, 1e-4));
      Tensor firstDx = dx.deviceCopy(), firstDw = dw.deviceCopy();
      dx.poison();
      dw.poison();
      scratch.poison();
      requireRan(cuda::rmsNormRopeGrad(deviceArgs, nullptr));
      requireSameBits(dw.deviceCopy(), firstDw, dtype);
      requireSameBits(dx.deviceCopy(), firstDx, dtype);
    }
}

TEST_CASE("cuda rms_norm_rope reads x and writes dx as columns of wider rows",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  // MiniMind's fused q/k/v rows (8 query and 4 KV heads of 96): q at
  // column 0 and k at 768 of 1536, both on the vector path; then rows and
  // columns that leave it (an odd pitch, head dim 34).
  struct Case {
    int64_t seqLen, batch, numHeads, headDim, offset, pitch;
  };
  const Case cases[] = {{300, 2, 8, 96, 0, 1536},
                        {300, 2, 4, 96, 768, 1536},
                        {21, 3, 3, 34, 34, 5 * 34 + 1}};
  std::mt19937 rng(92);
  for (const Case &c : cases)
    for (DType dtype : kFloatTypes) {
      INFO("heads " << c.numHeads << " x " << c.headDim << " at column "
                    << c.offset << " of " << c.pitch << ", dtype "
                    << dtypeName(dtype));
      const int64_t rows = c.seqLen * c.batch, width = c.numHeads * c.headDim;
      ColumnWindow window{rows, width, c.pitch, c.offset};
      const double fill = 5.0;
      Pair x(dtype, window.embed(randomValues(rows * width, rng, 3.0), fill));
      Pair w(dtype, randomValues(c.headDim, rng));
      Pair dy(dtype, randomValues(rows * width, rng));
      Pair y(dtype, rows * width), dw(dtype, c.headDim);
      Pair dx(dtype, std::vector<double>(rows * c.pitch, fill));
      auto columns = [&](auto view) {
        using Pointer = decltype(view.data);
        view.data = static_cast<Pointer>(
            const_cast<char *>(static_cast<const char *>(view.data)) +
            c.offset * dtypeSize(dtype));
        return view;
      };
      auto forward = [&](bool onDevice) {
        return RmsNormRopeArgs{.x = columns(x.in(onDevice)),
                               .w = w.in(onDevice),
                               .y = y.out(onDevice),
                               .seqLen = c.seqLen,
                               .batch = c.batch,
                               .numHeads = c.numHeads,
                               .headDim = c.headDim,
                               .xPitch = c.pitch,
                               .positionOffset = 3,
                               .eps = 1e-6,
                               .theta = 1e6};
      };
      cpu::rmsNormRope(forward(false));
      requireRan(cuda::rmsNormRope(forward(true), nullptr));
      y.requireMatch(tolerance(dtype, 1e-5));

      auto backward = [&](bool onDevice) {
        return RmsNormRopeGradArgs{.x = columns(x.in(onDevice)),
                                   .w = w.in(onDevice),
                                   .dy = dy.in(onDevice),
                                   .dx = columns(dx.out(onDevice)),
                                   .dw = dw.out(onDevice),
                                   .seqLen = c.seqLen,
                                   .batch = c.batch,
                                   .numHeads = c.numHeads,
                                   .headDim = c.headDim,
                                   .xPitch = c.pitch,
                                   .dxPitch = c.pitch,
                                   .positionOffset = 3,
                                   .eps = 1e-6,
                                   .theta = 1e6};
      };
      RmsNormRopeGradArgs deviceArgs = backward(true);
      DeviceBuffer scratch(cuda::rmsNormRopeGradScratchBytes(deviceArgs));
      scratch.poison();
      deviceArgs.scratch = scratch.data();
      cpu::rmsNormRopeGrad(backward(false));
      requireRan(cuda::rmsNormRopeGrad(deviceArgs, nullptr));
      dx.requireMatch(tolerance(dtype, 1e-5));
      dw.requireMatch(tolerance(dtype, 1e-4));
      REQUIRE(window.untouchedOutside(dx.deviceCopy().values(), fill));
    }
}
