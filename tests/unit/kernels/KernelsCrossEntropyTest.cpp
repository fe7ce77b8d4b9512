//===- KernelsCrossEntropyTest.cpp - masked, padded mean cross entropy ----===//

#include "kernels/CrossEntropy.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::maxRelativeError;
using sharc::kernels::test::numericGradient;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;

namespace {

// Tokens 1 and 4 are ignored; 9 of 12 columns are real vocabulary.
constexpr int64_t kNumTokens = 6, kVocab = 12, kValidVocab = 9;
const std::vector<int32_t> kLabels = {3, -100, 0, 8, -100, 5};
constexpr int64_t kNumValid = 4;

float runLoss(const Tensor &logits) {
  float loss = 0;
  cpu::crossEntropy({.logits = logits.cview(),
                     .labels = kLabels.data(),
                     .loss = &loss,
                     .numTokens = kNumTokens,
                     .vocab = kVocab,
                     .validVocab = kValidVocab});
  return loss;
}

/// Mean over valid tokens of lse - x[label], lse over the real columns only.
double referenceLoss(const std::vector<double> &logits) {
  double total = 0;
  for (int64_t t = 0; t < kNumTokens; ++t) {
    if (kLabels[t] == -100)
      continue;
    double sumExp = 0;
    for (int64_t v = 0; v < kValidVocab; ++v)
      sumExp += std::exp(logits[t * kVocab + v]);
    total += std::log(sumExp) - logits[t * kVocab + kLabels[t]];
  }
  return total / kNumValid;
}

} // namespace

TEST_CASE("cross entropy is the mean over valid tokens of real columns",
          "[kernels]") {
  std::mt19937 rng(21);
  std::vector<double> values = randomValues(kNumTokens * kVocab, rng, 4.0);
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor logits(dtype, values);
    INFO("dtype " << dtypeName(dtype));
    REQUIRE(runLoss(logits) ==
            Approx(referenceLoss(logits.values())).epsilon(1e-6));
  }
  // Padded columns and ignored rows may hold anything.
  std::vector<double> noisy = values;
  for (int64_t t = 0; t < kNumTokens; ++t)
    for (int64_t v = 0; v < kVocab; ++v)
      if (kLabels[t] == -100 || v >= kValidVocab)
        noisy[t * kVocab + v] = 50.0 + v;
  REQUIRE(runLoss(Tensor(DType::F64, noisy)) ==
          runLoss(Tensor(DType::F64, values)));
}

TEST_CASE("cross entropy of only ignored labels is zero", "[kernels]") {
  std::vector<int32_t> labels(3, -100);
  std::mt19937 rng(22);
  Tensor logits(DType::F32, randomValues(3 * kVocab, rng));
  float loss = -1;
  cpu::crossEntropy({.logits = logits.cview(),
                     .labels = labels.data(),
                     .loss = &loss,
                     .numTokens = 3,
                     .vocab = kVocab,
                     .validVocab = kValidVocab});
  REQUIRE(loss == 0.0f);
}

TEST_CASE("cross entropy gradient is softmax minus one-hot over valid tokens",
          "[kernels]") {
  std::mt19937 rng(23);
  std::vector<double> values = randomValues(kNumTokens * kVocab, rng, 2.0);
  const float dloss = 0.75f;
  Tensor logits(DType::F64, values);
  Tensor dlogits(DType::F64, randomValues(kNumTokens * kVocab, rng));
  cpu::crossEntropyGrad({.logits = logits.cview(),
                         .labels = kLabels.data(),
                         .dloss = &dloss,
                         .dlogits = dlogits.view(),
                         .numTokens = kNumTokens,
                         .vocab = kVocab,
                         .validVocab = kValidVocab});
  std::vector<double> gradient = dlogits.values();
  for (int64_t t = 0; t < kNumTokens; ++t)
    for (int64_t v = 0; v < kVocab; ++v)
      if (kLabels[t] == -100 || v >= kValidVocab) {
        INFO("token " << t << ", column " << v);
        REQUIRE(gradient[t * kVocab + v] == 0.0);
      }

  // The gradient of the float64 reference: exact up to rounding.
  auto numericExact = numericGradient(
      values, [&](const auto &point) { return dloss * referenceLoss(point); },
      1e-5);
  CHECK(maxRelativeError(gradient, numericExact) < 1e-7);

  // The kernel's forward returns an fp32 loss, so its own differences are
  // only good to ~eps32 / step; with step 1e-2 that is ~1e-4 here.
  auto numericKernel = numericGradient(
      values,
      [&](const auto &point) {
        return dloss * double(runLoss(Tensor(DType::F64, point)));
      },
      1e-2);
  CHECK(maxRelativeError(gradient, numericKernel) < 1e-3);
}
