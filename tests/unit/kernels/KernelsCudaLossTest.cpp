//===- KernelsCudaLossTest.cpp - the cuda loss kernels against the cpu ----===//
//
// cross_entropy (loss and grad), the vocab-parallel loss kernels and the
// label counts (valid_count, count_scale) run on
// random logits with odd vocabularies and a mix of valid and ignored
// labels, in f32 and bf16 storage, with outputs poisoned first (CudaPairs.h),
// and must match the cpu:: kernels on the same stored inputs. The loss, a
// reduction over every row, is also checked on model sizes against a
// float64 cpu run and for the same bits on a second launch. Exits 77
// (ctest's skip code for this test) on a machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/CrossEntropy.h"
#include "kernels/LabelCount.h"
#include "kernels/VocabParallelLoss.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/CudaPairs.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

/// Valid labels below validVocab, with -100, a padded column, a label past
/// the vocabulary and a negative one among them.
std::vector<int32_t> mixedLabels(int64_t numTokens, int64_t validVocab,
                                 int64_t vocab, std::mt19937 &rng) {
  std::uniform_int_distribution<int32_t> pick(
      0, static_cast<int32_t>(validVocab - 1));
  std::vector<int32_t> labels(numTokens);
  for (int32_t &label : labels)
    label = pick(rng);
  const int32_t ignored[] = {-100, static_cast<int32_t>(vocab - 1),
                             static_cast<int32_t>(vocab + 500), -7, -100};
  for (size_t i = 0; i < std::size(ignored); ++i)
    labels[(3 * i + 1) % labels.size()] = ignored[i];
  return labels;
}

} // namespace

TEST_CASE("cuda cross_entropy and its grad match the cpu", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Shape {
    int64_t numTokens, vocab, validVocab;
    bool allIgnored;
  };
  // Rows of whole 16-byte vectors take the vector path (1000, 2048, 8, and
  // 300 in f32), with valid columns ending inside a vector (997, 1531) or
  // on one; the others (7001, 300 in bf16) the generic one.
  const Shape shapes[] = {{37, 1000, 997, false}, {19, 7001, 6999, false},
                          {5, 300, 299, true},    {33, 2048, 1531, false},
                          {70, 8, 8, false},      {9, 400, 400, false}};
  std::mt19937 rng(67);
  ScalarPair dloss(0.75f);
  for (const Shape &shape : shapes)
    for (DType dtype : kFloatTypes) {
      INFO("vocab " << shape.vocab << ", dtype " << dtypeName(dtype)
                    << (shape.allIgnored ? ", all labels ignored" : ""));
      std::vector<int32_t> labelValues =
          mixedLabels(shape.numTokens, shape.validVocab, shape.vocab, rng);
      if (shape.allIgnored)
        std::fill(labelValues.begin(), labelValues.end(), -100);
      IntPair labels(labelValues);
      const int64_t numel = shape.numTokens * shape.vocab;
      Pair logits(dtype, randomValues(numel, rng, 4.0)), dlogits(dtype, numel);
      ScalarPair loss;
      auto forward = [&](bool onDevice) {
        return CrossEntropyArgs{.logits = logits.in(onDevice),
                                .labels = labels.on(onDevice),
                                .loss = loss.on(onDevice),
                                .numTokens = shape.numTokens,
                                .vocab = shape.vocab,
                                .validVocab = shape.validVocab};
      };
      CrossEntropyArgs deviceArgs = forward(true);
      DeviceBuffer scratch(cuda::crossEntropyScratchBytes(deviceArgs));
      scratch.poison();
      deviceArgs.scratch = scratch.data();
      cpu::crossEntropy(forward(false));
      requireRan(cuda::crossEntropy(deviceArgs, nullptr));
      loss.requireMatch(1e-4);

      auto backward = [&](bool onDevice) {
        return CrossEntropyGradArgs{.logits = logits.in(onDevice),
                                    .labels = labels.on(onDevice),
                                    .dloss = dloss.on(onDevice),
                                    .dlogits = dlogits.out(onDevice),
                                    .numTokens = shape.numTokens,
                                    .vocab = shape.vocab,
                                    .validVocab = shape.validVocab};
      };
      cpu::crossEntropyGrad(backward(false));
      requireRan(cuda::crossEntropyGrad(backward(true), nullptr));
      dlogits.requireMatch(tolerance(dtype, 1e-4));
    }
}

TEST_CASE("cuda cross_entropy on model sizes matches a float64 cpu run and "
          "repeats its bits",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  // 8192 tokens of a 6400 vocabulary (the last 11 columns padding), with
  // ignored labels among them.
  const int64_t numTokens = 8192, vocab = 6400, validVocab = 6389;
  std::mt19937 rng(71);
  IntPair labels(mixedLabels(numTokens, validVocab, vocab, rng));
  for (DType dtype : kFloatTypes) {
    INFO("dtype " << dtypeName(dtype));
    Pair logits(dtype, randomValues(numTokens * vocab, rng, 4.0));
    ScalarPair loss;
    CrossEntropyArgs deviceArgs{.logits = logits.in(true),
                                .labels = labels.on(true),
                                .loss = loss.on(true),
                                .numTokens = numTokens,
                                .vocab = vocab,
                                .validVocab = validVocab};
    DeviceBuffer scratch(cuda::crossEntropyScratchBytes(deviceArgs));
    scratch.poison();
    deviceArgs.scratch = scratch.data();
    requireRan(cuda::crossEntropy(deviceArgs, nullptr));

    // The cpu kernel accumulates in float64 for f64 storage; the stored
    // values convert exactly.
    Tensor logits64(DType::F64, logits.host().values());
    cpu::crossEntropy({.logits = logits64.cview(),
                       .labels = labels.on(false),
                       .loss = loss.on(false),
                       .numTokens = numTokens,
                       .vocab = vocab,
                       .validVocab = validVocab});
    loss.requireMatch(1e-5);

    float first = loss.deviceValue();
    scratch.poison();
    requireRan(cuda::crossEntropy(deviceArgs, nullptr));
    float second = loss.deviceValue();
    REQUIRE(std::memcmp(&first, &second, sizeof(float)) == 0);
  }
}

TEST_CASE("cuda vocab-parallel loss kernels match the cpu on every shard",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  // localVocab 1000 of validVocab 2997: a full middle shard, the last shard
  // (997 real columns, 3 padded) and a shard of padding only.
  const int64_t numTokens = 37, localVocab = 1000, validVocab = 2997;
  std::mt19937 rng(68);
  ScalarPair dloss(0.75f);
  for (int64_t vocabStart : {1000, 2000, 3000})
    for (DType dtype : kFloatTypes) {
      INFO("vocab start " << vocabStart << ", logits " << dtypeName(dtype));
      // Labels in this shard, in others, ignored and past the vocabulary.
      std::vector<int32_t> labelValues =
          mixedLabels(numTokens, validVocab, validVocab + 3, rng);
      for (int64_t t = 0; t < numTokens; t += 4)
        labelValues[t] =
            static_cast<int32_t>(std::min(vocabStart + 5 * t, validVocab - 1));
      IntPair labels(labelValues);
      const int64_t numel = numTokens * localVocab;
      const bool isPadding = vocabStart >= validVocab;
      Pair logits(dtype, randomValues(numel, rng, 4.0)), dlogits(dtype, numel);
      Pair localMax(DType::F32, numTokens), target(DType::F32, numTokens),
          localSum(DType::F32, numTokens);
      auto shard = [&](auto args) {
        args.numTokens = numTokens;
        args.localVocab = localVocab;
        args.vocabStart = vocabStart;
        args.validVocab = validVocab;
        return args;
      };

      auto max = [&](bool onDevice) {
        return shard(VocabMaxArgs{.logits = logits.in(onDevice),
                                  .vocabMax = localMax.out(onDevice)});
      };
      cpu::vocabMax(max(false));
      requireRan(cuda::vocabMax(max(true), nullptr));
      std::vector<double> maxima = localMax.deviceCopy().values();
      if (isPadding)
        REQUIRE(std::all_of(maxima.begin(), maxima.end(), [](double value) {
          return std::isinf(value) && value < 0;
        }));
      else
        localMax.requireMatch(0.0);

      auto pick = [&](bool onDevice) {
        return shard(TargetLogitArgs{.logits = logits.in(onDevice),
                                     .labels = labels.on(onDevice),
                                     .targetLogit = target.out(onDevice)});
      };
      cpu::targetLogit(pick(false));
      requireRan(cuda::targetLogit(pick(true), nullptr));
      target.requireMatch(0.0);

      // All-reduced statistics as other ranks would raise them: M above the
      // local max, E and T with the other shards' shares.
      std::vector<double> globalMaxValues(numTokens);
      for (int64_t t = 0; t < numTokens; ++t)
        globalMaxValues[t] =
            (isPadding ? 1.0 : localMax.host().at(t)) + 0.25 * (t % 3);
      Pair globalMax(DType::F32, globalMaxValues);
      auto sum = [&](bool onDevice) {
        return shard(SumExpArgs{.logits = logits.in(onDevice),
                                .vocabMax = globalMax.in(onDevice),
                                .sumExp = localSum.out(onDevice)});
      };
      cpu::sumExp(sum(false));
      requireRan(cuda::sumExp(sum(true), nullptr));
      localSum.requireMatch(1e-4);

      std::vector<double> globalSumValues = localSum.host().values();
      for (double &value : globalSumValues)
        value += 1.5;
      Pair globalSum(DType::F32, globalSumValues);
      Pair globalTarget(DType::F32, randomValues(numTokens, rng, 3.0));
      ScalarPair loss;
      auto lossArgs = [&](bool onDevice) {
        return VocabParallelLossArgs{.labels = labels.on(onDevice),
                                     .vocabMax = globalMax.in(onDevice),
                                     .targetLogit = globalTarget.in(onDevice),
                                     .sumExp = globalSum.in(onDevice),
                                     .loss = loss.on(onDevice),
                                     .numTokens = numTokens,
                                     .validVocab = validVocab};
      };
      cpu::vocabParallelLoss(lossArgs(false));
      requireRan(cuda::vocabParallelLoss(lossArgs(true), nullptr));
      loss.requireMatch(1e-4);

      auto grad = [&](bool onDevice) {
        return shard(
            VocabParallelLossGradArgs{.logits = logits.in(onDevice),
                                      .labels = labels.on(onDevice),
                                      .vocabMax = globalMax.in(onDevice),
                                      .sumExp = globalSum.in(onDevice),
                                      .dloss = dloss.on(onDevice),
                                      .dlogits = dlogits.out(onDevice)});
      };
      cpu::vocabParallelLossGrad(grad(false));
      requireRan(cuda::vocabParallelLossGrad(grad(true), nullptr));
      dlogits.requireMatch(tolerance(dtype, 1e-5));
    }
}

TEST_CASE("cuda cross_entropy without its scratch is invalid input", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  float logit = 1.0f, loss = 0.0f;
  int32_t label = 0;
  CrossEntropyArgs args{.logits = {&logit, DType::F32},
                        .labels = &label,
                        .loss = &loss,
                        .numTokens = 1,
                        .vocab = 1,
                        .validVocab = 1};
  REQUIRE(cuda::crossEntropyScratchBytes(args) == 4);
  Status status = cuda::crossEntropy(args, nullptr);
  INFO(status.message());
  REQUIRE(status.code() == Status::Code::InvalidInput);
}

TEST_CASE("cuda valid_count and count_scale match the cpu", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(73);
  // More labels than the block has threads, and none at all.
  for (int64_t numTokens : {int64_t{5000}, int64_t{37}, int64_t{0}}) {
    INFO(numTokens << " labels");
    IntPair labels(
        mixedLabels(std::max<int64_t>(numTokens, 16), 997, 1000, rng));
    ScalarPair count;
    auto counting = [&](bool onDevice) {
      return ValidCountArgs{.labels = labels.on(onDevice),
                            .count = count.on(onDevice),
                            .numTokens = numTokens,
                            .validVocab = 997};
    };
    cpu::validCount(counting(false));
    requireRan(cuda::validCount(counting(true), nullptr));
    REQUIRE(count.deviceValue() == *count.on(false));
    ScalarPair x(1.75f), total(12345.0f), y;
    auto scaling = [&](bool onDevice) {
      return CountScaleArgs{.x = x.on(onDevice),
                            .labels = labels.on(onDevice),
                            .total = total.on(onDevice),
                            .y = y.on(onDevice),
                            .numTokens = numTokens,
                            .validVocab = 997};
    };
    cpu::countScale(scaling(false));
    requireRan(cuda::countScale(scaling(true), nullptr));
    REQUIRE(y.deviceValue() == Approx(*y.on(false)).epsilon(1e-6));
  }
}
