//===- KernelsClipTest.cpp - sum_squares and clipped adamw vs float64 -----===//

#include "kernels/AdamW.h"
#include "kernels/SumSquares.h"
#include "kernels/cpu/KernelThreads.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::maxRelativeError;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;

TEST_CASE("sum_squares weights each tensor by 1 / replicas", "[kernels]") {
  std::mt19937 rng(81);
  const std::vector<int64_t> numels = {7, 1, 1000, 33};
  const std::vector<int64_t> replicas = {1, 2, 4, 3};
  for (DType dtype : {DType::F32, DType::BF16, DType::F64}) {
    std::vector<Tensor> tensors;
    SumSquaresArgs args;
    double expected = 0;
    for (size_t t = 0; t < numels.size(); ++t) {
      tensors.emplace_back(dtype, randomValues(numels[t], rng));
      double tensorSum = 0;
      for (double value : tensors.back().values())
        tensorSum += value * value;
      expected += tensorSum / static_cast<double>(replicas[t]);
    }
    for (const Tensor &tensor : tensors)
      args.xs.push_back(tensor.cview());
    args.numels = numels;
    args.replicas = replicas;
    float sum = -1.0f;
    args.sum = &sum;
    cpu::sumSquares(args);
    INFO("dtype " << dtypeName(dtype) << ": " << sum << " vs " << expected);
    // Double accumulation: only the final rounding to f32.
    REQUIRE(std::abs(sum - expected) <= 1e-7 * expected);
  }
}

TEST_CASE("sum_squares of no elements is 0", "[kernels]") {
  float sum = -1.0f;
  cpu::sumSquares({.xs = {}, .numels = {}, .replicas = {}, .sum = &sum});
  REQUIRE(sum == 0.0f);
}

TEST_CASE("clipped adamw scales the gradient by min(1, max / norm)",
          "[kernels]") {
  std::mt19937 rng(83);
  const int64_t numel = 13;
  const double lr = 1e-2, beta1 = 0.9, beta2 = 0.95, eps = 1e-3, decay = 0.1;
  const float maxNorm = 0.5f;
  // A norm above max_norm clips; one below leaves the gradient alone.
  for (float normSq : {9.0f, 0.04f}) {
    double scale = std::min(1.0, maxNorm / (std::sqrt(normSq) + 1e-6));
    std::vector<double> p = randomValues(numel, rng), m(numel, 0.0),
                        v(numel, 0.0);
    Tensor param(DType::F32, p), moment1(DType::F32, numel),
        moment2(DType::F32, numel);
    for (int64_t step = 1; step <= 2; ++step) {
      Tensor grad(DType::F32, randomValues(numel, rng));
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
                  .weightDecay = decay,
                  .gradNormSq = &normSq,
                  .maxNorm = maxNorm});
      double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
      for (int64_t i = 0; i < numel; ++i) {
        double g = grad.at(i) * scale;
        p[i] *= 1 - lr * decay;
        m[i] = beta1 * m[i] + (1 - beta1) * g;
        v[i] = beta2 * v[i] + (1 - beta2) * g * g;
        p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
      }
      INFO("norm^2 " << normSq << ", step " << step);
      REQUIRE(maxRelativeError(param.values(), p) < 2e-6);
      REQUIRE(maxRelativeError(moment1.values(), m) < 2e-6);
      REQUIRE(maxRelativeError(moment2.values(), v) < 2e-6);
    }
  }
}

TEST_CASE("adamw's vector paths store the scalar loop's bits", "[kernels]") {
  // All-f32 updates run over 8 lanes (AVX2) or 4 (the baseline) with the
  // scalar loop's expression; every stored value must be the scalar
  // loop's, over whole vectors and the tail (1037 = 129 x 8 + 5), clipped
  // and not, and the non-finite flag too: a NaN gradient inside the
  // vectors, an infinite one in the tail, and one whose square overflows
  // v, each in its own run.
  const int64_t numel = 1037;
  std::mt19937 rng(85);
  struct Poison {
    int64_t index;
    float value;
  };
  const std::vector<std::vector<Poison>> poisons = {
      {}, {{3, NAN}}, {{1033, INFINITY}}, {{500, 1e30f}}};
  for (const std::vector<Poison> &poison : poisons)
    for (bool clipped : {false, true}) {
      std::vector<double> p = randomValues(numel, rng),
                          g = randomValues(numel, rng),
                          m = randomValues(numel, rng),
                          v = randomValues(numel, rng);
      for (int64_t i = 0; i < numel; ++i) {
        // Moments as training leaves them: m of either sign, v >= 0, both
        // spread over many magnitudes.
        m[i] *= std::ldexp(1.0, static_cast<int>(i % 40) - 30);
        v[i] = std::abs(v[i]) * std::ldexp(1.0, static_cast<int>(i % 50) - 60);
        g[i] *= std::ldexp(1.0, static_cast<int>(i % 23) - 12);
      }
      for (const Poison &bad : poison)
        g[bad.index] = bad.value;
      float normSq = 7.5f;
      std::vector<std::vector<double>> stored;
      std::vector<unsigned> flags;
      for (cpu::AdamWPath path :
           {cpu::AdamWPath::Scalar, cpu::AdamWPath::Baseline,
            cpu::AdamWPath::Fastest}) {
        cpu::useAdamWPath(path);
        Tensor param(DType::F32, p), moment1(DType::F32, m),
            moment2(DType::F32, v), grad(DType::F32, g);
        unsigned flag = 0;
        AdamWArgs args{.param = param.view(),
                       .m = moment1.view(),
                       .v = moment2.view(),
                       .grad = grad.cview(),
                       .numel = numel,
                       .step = 3,
                       .lr = 1e-3,
                       .weightDecay = 0.1,
                       .nonFinite = &flag};
        if (clipped) {
          args.gradNormSq = &normSq;
          args.maxNorm = 1.0f;
        }
        cpu::adamw(args);
        std::vector<double> all = param.values();
        for (const Tensor *moment : {&moment1, &moment2})
          for (double value : moment->values())
            all.push_back(value);
        stored.push_back(std::move(all));
        flags.push_back(flag);
      }
      cpu::useAdamWPath(cpu::AdamWPath::Fastest);
      INFO(poison.size() << " poisoned, " << (clipped ? "clipped" : "not"));
      REQUIRE(flags[0] == (poison.empty() ? 0u : 1u));
      for (size_t path = 1; path < stored.size(); ++path) {
        INFO("path " << path);
        REQUIRE(flags[path] == flags[0]);
        int64_t mismatches = 0;
        for (size_t i = 0; i < stored[0].size(); ++i) {
          double a = stored[0][i], b = stored[path][i];
          bool same = std::isnan(a) ? std::isnan(b) : a == b;
          mismatches += !same || std::signbit(a) != std::signbit(b);
        }
        REQUIRE(mismatches == 0);
      }
    }
}

TEST_CASE("adamw on several threads stores the one-thread bits", "[kernels]") {
  // 600,001 elements are worth two shares (of 2^18 each at least) on three
  // threads; the second share's flag must reach the caller. f32 and bf16
  // with an f32 master (the vector path and the element loop).
  const int64_t numel = 600001;
  std::mt19937 rng(87);
  std::vector<double> p = randomValues(numel, rng),
                      g = randomValues(numel, rng),
                      m = randomValues(numel, rng),
                      v = randomValues(numel, rng);
  for (double &value : v)
    value = std::abs(value);
  for (bool master : {false, true})
    for (bool poisoned : {false, true}) {
      std::vector<double> grads = g;
      if (poisoned)
        grads[numel - 2] = NAN;
      std::vector<std::vector<double>> stored;
      std::vector<unsigned> flags;
      for (int64_t threads : {1, 3}) {
        cpu::setKernelThreads(threads);
        DType paramType = master ? DType::BF16 : DType::F32;
        Tensor weights(DType::F32, p), param(paramType, p),
            moment1(DType::F32, m), moment2(DType::F32, v),
            grad(paramType, grads);
        unsigned flag = 0;
        AdamWArgs args{.param = master ? param.view() : weights.view(),
                       .m = moment1.view(),
                       .v = moment2.view(),
                       .grad = grad.cview(),
                       .numel = numel,
                       .step = 2,
                       .lr = 1e-3,
                       .weightDecay = 0.1,
                       .nonFinite = &flag};
        if (master)
          args.master = weights.view();
        cpu::adamw(args);
        std::vector<double> all = weights.values();
        for (const Tensor *tensor : {&param, &moment1, &moment2})
          for (double value : tensor->values())
            all.push_back(value);
        stored.push_back(std::move(all));
        flags.push_back(flag);
      }
      cpu::setKernelThreads(1);
      INFO((master ? "bf16 with a master" : "f32")
           << ", " << (poisoned ? "a NaN" : "finite"));
      REQUIRE(flags[0] == (poisoned ? 1u : 0u));
      REQUIRE(flags[1] == flags[0]);
      int64_t mismatches = 0;
      for (size_t i = 0; i < stored[0].size(); ++i) {
        double a = stored[0][i], b = stored[1][i];
        mismatches += std::isnan(a) ? !std::isnan(b) : a != b;
      }
      REQUIRE(mismatches == 0);
    }
}
