//===- KernelsCudaClipTest.cpp - cuda sum_squares, clipped adamw vs cpu ---===//
//
// sum_squares over tensors below, at and across the kernel's chunks, in f32
// and bf16, unaligned, against the cpu within fp32 rounding (both add in
// double, in another order) and with the same bits on a second launch; a
// clipped adamw, alone and grouped, with the cpu's bits. Exits 77 without
// a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamW.h"
#include "kernels/SumSquares.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaPairs.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

TEST_CASE("cuda sum_squares matches the cpu, the same bits each run", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(91);
  const std::vector<int64_t> numels = {1, 16383, 16384, 40001, 7};
  const std::vector<int64_t> replicas = {2, 1, 4, 1, 3};
  std::vector<std::unique_ptr<Pair>> tensors;
  for (size_t t = 0; t < numels.size(); ++t)
    tensors.push_back(std::make_unique<Pair>(
        t % 2 ? DType::BF16 : DType::F32, randomValues(numels[t], rng),
        /*offset=*/static_cast<int64_t>(t % 2)));
  ScalarPair sum;
  auto args = [&](bool onDevice) {
    SumSquaresArgs result{.xs = {}, .numels = numels, .replicas = replicas};
    for (const auto &tensor : tensors)
      result.xs.push_back(tensor->in(onDevice));
    result.sum = sum.on(onDevice);
    return result;
  };
  cpu::sumSquares(args(false));
  auto op = cuda::SumSquares::create(args(true));
  INFO(op.status().message());
  REQUIRE(op);
  requireRan((*op)->run(nullptr));
  sum.requireMatch(1e-6);
  float first = sum.deviceValue();
  requireRan((*op)->run(nullptr));
  REQUIRE(sum.deviceValue() == first);
}

TEST_CASE("a clipped cuda adamw equals the cpu's bits, alone and grouped",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(93);
  const int64_t numel = 20001;
  // Clipping (norm 3 > 0.5) and not (norm 0.2 < 0.5).
  for (float normSq : {9.0f, 0.04f})
    for (bool grouped : {false, true}) {
      INFO("norm^2 " << normSq << (grouped ? ", grouped" : ", alone"));
      std::vector<double> vValues = randomValues(numel, rng, 0.01);
      for (double &value : vValues)
        value = std::abs(value);
      Pair param(DType::F32, randomValues(numel, rng));
      Pair m(DType::F32, randomValues(numel, rng, 0.1));
      Pair v(DType::F32, vValues);
      Pair grad(DType::BF16, randomValues(numel, rng));
      ScalarPair norm(normSq);
      auto args = [&](bool onDevice) {
        return AdamWArgs{.param = param.out(onDevice),
                         .m = m.out(onDevice),
                         .v = v.out(onDevice),
                         .grad = grad.in(onDevice),
                         .numel = numel,
                         .step = 2,
                         .lr = 1e-3,
                         .eps = 1e-4,
                         .weightDecay = 0.1,
                         .gradNormSq = norm.on(onDevice),
                         .maxNorm = 0.5f};
      };
      cpu::adamw(args(false));
      if (!grouped) {
        requireRan(cuda::adamw(args(true), nullptr));
      } else {
        AdamWStepScalars scalars = adamwScalars(args(false));
        DeviceBuffer table(sizeof(AdamWStepScalars));
        table.upload(&scalars);
        auto group = cuda::AdamWGroup::create({args(true)}, {0});
        INFO(group.status().message());
        REQUIRE(group);
        requireRan((*group)->run(table.data(), nullptr, nullptr));
      }
      param.requireMatch(0.0);
      m.requireMatch(0.0);
      v.requireMatch(0.0);
    }
}
