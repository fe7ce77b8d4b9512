//===- KernelsForwardTest.cpp - cpu forward kernels vs float64 loops ------===//

#include "kernels/AdamW.h"
#include "kernels/Attention.h"
#include "kernels/CrossEntropy.h"
#include "kernels/Elementwise.h"
#include "kernels/Embedding.h"
#include "kernels/Matmul.h"
#include "kernels/RmsNorm.h"
#include "kernels/Rope.h"
#include "kernels/cpu/KernelThreads.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

// F32 results carry fp32 accumulation error; F64 ones only double rounding.
double toleranceFor(DType dtype) { return dtype == DType::F64 ? 1e-13 : 2e-6; }

} // namespace

TEST_CASE("embedding gives table rows for local ids and zero rows otherwise",
          "[kernels]") {
  std::mt19937 rng(1);
  const int64_t numRows = 7, hidden = 5, vocabStart = 4;
  // 3 and -100 fall below this shard, 11 and 20 above it (4 + 7 = 11).
  std::vector<int32_t> ids = {4, 3, 10, 11, 7, -100, 20, 4, 9};
  const int64_t numTokens = static_cast<int64_t>(ids.size());
  Tensor table(DType::F32, randomValues(numRows * hidden, rng));
  Tensor out(DType::F32, numTokens * hidden);
  cpu::embedding({.table = table.cview(),
                  .ids = ids.data(),
                  .out = out.view(),
                  .numTokens = numTokens,
                  .numRows = numRows,
                  .hidden = hidden,
                  .vocabStart = vocabStart});
  std::vector<double> expected(numTokens * hidden, 0.0);
  for (int64_t t = 0; t < numTokens; ++t)
    if (ids[t] >= vocabStart && ids[t] < vocabStart + numRows)
      for (int64_t h = 0; h < hidden; ++h)
        expected[t * hidden + h] = table.at((ids[t] - vocabStart) * hidden + h);
  REQUIRE(out.values() == expected);
}

TEST_CASE("grouped rms norm matches a float64 loop", "[kernels]") {
  std::mt19937 rng(2);
  const int64_t rows = 3, cols = 15;
  for (DType dtype : {DType::F32, DType::F64})
    for (int64_t groupSize : {int64_t(5), cols}) {
      Tensor x(dtype, randomValues(rows * cols, rng));
      Tensor w(dtype, randomValues(groupSize, rng));
      Tensor y(dtype, rows * cols);
      const double eps = 1e-5;
      cpu::rmsNorm({.x = x.cview(),
                    .w = w.cview(),
                    .y = y.view(),
                    .rows = rows,
                    .cols = cols,
                    .groupSize = groupSize,
                    .eps = eps});
      std::vector<double> expected(rows * cols);
      for (int64_t begin = 0; begin < rows * cols; begin += groupSize) {
        double sumSquares = 0;
        for (int64_t c = 0; c < groupSize; ++c)
          sumSquares += x.at(begin + c) * x.at(begin + c);
        double rstd = 1 / std::sqrt(sumSquares / groupSize + eps);
        for (int64_t c = 0; c < groupSize; ++c)
          expected[begin + c] = x.at(begin + c) * rstd * w.at(c);
      }
      INFO("dtype " << dtypeName(dtype) << ", groupSize " << groupSize);
      REQUIRE(maxRelativeError(y.values(), expected) < toleranceFor(dtype));
    }
}

TEST_CASE("matmul, dgrad and wgrad match float64 loops", "[kernels]") {
  std::mt19937 rng(3);
  // Odd shapes exercise the partial 4-row tiles and 8-column panels.
  struct Shape {
    int64_t m, n, k;
  };
  for (Shape shape : {Shape{7, 13, 9}, Shape{37, 29, 33}, Shape{1, 1, 1}})
    for (DType dtype : {DType::F32, DType::F64}) {
      const int64_t m = shape.m, n = shape.n, k = shape.k;
      Tensor x(dtype, randomValues(m * k, rng));
      Tensor w(dtype, randomValues(n * k, rng));
      Tensor dy(dtype, randomValues(m * n, rng));
      Tensor y(dtype, m * n), dx(dtype, m * k), dw(dtype, n * k);
      auto sized = [&](auto args) {
        args.m = m;
        args.n = n;
        args.k = k;
        return args;
      };
      cpu::matmul(
          sized(MatmulArgs{.x = x.cview(), .w = w.cview(), .y = y.view()}));
      cpu::matmulDgrad(sized(
          MatmulDgradArgs{.dy = dy.cview(), .w = w.cview(), .dx = dx.view()}));
      cpu::matmulWgrad(sized(
          MatmulWgradArgs{.dy = dy.cview(), .x = x.cview(), .dw = dw.view()}));
      std::vector<double> expectY(m * n, 0.0), expectDx(m * k, 0.0),
          expectDw(n * k, 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t l = 0; l < k; ++l) {
            expectY[i * n + j] += x.at(i * k + l) * w.at(j * k + l);
            expectDx[i * k + l] += dy.at(i * n + j) * w.at(j * k + l);
            expectDw[j * k + l] += dy.at(i * n + j) * x.at(i * k + l);
          }
      INFO("m " << m << " n " << n << " k " << k << " " << dtypeName(dtype));
      CHECK(maxRelativeError(y.values(), expectY) < toleranceFor(dtype));
      CHECK(maxRelativeError(dx.values(), expectDx) < toleranceFor(dtype));
      CHECK(maxRelativeError(dw.values(), expectDw) < toleranceFor(dtype));
    }
}

TEST_CASE("the f32 GEMM's builds give the bits of float loops in k order",
          "[kernels]") {
  // Every element must be the sum of its products in order, each product
  // and sum rounded once as a float (no fma, no reordering), on the build
  // the cpu takes and on the baseline one, on one thread and on three
  // (the last shape is large enough to be cut into shares of columns, one
  // ending inside a panel). Shapes cover partial tiles of 4 rows, panels
  // of 8 and 16 columns cut short, and a long k; up to 8 rows (a decode
  // step's) take the forward's path that reads w's rows in place, in
  // blocks of 8 (cut short, and in three shares on three threads).
  std::mt19937 rng(5);
  struct Shape {
    int64_t m, n, k;
  };
  for (int64_t threads : {1, 3})
    for (bool baseline : {false, true})
      for (Shape shape :
           {Shape{7, 13, 9}, Shape{9, 37, 768}, Shape{130, 16, 3},
            Shape{130, 301, 768}, Shape{1, 21, 5}, Shape{8, 2051, 768}})
        for (DType dtype : {DType::F32, DType::BF16}) {
          cpu::setKernelThreads(threads);
          cpu::useBaselineGemm(baseline);
          const int64_t m = shape.m, n = shape.n, k = shape.k;
          Tensor x(dtype, randomValues(m * k, rng));
          Tensor w(dtype, randomValues(n * k, rng));
          Tensor y(DType::F32, m * n);
          cpu::matmul({.x = x.cview(),
                       .w = w.cview(),
                       .y = y.view(),
                       .m = m,
                       .n = n,
                       .k = k});
          INFO("m " << m << " n " << n << " k " << k << " " << dtypeName(dtype)
                    << (baseline ? ", baseline" : "") << ", " << threads
                    << " threads");
          int64_t mismatches = 0;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              float sum = 0.0f;
              for (int64_t l = 0; l < k; ++l) {
                // Two statements: the product rounded before the sum.
                float product = static_cast<float>(x.at(i * k + l)) *
                                static_cast<float>(w.at(j * k + l));
                sum += product;
              }
              mismatches += y.at(i * n + j) != sum;
            }
          REQUIRE(mismatches == 0);
        }
  cpu::useBaselineGemm(false);
  cpu::setKernelThreads(1);
}

TEST_CASE("rope rotates halves by position times inverse frequency",
          "[kernels]") {
  std::mt19937 rng(4);
  const int64_t seqLen = 3, batch = 2, numHeads = 3, headDim = 8;
  const int64_t offset = 5, numel = seqLen * batch * numHeads * headDim;
  const double theta = 1e4;
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor x(dtype, randomValues(numel, rng));
    Tensor y(dtype, numel);
    cpu::rope({.x = x.cview(),
               .y = y.view(),
               .seqLen = seqLen,
               .batch = batch,
               .numHeads = numHeads,
               .headDim = headDim,
               .positionOffset = offset,
               .theta = theta});
    std::vector<double> expected(numel);
    const int64_t half = headDim / 2;
    for (int64_t s = 0; s < seqLen; ++s)
      for (int64_t row = 0; row < batch * numHeads; ++row)
        for (int64_t i = 0; i < half; ++i) {
          double angle = (s + offset) / std::pow(theta, 2.0 * i / headDim);
          int64_t base = (s * batch * numHeads + row) * headDim;
          double x1 = x.at(base + i), x2 = x.at(base + i + half);
          expected[base + i] = x1 * std::cos(angle) - x2 * std::sin(angle);
          expected[base + i + half] =
              x2 * std::cos(angle) + x1 * std::sin(angle);
        }
    INFO("dtype " << dtypeName(dtype));
    // F32 builds its tables in fp32 (angles up to 7 rad): a few ulps.
    double tolerance = dtype == DType::F64 ? 1e-13 : 5e-6;
    REQUIRE(maxRelativeError(y.values(), expected) < tolerance);
  }
}

TEST_CASE("add and swiglu match float64 formulas", "[kernels]") {
  std::mt19937 rng(5);
  const int64_t numel = 23;
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor a(dtype, randomValues(numel, rng, 3.0));
    Tensor b(dtype, randomValues(numel, rng, 3.0));
    Tensor sum(dtype, numel), product(dtype, numel);
    cpu::add({.a = a.cview(), .b = b.cview(), .y = sum.view(), .numel = numel});
    cpu::swiglu({.gate = a.cview(),
                 .up = b.cview(),
                 .y = product.view(),
                 .numel = numel});
    std::vector<double> expectSum(numel), expectProduct(numel);
    for (int64_t i = 0; i < numel; ++i) {
      expectSum[i] = a.at(i) + b.at(i);
      expectProduct[i] = a.at(i) / (1 + std::exp(-a.at(i))) * b.at(i);
    }
    INFO("dtype " << dtypeName(dtype));
    REQUIRE(maxRelativeError(sum.values(), expectSum) < toleranceFor(dtype));
    REQUIRE(maxRelativeError(product.values(), expectProduct) <
            toleranceFor(dtype));
  }
}

TEST_CASE("adamw three steps follow torch's formula", "[kernels]") {
  std::mt19937 rng(6);
  const int64_t numel = 11;
  const double lr = 1e-2, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, decay = 0.1;
  for (DType dtype : {DType::F32, DType::F64}) {
    std::vector<double> p = randomValues(numel, rng), m(numel, 0.0),
                        v(numel, 0.0);
    Tensor param(dtype, p), moment1(dtype, numel), moment2(dtype, numel);
    for (int64_t step = 1; step <= 3; ++step) {
      Tensor grad(dtype, randomValues(numel, rng));
      cpu::adamw({.param = param.view(),
                  .m = moment1.view(),
                  .v = moment2.view(),
                  .grad = grad.cview(),
                  .numel = numel,
                  .step = step,
                  .lr = lr,
                  .beta1 = beta1,
                  .beta2 = beta2,
                  .eps = eps,
                  .weightDecay = decay});
      double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
      for (int64_t i = 0; i < numel; ++i) {
        double g = grad.at(i);
        p[i] *= 1 - lr * decay;
        m[i] = beta1 * m[i] + (1 - beta1) * g;
        v[i] = beta2 * v[i] + (1 - beta2) * g * g;
        p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
      }
      INFO("dtype " << dtypeName(dtype) << ", step " << step);
      REQUIRE(maxRelativeError(param.values(), p) < toleranceFor(dtype));
      REQUIRE(maxRelativeError(moment1.values(), m) < toleranceFor(dtype));
      REQUIRE(maxRelativeError(moment2.values(), v) < toleranceFor(dtype));
    }
  }
}
