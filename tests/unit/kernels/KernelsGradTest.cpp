//===- KernelsGradTest.cpp - backward kernels vs finite differences -------===//
//
// Each backward is checked against central differences of its forward run
// with F64 storage, on the objective sum(cotangent * output).
//
//===----------------------------------------------------------------------===//

#include "kernels/Elementwise.h"
#include "kernels/Embedding.h"
#include "kernels/Matmul.h"
#include "kernels/RmsNorm.h"
#include "kernels/Rope.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

constexpr DType kF64 = DType::F64;
constexpr double kTolerance = 1e-6;

} // namespace

TEST_CASE("embedding gradient sums cotangent rows of local ids", "[kernels]") {
  std::mt19937 rng(31);
  const int64_t numRows = 6, hidden = 4, vocabStart = 3;
  std::vector<int32_t> ids = {5, 2, 3, 8, 5, 9, 0, 5, 4};
  const int64_t numTokens = static_cast<int64_t>(ids.size());
  std::vector<double> tableValues = randomValues(numRows * hidden, rng);
  std::vector<double> cotangent = randomValues(numTokens * hidden, rng);
  auto sized = [&](auto args) {
    args.ids = ids.data();
    args.numTokens = numTokens;
    args.numRows = numRows;
    args.hidden = hidden;
    args.vocabStart = vocabStart;
    return args;
  };
  auto forward = [&](const std::vector<double> &table) {
    Tensor tableTensor(kF64, table), out(kF64, numTokens * hidden);
    cpu::embedding(
        sized(EmbeddingArgs{.table = tableTensor.cview(), .out = out.view()}));
    return weightedSum(cotangent, out.values());
  };
  Tensor dout(kF64, cotangent);
  // Pre-filled with noise: the kernel must overwrite, not accumulate.
  Tensor dtable(kF64, randomValues(numRows * hidden, rng));
  cpu::embeddingGrad(
      sized(EmbeddingGradArgs{.dout = dout.cview(), .dtable = dtable.view()}));
  std::vector<double> gradient = dtable.values();
  REQUIRE(maxRelativeError(gradient, numericGradient(tableValues, forward)) <
          kTolerance);
  // Rows 3 and 4 (ids 6 and 7) are never looked up.
  for (int64_t h = 0; h < 2 * hidden; ++h)
    REQUIRE(gradient[3 * hidden + h] == 0.0);
}

TEST_CASE("rms norm gradients match finite differences", "[kernels]") {
  std::mt19937 rng(32);
  const int64_t rows = 3, cols = 10, groupSize = 5, numel = rows * cols;
  const double eps = 1e-5;
  std::vector<double> xValues = randomValues(numel, rng);
  std::vector<double> wValues = randomValues(groupSize, rng);
  std::vector<double> cotangent = randomValues(numel, rng);
  auto forward = [&](const std::vector<std::vector<double>> &in) {
    Tensor xTensor(kF64, in[0]), wTensor(kF64, in[1]), y(kF64, numel);
    cpu::rmsNorm({.x = xTensor.cview(),
                  .w = wTensor.cview(),
                  .y = y.view(),
                  .rows = rows,
                  .cols = cols,
                  .groupSize = groupSize,
                  .eps = eps});
    return weightedSum(cotangent, y.values());
  };
  Tensor x(kF64, xValues), w(kF64, wValues), dy(kF64, cotangent);
  Tensor dx(kF64, numel), dw(kF64, randomValues(groupSize, rng));
  cpu::rmsNormGrad({.x = x.cview(),
                    .w = w.cview(),
                    .dy = dy.cview(),
                    .dx = dx.view(),
                    .dw = dw.view(),
                    .rows = rows,
                    .cols = cols,
                    .groupSize = groupSize,
                    .eps = eps});
  auto numeric = numericGradients({xValues, wValues}, forward);
  CHECK(maxRelativeError(dx.values(), numeric[0]) < kTolerance);
  CHECK(maxRelativeError(dw.values(), numeric[1]) < kTolerance);
}

TEST_CASE("rms norm gradient with an addend rounds the sum once", "[kernels]") {
  // rms_norm_grad_add: in f32, dx + r formed before the store is the
  // separate add's bits (the f32 dx is exact before its store); in bf16 one
  // rounding instead of two, within a bf16 step of the separate sum. r may
  // be dx itself (the planner may place dx over the dying addend); dw is
  // rms_norm_grad's.
  std::mt19937 rng(34);
  const int64_t rows = 7, cols = 24, groupSize = 8, numel = rows * cols;
  for (DType dtype : {DType::F32, DType::BF16}) {
    INFO(dtypeName(dtype));
    Tensor x(dtype, randomValues(numel, rng));
    Tensor w(dtype, randomValues(groupSize, rng));
    Tensor dy(dtype, randomValues(numel, rng));
    Tensor r(dtype, randomValues(numel, rng));
    auto args = [&](TensorView dx, TensorView dw, ConstTensorView addend) {
      return RmsNormGradArgs{.x = x.cview(),
                             .w = w.cview(),
                             .dy = dy.cview(),
                             .dx = dx,
                             .dw = dw,
                             .rows = rows,
                             .cols = cols,
                             .groupSize = groupSize,
                             .eps = 1e-6,
                             .r = addend};
    };
    Tensor plain(dtype, numel), plainDw(dtype, groupSize);
    cpu::rmsNormGrad(args(plain.view(), plainDw.view(), {}));
    Tensor fused(dtype, numel), fusedDw(dtype, groupSize);
    cpu::rmsNormGrad(args(fused.view(), fusedDw.view(), r.cview()));
    Tensor inPlace(dtype, r.values()), inPlaceDw(dtype, groupSize);
    cpu::rmsNormGrad(args(inPlace.view(), inPlaceDw.view(), inPlace.cview()));
    std::vector<double> sum = plain.values(), rValues = r.values();
    for (size_t i = 0; i < sum.size(); ++i)
      sum[i] += rValues[i];
    Tensor separate(dtype, sum); // the separate add's one rounding
    if (dtype == DType::F32)
      CHECK(fused.values() == separate.values());
    else
      CHECK(maxRelativeError(fused.values(), sum) < 1e-2);
    CHECK(inPlace.values() == fused.values());
    CHECK(fusedDw.values() == plainDw.values());
    CHECK(inPlaceDw.values() == plainDw.values());
  }
}

TEST_CASE("matmul dgrad and wgrad match finite differences", "[kernels]") {
  std::mt19937 rng(33);
  const int64_t m = 5, n = 11, k = 9;
  std::vector<double> xValues = randomValues(m * k, rng);
  std::vector<double> wValues = randomValues(n * k, rng);
  std::vector<double> cotangent = randomValues(m * n, rng);
  auto sized = [&](auto args) {
    args.m = m;
    args.n = n;
    args.k = k;
    return args;
  };
  auto forward = [&](const std::vector<std::vector<double>> &in) {
    Tensor xTensor(kF64, in[0]), wTensor(kF64, in[1]), y(kF64, m * n);
    cpu::matmul(sized(
        MatmulArgs{.x = xTensor.cview(), .w = wTensor.cview(), .y = y.view()}));
    return weightedSum(cotangent, y.values());
  };
  Tensor x(kF64, xValues), w(kF64, wValues), dy(kF64, cotangent);
  Tensor dx(kF64, m * k), dw(kF64, n * k);
  cpu::matmulDgrad(sized(
      MatmulDgradArgs{.dy = dy.cview(), .w = w.cview(), .dx = dx.view()}));
  cpu::matmulWgrad(sized(
      MatmulWgradArgs{.dy = dy.cview(), .x = x.cview(), .dw = dw.view()}));
  auto numeric = numericGradients({xValues, wValues}, forward);
  CHECK(maxRelativeError(dx.values(), numeric[0]) < kTolerance);
  CHECK(maxRelativeError(dw.values(), numeric[1]) < kTolerance);
}

TEST_CASE("inverse rope is the gradient of rope", "[kernels]") {
  std::mt19937 rng(34);
  const int64_t seqLen = 3, batch = 2, numHeads = 2, headDim = 6;
  const int64_t offset = 7, numel = seqLen * batch * numHeads * headDim;
  auto runRope = [&](const std::vector<double> &values, bool inverse) {
    Tensor x(kF64, values), y(kF64, numel);
    cpu::rope({.x = x.cview(),
               .y = y.view(),
               .seqLen = seqLen,
               .batch = batch,
               .numHeads = numHeads,
               .headDim = headDim,
               .positionOffset = offset,
               .theta = 1e4,
               .inverse = inverse});
    return y.values();
  };
  std::vector<double> xValues = randomValues(numel, rng);
  std::vector<double> cotangent = randomValues(numel, rng);
  auto numericDx = numericGradient(xValues, [&](const auto &point) {
    return weightedSum(cotangent, runRope(point, false));
  });
  REQUIRE(maxRelativeError(runRope(cotangent, true), numericDx) < kTolerance);
}

TEST_CASE("swiglu gradients match finite differences", "[kernels]") {
  std::mt19937 rng(35);
  const int64_t numel = 17;
  std::vector<double> gateValues = randomValues(numel, rng, 4.0);
  std::vector<double> upValues = randomValues(numel, rng);
  std::vector<double> cotangent = randomValues(numel, rng);
  auto forward = [&](const std::vector<std::vector<double>> &in) {
    Tensor gateTensor(kF64, in[0]), upTensor(kF64, in[1]), y(kF64, numel);
    cpu::swiglu({.gate = gateTensor.cview(),
                 .up = upTensor.cview(),
                 .y = y.view(),
                 .numel = numel});
    return weightedSum(cotangent, y.values());
  };
  Tensor gate(kF64, gateValues), up(kF64, upValues), dy(kF64, cotangent);
  Tensor dgate(kF64, numel), dup(kF64, numel);
  cpu::swigluGrad({.gate = gate.cview(),
                   .up = up.cview(),
                   .dy = dy.cview(),
                   .dgate = dgate.view(),
                   .dup = dup.view(),
                   .numel = numel});
  auto numeric = numericGradients({gateValues, upValues}, forward);
  CHECK(maxRelativeError(dgate.values(), numeric[0]) < kTolerance);
  CHECK(maxRelativeError(dup.values(), numeric[1]) < kTolerance);
}

TEST_CASE("packed swiglu reads and writes each row's halves as the separate "
          "kernel does",
          "[kernels]") {
  // gu [rows, 2 * width]: each row's gate, then its up (the fused gate/up
  // GEMM's output). The reference is the separate kernel on the halves
  // copied out, so the packed index map must pick the same elements.
  std::mt19937 rng(36);
  const int64_t rows = 5, width = 7, numel = rows * width;
  for (DType dtype : {DType::F32, DType::BF16}) {
    INFO("dtype " << dtypeName(dtype));
    std::vector<double> packedValues = randomValues(2 * numel, rng, 3.0);
    std::vector<double> gateValues, upValues;
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t col = 0; col < 2 * width; ++col)
        (col < width ? gateValues : upValues)
            .push_back(packedValues[row * 2 * width + col]);
    Tensor gu(dtype, packedValues), gate(dtype, gateValues),
        up(dtype, upValues), dy(dtype, randomValues(numel, rng));
    const auto *guData = static_cast<const char *>(gu.cview().data);
    ConstTensorView upHalf{guData + width * dtypeSize(dtype), dtype};

    Tensor packedY(dtype, numel), separateY(dtype, numel);
    cpu::swiglu({.gate = gu.cview(),
                 .up = upHalf,
                 .y = packedY.view(),
                 .numel = numel,
                 .width = width,
                 .packedStride = 2 * width});
    cpu::swiglu({.gate = gate.cview(),
                 .up = up.cview(),
                 .y = separateY.view(),
                 .numel = numel});
    CHECK(packedY.values() == separateY.values());

    Tensor dgu(dtype, 2 * numel), dgate(dtype, numel), dup(dtype, numel);
    auto *dguData = static_cast<char *>(dgu.view().data);
    cpu::swigluGrad({.gate = gu.cview(),
                     .up = upHalf,
                     .dy = dy.cview(),
                     .dgate = dgu.view(),
                     .dup = {dguData + width * dtypeSize(dtype), dtype},
                     .numel = numel,
                     .width = width,
                     .packedStride = 2 * width});
    cpu::swigluGrad({.gate = gate.cview(),
                     .up = up.cview(),
                     .dy = dy.cview(),
                     .dgate = dgate.view(),
                     .dup = dup.view(),
                     .numel = numel});
    std::vector<double> joined;
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t col = 0; col < width; ++col)
        joined.push_back(dgate.values()[row * width + col]);
      for (int64_t col = 0; col < width; ++col)
        joined.push_back(dup.values()[row * width + col]);
    }
    CHECK(dgu.values() == joined);
  }
}
