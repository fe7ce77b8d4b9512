//===- KernelsCudaNormTest.cpp - cuda RMSNorm against the cpu
//--------------===//
//
// rms_norm and rms_norm_grad (with and without the addend of
// rms_norm_grad_add) on both device paths, against the cpu kernels on the
// same stored inputs, outputs poisoned first (KernelsCudaOpsTest.cpp's
// conventions, CudaPairs.h). dw, a reduction over every row, is also
// checked on model sizes against a float64 cpu run and for the same bits
// on a second launch. Exits 77 (ctest's skip code for this test) on a
// machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNorm.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaPairs.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

struct NormShape {
  int64_t rows, cols, groupSize;
};

/// The backward's arguments on one side; the device side gets `scratch`.
RmsNormGradArgs normGradArgs(const NormShape &shape, ConstTensorView x,
                             ConstTensorView w, ConstTensorView dy,
                             TensorView dx, TensorView dw) {
  return RmsNormGradArgs{.x = x,
                         .w = w,
                         .dy = dy,
                         .dx = dx,
                         .dw = dw,
                         .rows = shape.rows,
                         .cols = shape.cols,
                         .groupSize = shape.groupSize};
}

/// rms_norm_grad on random x, w and dy of `shape` against the cpu, with a
/// random addend (rms_norm_grad_add) when `withAddend`. On the device dx
/// is written over dy, or over the addend, as the executor may place it.
void checkNormGrad(const NormShape &shape, DType dtype, std::mt19937 &rng,
                   bool withAddend) {
  const int64_t numel = shape.rows * shape.cols;
  Pair x(dtype, randomValues(numel, rng));
  Pair w(dtype, randomValues(shape.groupSize, rng));
  Pair dy(dtype, randomValues(numel, rng));
  Pair r(dtype, randomValues(numel, rng));
  Pair dx(dtype, numel), dw(dtype, shape.groupSize);
  Pair &deviceDx = withAddend ? r : dy;
  RmsNormGradArgs hostArgs =
      normGradArgs(shape, x.in(false), w.in(false), dy.in(false), dx.out(false),
                   dw.out(false));
  RmsNormGradArgs deviceArgs =
      normGradArgs(shape, x.in(true), w.in(true), dy.in(true),
                   deviceDx.out(true), dw.out(true));
  if (withAddend) {
    hostArgs.r = r.in(false);
    deviceArgs.r = r.in(true);
  }
  DeviceBuffer scratch(cuda::rmsNormGradScratchBytes(deviceArgs));
  scratch.poison();
  deviceArgs.scratch = scratch.data();
  cpu::rmsNormGrad(hostArgs);
  requireRan(cuda::rmsNormGrad(deviceArgs, nullptr));
  requireClose(deviceDx.deviceCopy(), dx.host(), tolerance(dtype, 1e-4));
  dw.requireMatch(tolerance(dtype, 1e-4));
}

} // namespace

TEST_CASE("cuda rms_norm and its grad match the cpu for every group size",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  // Whole rows and per-head groups; teams of 32 to 1024 threads; one unit
  // per block, and more units than blocks. Groups of whole 16-byte vectors
  // take the vector path: teams of 2 to 32 lanes, several teams per warp
  // (24, 16), up to 8 vectors per lane, teams of several warps (4096,
  // 5000); the rest (129, 43, 3, and 20000, too wide for it) the generic
  // one.
  const NormShape shapes[] = {
      {37, 129, 129},   {37, 129, 43},    {300, 64, 16},    {5, 5000, 5000},
      {3, 9, 3},        {50, 192, 24},    {37, 2048, 1024}, {1, 1024, 1024},
      {16, 4096, 4096}, {2, 20000, 20000}};
  std::mt19937 rng(64);
  for (const NormShape &shape : shapes)
    for (DType dtype : kFloatTypes) {
      INFO("rows " << shape.rows << ", cols " << shape.cols << ", group "
                   << shape.groupSize << ", dtype " << dtypeName(dtype));
      const int64_t numel = shape.rows * shape.cols;
      Pair x(dtype, randomValues(numel, rng));
      Pair w(dtype, randomValues(shape.groupSize, rng));
      Pair y(dtype, numel);
      auto forward = [&](bool onDevice) {
        return RmsNormArgs{.x = x.in(onDevice),
                           .w = w.in(onDevice),
                           .y = y.out(onDevice),
                           .rows = shape.rows,
                           .cols = shape.cols,
                           .groupSize = shape.groupSize};
      };
      cpu::rmsNorm(forward(false));
      requireRan(cuda::rmsNorm(forward(true), nullptr));
      y.requireMatch(tolerance(dtype, 1e-4));

      checkNormGrad(shape, dtype, rng, /*withAddend=*/false);
    }
}

TEST_CASE("cuda rms_norm_grad_add matches the cpu, dx written over its addend",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  // The generic path (43, 129), the vector path with several teams a warp
  // (24) and teams of several warps (4096), and a MiniMind layer norm; dx
  // over r on the device, as the planner may place it.
  const NormShape shapes[] = {
      {37, 129, 43}, {50, 192, 24}, {16, 4096, 4096}, {8192, 768, 768}};
  std::mt19937 rng(66);
  for (const NormShape &shape : shapes)
    for (DType dtype : kFloatTypes) {
      INFO("rows " << shape.rows << ", cols " << shape.cols << ", group "
                   << shape.groupSize << ", dtype " << dtypeName(dtype));
      checkNormGrad(shape, dtype, rng, /*withAddend=*/true);
    }
}

TEST_CASE("cuda rms_norm_grad on model sizes matches a float64 cpu run and "
          "repeats its bits",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  // q_norm over 8192 tokens x 8 heads of 96 (65536 units per dw column),
  // a layer norm over 8192 x 768, and units that do not split evenly over
  // the blocks.
  const NormShape shapes[] = {
      {8192, 768, 96}, {8192, 768, 768}, {1001, 200, 40}};
  std::mt19937 rng(70);
  for (const NormShape &shape : shapes)
    for (DType dtype : kFloatTypes) {
      INFO("rows " << shape.rows << ", cols " << shape.cols << ", group "
                   << shape.groupSize << ", dtype " << dtypeName(dtype));
      const int64_t numel = shape.rows * shape.cols;
      Pair x(dtype, randomValues(numel, rng));
      Pair w(dtype, randomValues(shape.groupSize, rng));
      Pair dy(dtype, randomValues(numel, rng));
      Pair dx(dtype, numel), dw(dtype, shape.groupSize);
      RmsNormGradArgs deviceArgs =
          normGradArgs(shape, x.in(true), w.in(true), dy.in(true), dx.out(true),
                       dw.out(true));
      DeviceBuffer scratch(cuda::rmsNormGradScratchBytes(deviceArgs));
      scratch.poison();
      deviceArgs.scratch = scratch.data();
      requireRan(cuda::rmsNormGrad(deviceArgs, nullptr));
      Tensor firstDx = dx.deviceCopy(), firstDw = dw.deviceCopy();

      // f32: a float64 run of the cpu kernel on the same stored values, as
      // a float32 sum of 65536 terms in row order may itself be off by
      // ~1e-5.
      // bf16: the cpu kernel in bf16, as elsewhere in this file.
      const bool f32 = dtype == DType::F32;
      const DType refType = f32 ? DType::F64 : dtype;
      Tensor x64(refType, x.host().values()), w64(refType, w.host().values()),
          dy64(refType, dy.host().values());
      Tensor dxRef(refType, numel), dwRef(refType, shape.groupSize);
      cpu::rmsNormGrad(normGradArgs(shape, x64.cview(), w64.cview(),
                                    dy64.cview(), dxRef.view(), dwRef.view()));
      requireClose(firstDx, dxRef, tolerance(dtype, 1e-5));
      requireClose(firstDw, dwRef, tolerance(dtype, 1e-5));

      scratch.poison();
      dx.poison();
      dw.poison();
      requireRan(cuda::rmsNormGrad(deviceArgs, nullptr));
      requireSameBits(dw.deviceCopy(), firstDw, dtype);
      requireSameBits(dx.deviceCopy(), firstDx, dtype);
    }
}

TEST_CASE("cuda rms_norm_grad without its scratch is invalid input", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  float hostValue = 1.0f;
  TensorView f32{&hostValue, DType::F32};
  RmsNormGradArgs args{.x = f32,
                       .w = f32,
                       .dy = f32,
                       .dx = f32,
                       .dw = f32,
                       .rows = 1,
                       .cols = 1,
                       .groupSize = 1};
  REQUIRE(cuda::rmsNormGradScratchBytes(args) > 0);
  Status status = cuda::rmsNormGrad(args, nullptr);
  INFO(status.message());
  REQUIRE(status.code() == Status::Code::InvalidInput);
}
