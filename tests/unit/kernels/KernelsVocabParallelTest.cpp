//===- KernelsVocabParallelTest.cpp - sharded loss equals the dense one ---===//
//
// Splits a [7, 13] logits matrix into T contiguous column blocks (V padded
// up to a multiple of T with garbage), runs the per-rank kernels, combines
// the statistics as the all-reduces would (max, sum, sum) and checks loss
// and the concatenated gradient against cpu::crossEntropy{,Grad} on the
// unsharded matrix.
//
//===----------------------------------------------------------------------===//

#include "kernels/CrossEntropy.h"
#include "kernels/VocabParallelLoss.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::maxRelativeError;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;

namespace {

constexpr int64_t kNumTokens = 7, kVocab = 13;
constexpr float kDloss = 0.75f;

// Label 12 is a padded column when validVocab = 11; -7 and 20 are out of
// range. All three are ignored like -100, as in the dense kernel.
const std::vector<std::vector<int32_t>> kLabelSets = {
    {3, -100, 10, 0, 12, -100, 5}, {12, 0, -7, 10, 20, 1, -100}};

struct DTypes {
  DType logits = DType::F32, stats = DType::F32, dlogits = DType::F32;
};

struct LossResult {
  float loss = 0;
  std::vector<double> dlogits; ///< [numTokens, kVocab]
};

/// Large values: if any padding leaked into a max or a sum it would dominate.
double garbage(std::mt19937 &rng) {
  return std::uniform_real_distribution<double>(30.0, 60.0)(rng);
}

/// The dense kernels on the whole [kNumTokens, kVocab] matrix.
LossResult runDense(const std::vector<double> &logitValues,
                    const std::vector<int32_t> &labels, int64_t validVocab,
                    DTypes dtypes) {
  Tensor logits(dtypes.logits, logitValues);
  Tensor dlogits(dtypes.dlogits, kNumTokens * kVocab);
  LossResult result;
  cpu::crossEntropy({.logits = logits.cview(),
                     .labels = labels.data(),
                     .loss = &result.loss,
                     .numTokens = kNumTokens,
                     .vocab = kVocab,
                     .validVocab = validVocab});
  cpu::crossEntropyGrad({.logits = logits.cview(),
                         .labels = labels.data(),
                         .dloss = &kDloss,
                         .dlogits = dlogits.view(),
                         .numTokens = kNumTokens,
                         .vocab = kVocab,
                         .validVocab = validVocab});
  result.dlogits = dlogits.values();
  return result;
}

/// One rank's share: its logits block and its slices of the statistics.
struct Shard {
  int64_t vocabStart;
  Tensor logits, maxLogit, target, sumExp, dlogits;
};

/// Runs the vocab-parallel kernels on numShards blocks of width
/// ceil(kVocab / numShards). Columns >= kVocab get garbage logits, and the
/// gradient blocks start as garbage; both must come back as zeros.
LossResult runSharded(const std::vector<double> &logitValues,
                      const std::vector<int32_t> &labels, int64_t validVocab,
                      int64_t numShards, DTypes dtypes, std::mt19937 &rng) {
  const int64_t width = (kVocab + numShards - 1) / numShards;
  const int64_t blockNumel = kNumTokens * width;
  std::vector<Shard> shards;
  for (int64_t r = 0; r < numShards; ++r) {
    std::vector<double> block(blockNumel);
    for (int64_t t = 0; t < kNumTokens; ++t)
      for (int64_t j = 0; j < width; ++j) {
        int64_t column = r * width + j;
        block[t * width + j] =
            column < kVocab ? logitValues[t * kVocab + column] : garbage(rng);
      }
    shards.push_back({r * width, Tensor(dtypes.logits, block),
                      Tensor(dtypes.stats, kNumTokens),
                      Tensor(dtypes.stats, kNumTokens),
                      Tensor(dtypes.stats, kNumTokens),
                      Tensor(dtypes.dlogits, randomValues(blockNumel, rng))});
  }

  // Pass 1: local max and target logit; all-reduce max and sum.
  std::vector<double> globalMax(kNumTokens, -INFINITY);
  std::vector<double> globalTarget(kNumTokens, 0.0);
  for (Shard &shard : shards) {
    cpu::vocabMax({.logits = shard.logits.cview(),
                   .vocabMax = shard.maxLogit.view(),
                   .numTokens = kNumTokens,
                   .localVocab = width,
                   .vocabStart = shard.vocabStart,
                   .validVocab = validVocab});
    cpu::targetLogit({.logits = shard.logits.cview(),
                      .labels = labels.data(),
                      .targetLogit = shard.target.view(),
                      .numTokens = kNumTokens,
                      .localVocab = width,
                      .vocabStart = shard.vocabStart,
                      .validVocab = validVocab});
    for (int64_t t = 0; t < kNumTokens; ++t) {
      if (shard.vocabStart >= validVocab) {
        INFO("all-padding shard at " << shard.vocabStart << ", token " << t);
        REQUIRE(shard.maxLogit.at(t) == -INFINITY);
      }
      globalMax[t] = std::max(globalMax[t], shard.maxLogit.at(t));
      globalTarget[t] += shard.target.at(t);
    }
  }
  // The loss skips ignored rows, so check T directly: exactly one shard
  // contributes x[t, label] on a valid row, none on an ignored one.
  for (int64_t t = 0; t < kNumTokens; ++t) {
    bool isValid = labels[t] >= 0 && labels[t] < validVocab;
    INFO("target of token " << t << ", label " << labels[t]);
    REQUIRE(globalTarget[t] ==
            (isValid ? logitValues[t * kVocab + labels[t]] : 0.0));
  }
  Tensor maxTensor(dtypes.stats, globalMax);
  Tensor targetTensor(dtypes.stats, globalTarget);

  // Pass 2: local sums of exp(x - M); all-reduce sum.
  std::vector<double> globalSum(kNumTokens, 0.0);
  for (Shard &shard : shards) {
    cpu::sumExp({.logits = shard.logits.cview(),
                 .vocabMax = maxTensor.cview(),
                 .sumExp = shard.sumExp.view(),
                 .numTokens = kNumTokens,
                 .localVocab = width,
                 .vocabStart = shard.vocabStart,
                 .validVocab = validVocab});
    for (int64_t t = 0; t < kNumTokens; ++t)
      globalSum[t] += shard.sumExp.at(t);
  }
  Tensor sumTensor(dtypes.stats, globalSum);

  LossResult result;
  cpu::vocabParallelLoss({.labels = labels.data(),
                          .vocabMax = maxTensor.cview(),
                          .targetLogit = targetTensor.cview(),
                          .sumExp = sumTensor.cview(),
                          .loss = &result.loss,
                          .numTokens = kNumTokens,
                          .validVocab = validVocab});

  // Not NaN: maxRelativeError's std::max would skip a missing column.
  result.dlogits.assign(kNumTokens * kVocab, 1e30);
  for (Shard &shard : shards) {
    cpu::vocabParallelLossGrad({.logits = shard.logits.cview(),
                                .labels = labels.data(),
                                .vocabMax = maxTensor.cview(),
                                .sumExp = sumTensor.cview(),
                                .dloss = &kDloss,
                                .dlogits = shard.dlogits.view(),
                                .numTokens = kNumTokens,
                                .localVocab = width,
                                .vocabStart = shard.vocabStart,
                                .validVocab = validVocab});
    for (int64_t t = 0; t < kNumTokens; ++t)
      for (int64_t j = 0; j < width; ++j) {
        int64_t column = shard.vocabStart + j;
        double grad = shard.dlogits.at(t * width + j);
        if (column < kVocab) {
          result.dlogits[t * kVocab + column] = grad;
        } else {
          INFO("block padding, token " << t << ", column " << column);
          REQUIRE(grad == 0.0);
        }
      }
  }
  return result;
}

/// Random logits with garbage in the vocabulary padding [validVocab, kVocab).
std::vector<double> makeLogits(int64_t validVocab, std::mt19937 &rng,
                               DType roundTo) {
  std::vector<double> values = randomValues(kNumTokens * kVocab, rng, 4.0);
  for (int64_t t = 0; t < kNumTokens; ++t)
    for (int64_t v = validVocab; v < kVocab; ++v)
      values[t * kVocab + v] = garbage(rng);
  return Tensor(roundTo, values).values();
}

/// Checks the sharded loss and gradient against the dense kernels for every
/// shard count, label set and vocabulary padding.
void requireMatchesDense(DTypes dtypes, double tolerance) {
  std::mt19937 rng(31);
  for (int64_t validVocab : {int64_t(11), kVocab})
    for (const std::vector<int32_t> &labels : kLabelSets) {
      std::vector<double> values = makeLogits(validVocab, rng, dtypes.logits);
      LossResult dense = runDense(values, labels, validVocab, dtypes);
      for (int64_t numShards = 1; numShards <= 4; ++numShards) {
        INFO("validVocab " << validVocab << ", labels[0] " << labels[0]
                           << ", shards " << numShards);
        LossResult sharded =
            runSharded(values, labels, validVocab, numShards, dtypes, rng);
        REQUIRE(dense.loss > 0.0f);
        REQUIRE(sharded.loss == Approx(dense.loss).epsilon(tolerance));
        REQUIRE(maxRelativeError(sharded.dlogits, dense.dlogits) < tolerance);
      }
    }
}

} // namespace

TEST_CASE("vocab-parallel loss and gradient equal the dense ones in fp32",
          "[kernels]") {
  requireMatchesDense({}, 1e-6);
}

TEST_CASE("vocab-parallel loss and gradient equal the dense ones in fp64",
          "[kernels]") {
  requireMatchesDense(
      {.logits = DType::F64, .stats = DType::F64, .dlogits = DType::F64},
      1e-12);
}

TEST_CASE("vocab-parallel kernels on bf16 storage are the fp32 math rounded",
          "[kernels]") {
  const int64_t validVocab = 11;
  const std::vector<int32_t> &labels = kLabelSets[0];
  std::mt19937 rng(32);
  std::vector<double> values = makeLogits(validVocab, rng, DType::BF16);
  const DTypes bf16 = {.logits = DType::BF16, .dlogits = DType::BF16};
  LossResult denseF32 = runDense(values, labels, validVocab, {});
  for (int64_t numShards = 1; numShards <= 4; ++numShards) {
    INFO("shards " << numShards);
    std::mt19937 garbageRng(33);
    LossResult f32 =
        runSharded(values, labels, validVocab, numShards, {}, garbageRng);
    LossResult stored =
        runSharded(values, labels, validVocab, numShards, bf16, garbageRng);
    // Same inputs, same fp32 math: the loss is identical and each gradient
    // element is the fp32 one rounded once.
    REQUIRE(stored.loss == f32.loss);
    for (size_t i = 0; i < f32.dlogits.size(); ++i) {
      INFO("element " << i);
      float f32Grad = static_cast<float>(f32.dlogits[i]);
      REQUIRE(stored.dlogits[i] == bf16ToFloat(floatToBf16(f32Grad)));
    }
    REQUIRE(stored.loss == Approx(denseF32.loss).epsilon(1e-6));
    REQUIRE(maxRelativeError(stored.dlogits, denseF32.dlogits) < 1.0 / 256);
  }
}

TEST_CASE("vocab-parallel loss of only ignored labels is zero", "[kernels]") {
  std::vector<int32_t> labels(kNumTokens, -100);
  std::mt19937 rng(34);
  std::vector<double> values = makeLogits(11, rng, DType::F32);
  LossResult sharded = runSharded(values, labels, 11, 3, {}, rng);
  REQUIRE(sharded.loss == 0.0f);
  for (double grad : sharded.dlogits)
    REQUIRE(grad == 0.0);
}
