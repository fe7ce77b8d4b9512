//===- KernelsCudaOpsTest.cpp - the cuda kernels against the cpu ones -----===//
//
// Every cuda:: op runs on random non-zero inputs with odd shapes, in f32 and
// bf16, with its outputs poisoned (0xff bytes, NaN in both) before the
// launch, and must hold no NaN and match the cpu:: op on the same stored
// inputs: f32 within 1e-5 (1e-4 where a reduction runs in another order),
// bf16 outputs within 1e-2 of the cpu's bf16 outputs, and exactly where the
// kernel promises the cpu's bits. Each op's arguments are written once, as
// a function of the side (host or device) they point at. Exits 77 (ctest's
// skip code for this test) on a machine without a device.
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamW.h"
#include "kernels/CrossEntropy.h"
#include "kernels/Elementwise.h"
#include "kernels/Embedding.h"
#include "kernels/RmsNorm.h"
#include "kernels/Rope.h"
#include "kernels/VocabParallelLoss.h"
#include "kernels/cuda/DeviceInfo.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <random>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::maxRelativeError;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;

namespace {

constexpr DType kFloatTypes[] = {DType::F32, DType::BF16};

void requireCuda(cudaError_t error) {
  INFO("CUDA: " << cudaGetErrorString(error));
  REQUIRE(error == cudaSuccess);
}

/// A launch that returned ok and ran to completion without a CUDA error.
void requireRan(const Status &status) {
  INFO(status.message());
  REQUIRE(status.isOk());
  requireCuda(cudaDeviceSynchronize());
}

/// Device memory, freed on every path out of a test (REQUIRE throws).
class DeviceBuffer {
public:
  explicit DeviceBuffer(int64_t numBytes) : numBytes_(numBytes) {
    requireCuda(cudaMalloc(&data_, std::max<int64_t>(numBytes, 1)));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  void *data() const { return data_; }
  void upload(const void *host) {
    requireCuda(cudaMemcpy(data_, host, numBytes_, cudaMemcpyHostToDevice));
  }
  void download(void *host) const {
    requireCuda(cudaMemcpy(host, data_, numBytes_, cudaMemcpyDeviceToHost));
  }
  /// 0xff bytes are NaN in f32 and bf16, so an element a kernel skips shows.
  void poison() { requireCuda(cudaMemset(data_, 0xff, numBytes_)); }

private:
  void *data_ = nullptr;
  int64_t numBytes_;
};

/// No NaN in the device result, and its normwise relative error against the
/// cpu's within `maxError` (0: the same values).
void requireClose(const Tensor &actual, const Tensor &expected,
                  double maxError) {
  std::vector<double> actualValues = actual.values();
  auto firstNan = std::find_if(actualValues.begin(), actualValues.end(),
                               [](double value) { return std::isnan(value); });
  INFO("first NaN at element " << (firstNan - actualValues.begin()));
  REQUIRE(firstNan == actualValues.end());
  double error = maxRelativeError(actualValues, expected.values());
  INFO("max relative error " << error << ", allowed " << maxError);
  REQUIRE(error <= maxError);
}

double tolerance(DType dtype, double f32Tolerance) {
  return dtype == DType::BF16 ? 1e-2 : f32Tolerance;
}

/// One tensor on both sides: host storage for the cpu op and a device twin
/// for the cuda op, `offset` elements into its buffer (1 defeats the
/// kernels' vector paths). An output's device side starts poisoned.
class Pair {
public:
  Pair(DType dtype, const std::vector<double> &values, int64_t offset = 0)
      : Pair(dtype, static_cast<int64_t>(values.size()), offset) {
    host_ = Tensor(dtype, values);
    requireCuda(cudaMemcpy(deviceAddress(), host_.cview().data, numBytes(),
                           cudaMemcpyHostToDevice));
  }
  Pair(DType dtype, int64_t numel, int64_t offset = 0)
      : host_(dtype, numel), offset_(offset),
        buffer_((numel + offset) * dtypeSize(dtype)) {
    buffer_.poison();
  }

  ConstTensorView in(bool onDevice) const {
    return onDevice ? ConstTensorView{deviceAddress(), dtype()} : host_.cview();
  }
  TensorView out(bool onDevice) {
    return onDevice ? TensorView{deviceAddress(), dtype()} : host_.view();
  }
  const Tensor &host() const { return host_; }
  Tensor deviceCopy() const {
    Tensor copy(dtype(), host_.numel());
    requireCuda(cudaMemcpy(copy.view().data, deviceAddress(), numBytes(),
                           cudaMemcpyDeviceToHost));
    return copy;
  }
  /// The device side against the host side.
  void requireMatch(double maxError) const {
    requireClose(deviceCopy(), host_, maxError);
  }

private:
  DType dtype() const { return host_.cview().dtype; }
  int64_t numBytes() const { return host_.numel() * dtypeSize(dtype()); }
  void *deviceAddress() const {
    return static_cast<char *>(buffer_.data()) + offset_ * dtypeSize(dtype());
  }

  Tensor host_;
  int64_t offset_;
  DeviceBuffer buffer_;
};

/// int32 ids or labels on both sides.
class IntPair {
public:
  explicit IntPair(std::vector<int32_t> values)
      : host_(std::move(values)),
        device_(static_cast<int64_t>(host_.size() * sizeof(int32_t))) {
    device_.upload(host_.data());
  }
  const int32_t *on(bool onDevice) const {
    return onDevice ? static_cast<const int32_t *>(device_.data())
                    : host_.data();
  }
  int64_t size() const { return static_cast<int64_t>(host_.size()); }

private:
  std::vector<int32_t> host_;
  DeviceBuffer device_;
};

/// An fp32 scalar on both sides (a loss, or dloss); the device side starts
/// poisoned or holding `value`.
class ScalarPair {
public:
  explicit ScalarPair(float value = NAN) : host_(value), device_(4) {
    device_.upload(&host_);
  }
  float *on(bool onDevice) {
    return onDevice ? static_cast<float *>(device_.data()) : &host_;
  }
  void requireMatch(double maxError) const {
    float actual = NAN;
    device_.download(&actual);
    INFO("device " << actual << ", cpu " << host_);
    REQUIRE(!std::isnan(actual));
    REQUIRE(std::abs(actual - host_) <= maxError * std::abs(host_));
  }

private:
  float host_;
  DeviceBuffer device_;
};

} // namespace

TEST_CASE("cuda add, swiglu and swiglu_grad match the cpu", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(61);
  const int64_t numel = 1001; // vectors of 4, then a tail of 1
  for (DType dtype : kFloatTypes) {
    INFO("dtype " << dtypeName(dtype));
    Pair a(dtype, randomValues(numel, rng)), b(dtype, randomValues(numel, rng));
    Pair dy(dtype, randomValues(numel, rng));
    Pair sum(dtype, numel), y(dtype, numel), dgate(dtype, numel),
        dup(dtype, numel);
    auto add = [&](bool onDevice) {
      return AddArgs{.a = a.in(onDevice),
                     .b = b.in(onDevice),
                     .y = sum.out(onDevice),
                     .numel = numel};
    };
    cpu::add(add(false));
    requireRan(cuda::add(add(true), nullptr));
    sum.requireMatch(0.0);

    auto swiglu = [&](bool onDevice) {
      return SwigluArgs{.gate = a.in(onDevice),
                        .up = b.in(onDevice),
                        .y = y.out(onDevice),
                        .numel = numel};
    };
    cpu::swiglu(swiglu(false));
    requireRan(cuda::swiglu(swiglu(true), nullptr));
    y.requireMatch(tolerance(dtype, 1e-5));

    auto grad = [&](bool onDevice) {
      return SwigluGradArgs{.gate = a.in(onDevice),
                            .up = b.in(onDevice),
                            .dy = dy.in(onDevice),
                            .dgate = dgate.out(onDevice),
                            .dup = dup.out(onDevice),
                            .numel = numel};
    };
    cpu::swigluGrad(grad(false));
    requireRan(cuda::swigluGrad(grad(true), nullptr));
    dgate.requireMatch(tolerance(dtype, 1e-5));
    dup.requireMatch(tolerance(dtype, 1e-5));
  }
}

TEST_CASE("cuda add takes mixed dtypes, unaligned views and y aliasing b",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(62);
  const int64_t numel = 999;
  const std::vector<double> aValues = randomValues(numel, rng),
                            bValues = randomValues(numel, rng);
  SECTION("bf16 + f32 into f32, every view one element off alignment") {
    Pair a(DType::BF16, aValues, 1), b(DType::F32, bValues, 1),
        y(DType::F32, numel, 1);
    auto args = [&](bool onDevice) {
      return AddArgs{.a = a.in(onDevice),
                     .b = b.in(onDevice),
                     .y = y.out(onDevice),
                     .numel = numel};
    };
    cpu::add(args(false));
    requireRan(cuda::add(args(true), nullptr));
    y.requireMatch(0.0);
  }
  SECTION("in place: y is b") {
    Pair a(DType::F32, aValues), b(DType::F32, bValues);
    auto args = [&](bool onDevice) {
      return AddArgs{.a = a.in(onDevice),
                     .b = b.in(onDevice),
                     .y = b.out(onDevice),
                     .numel = numel};
    };
    cpu::add(args(false));
    requireRan(cuda::add(args(true), nullptr));
    b.requireMatch(0.0);
  }
}

TEST_CASE("cuda fill and scale store the cpu's bits", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  std::mt19937 rng(63);
  const int64_t numel = 1003;
  for (DType dtype : {DType::F32, DType::BF16, DType::I32}) {
    INFO("dtype " << dtypeName(dtype));
    Pair out(dtype, numel);
    auto fill = [&](bool onDevice) {
      return FillArgs{.out = out.out(onDevice),
                      .numel = numel,
                      .value = dtype == DType::I32 ? -2.7 : 0.3};
    };
    cpu::fill(fill(false));
    requireRan(cuda::fill(fill(true), nullptr));
    out.requireMatch(0.0);
  }
  for (DType xType : kFloatTypes)
    for (DType yType : kFloatTypes) {
      INFO("x " << dtypeName(xType) << ", y " << dtypeName(yType));
      Pair x(xType, randomValues(numel, rng)), y(yType, numel);
      auto scale = [&](bool onDevice) {
        return ScaleArgs{.x = x.in(onDevice),
                         .y = y.out(onDevice),
                         .numel = numel,
                         .factor = 0.37};
      };
      cpu::scale(scale(false));
      requireRan(cuda::scale(scale(true), nullptr));
      y.requireMatch(0.0);
    }
}

TEST_CASE("cuda rms_norm and its grad match the cpu for every group size",
          "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Shape {
    int64_t rows, cols, groupSize;
  };
  // Whole rows and per-head groups; teams of 32 to 1024 threads; more
  // units than the dw cluster has teams.
  const Shape shapes[] = {
      {37, 129, 129}, {37, 129, 43}, {300, 64, 16}, {5, 5000, 5000}, {3, 9, 3}};
  std::mt19937 rng(64);
  for (const Shape &shape : shapes)
    for (DType dtype : kFloatTypes) {
      INFO("rows " << shape.rows << ", cols " << shape.cols << ", group "
                   << shape.groupSize << ", dtype " << dtypeName(dtype));
      const int64_t numel = shape.rows * shape.cols;
      Pair x(dtype, randomValues(numel, rng));
      Pair w(dtype, randomValues(shape.groupSize, rng));
      Pair dy(dtype, randomValues(numel, rng));
      Pair y(dtype, numel), dx(dtype, numel), dw(dtype, shape.groupSize);
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

      // On the device dx is written over dy, as the executor may place it.
      auto backward = [&](bool onDevice) {
        return RmsNormGradArgs{.x = x.in(onDevice),
                               .w = w.in(onDevice),
                               .dy = dy.in(onDevice),
                               .dx = onDevice ? dy.out(true) : dx.out(false),
                               .dw = dw.out(onDevice),
                               .rows = shape.rows,
                               .cols = shape.cols,
                               .groupSize = shape.groupSize};
      };
      cpu::rmsNormGrad(backward(false));
      requireRan(cuda::rmsNormGrad(backward(true), nullptr));
      requireClose(dy.deviceCopy(), dx.host(), tolerance(dtype, 1e-4));
      dw.requireMatch(tolerance(dtype, 1e-4));
    }
}

TEST_CASE("cuda rope matches the cpu forward and inverse", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Shape {
    int64_t seqLen, batch, numHeads, headDim, positionOffset;
    double theta;
  };
  // 17 pairs per head (not a warp), an odd head dim, and large angles.
  const Shape shapes[] = {{37, 3, 5, 34, 0, 1e6},
                          {11, 2, 3, 7, 100, 1e4},
                          {9, 1, 2, 128, 5000, 1e6}};
  std::mt19937 rng(65);
  for (const Shape &shape : shapes)
    for (DType dtype : kFloatTypes)
      for (bool inverse : {false, true}) {
        INFO("head dim " << shape.headDim << ", dtype " << dtypeName(dtype)
                         << ", inverse " << inverse);
        const int64_t numel =
            shape.seqLen * shape.batch * shape.numHeads * shape.headDim;
        Pair x(dtype, randomValues(numel, rng)), y(dtype, numel);
        // In place on the device, as the backward may run.
        auto args = [&](bool onDevice) {
          return RopeArgs{.x = x.in(onDevice),
                          .y = onDevice ? x.out(true) : y.out(false),
                          .seqLen = shape.seqLen,
                          .batch = shape.batch,
                          .numHeads = shape.numHeads,
                          .headDim = shape.headDim,
                          .positionOffset = shape.positionOffset,
                          .theta = shape.theta,
                          .inverse = inverse};
        };
        cpu::rope(args(false));
        requireRan(cuda::rope(args(true), nullptr));
        requireClose(x.deviceCopy(), y.host(), tolerance(dtype, 1e-5));
      }
}

namespace {

/// Ids spread over the shard and a margin of other shards' ids around it.
std::vector<int32_t> spreadIds(int64_t numTokens, int64_t vocabStart,
                               int64_t numRows, std::mt19937 &rng) {
  std::uniform_int_distribution<int64_t> pick(
      std::max<int64_t>(0, vocabStart - 50), vocabStart + numRows + 50);
  std::vector<int32_t> ids(numTokens);
  for (int32_t &id : ids)
    id = static_cast<int32_t>(pick(rng));
  return ids;
}

/// 4500 hits on local row 7 (more than one block's token list holds),
/// 1500 each on rows 3 and 5 (a block's rows need several batches), and
/// 1500 spread, shuffled.
std::vector<int32_t> skewedIds(int64_t vocabStart, int64_t numRows,
                               std::mt19937 &rng) {
  std::vector<int32_t> ids = spreadIds(1500, vocabStart, numRows, rng);
  ids.insert(ids.end(), 4500, static_cast<int32_t>(vocabStart + 7));
  ids.insert(ids.end(), 1500, static_cast<int32_t>(vocabStart + 3));
  ids.insert(ids.end(), 1500, static_cast<int32_t>(vocabStart + 5));
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

} // namespace

TEST_CASE("cuda embedding and its grad equal the cpu's bits", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Case {
    const char *name;
    int64_t numRows, hidden, vocabStart;
    std::vector<int32_t> ids;
  };
  std::mt19937 rng(66);
  const std::vector<Case> cases = {
      {"vectorised, vocab-parallel shard", 1000, 132, 500,
       spreadIds(777, 500, 1000, rng)},
      {"scalar hidden", 37, 129, 3, spreadIds(300, 3, 37, rng)},
      {"three hidden tiles, two row tiles", 600, 2100, 0,
       spreadIds(2000, 0, 600, rng)},
      {"skewed ids, scalar", 37, 129, 10, skewedIds(10, 37, rng)},
      {"skewed ids, two hidden tiles", 37, 1032, 10, skewedIds(10, 37, rng)}};
  for (const Case &c : cases)
    for (DType dtype : kFloatTypes) {
      INFO(c.name << ", dtype " << dtypeName(dtype));
      IntPair ids(c.ids);
      const int64_t tableNumel = c.numRows * c.hidden;
      const int64_t outNumel = ids.size() * c.hidden;
      Pair table(dtype, randomValues(tableNumel, rng)), out(dtype, outNumel);
      Pair dout(dtype, randomValues(outNumel, rng)), dtable(dtype, tableNumel);
      auto forward = [&](bool onDevice) {
        return EmbeddingArgs{.table = table.in(onDevice),
                             .ids = ids.on(onDevice),
                             .out = out.out(onDevice),
                             .numTokens = ids.size(),
                             .numRows = c.numRows,
                             .hidden = c.hidden,
                             .vocabStart = c.vocabStart};
      };
      cpu::embedding(forward(false));
      requireRan(cuda::embedding(forward(true), nullptr));
      out.requireMatch(0.0);

      auto backward = [&](bool onDevice) {
        return EmbeddingGradArgs{.dout = dout.in(onDevice),
                                 .ids = ids.on(onDevice),
                                 .dtable = dtable.out(onDevice),
                                 .numTokens = ids.size(),
                                 .numRows = c.numRows,
                                 .hidden = c.hidden,
                                 .vocabStart = c.vocabStart};
      };
      cpu::embeddingGrad(backward(false));
      requireRan(cuda::embeddingGrad(backward(true), nullptr));
      // Same additions in the same (token) order: the same bits.
      dtable.requireMatch(0.0);
    }
}

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
  const Shape shapes[] = {
      {37, 1000, 997, false}, {19, 7001, 6999, false}, {5, 300, 299, true}};
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
      cpu::crossEntropy(forward(false));
      requireRan(cuda::crossEntropy(forward(true), nullptr));
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

TEST_CASE("cuda adamw equals the cpu's bits in every storage mix", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  struct Mix {
    DType param, moments, grad;
  };
  // Pure f32, pure bf16 (bf16 moments) and f32 master weights, bf16 grads.
  const Mix mixes[] = {{DType::F32, DType::F32, DType::F32},
                       {DType::BF16, DType::BF16, DType::BF16},
                       {DType::F32, DType::F32, DType::BF16}};
  const int64_t numel = 1001;
  std::mt19937 rng(69);
  for (const Mix &mix : mixes)
    for (int64_t offset : {0, 1}) {
      INFO("param " << dtypeName(mix.param) << ", moments "
                    << dtypeName(mix.moments) << ", grad "
                    << dtypeName(mix.grad) << ", offset " << offset);
      std::vector<double> vValues = randomValues(numel, rng, 0.01);
      for (double &value : vValues)
        value = std::abs(value);
      Pair param(mix.param, randomValues(numel, rng), offset);
      Pair m(mix.moments, randomValues(numel, rng, 0.1), offset);
      Pair v(mix.moments, vValues, offset);
      Pair grad(mix.grad, randomValues(numel, rng), offset);
      auto args = [&](bool onDevice) {
        return AdamWArgs{.param = param.out(onDevice),
                         .m = m.out(onDevice),
                         .v = v.out(onDevice),
                         .grad = grad.in(onDevice),
                         .numel = numel,
                         .step = 3,
                         .lr = 1e-3,
                         .weightDecay = 0.1};
      };
      cpu::adamw(args(false));
      requireRan(cuda::adamw(args(true), nullptr));
      param.requireMatch(0.0);
      m.requireMatch(0.0);
      v.requireMatch(0.0);
    }
}

TEST_CASE("cuda kernels reject f64 and i32 storage as invalid input", "[gpu]") {
  if (sharc::kernels::cuda::deviceCount() == 0)
    std::exit(77);
  double hostValue = 1.0;
  TensorView f64{&hostValue, DType::F64}, i32{&hostValue, DType::I32},
      f32{&hostValue, DType::F32};
  Status add = cuda::add({.a = f64, .b = f64, .y = f64, .numel = 1}, nullptr);
  INFO(add.message());
  REQUIRE(add.code() == Status::Code::InvalidInput);
  Status norm = cuda::rmsNorm(
      {.x = i32, .w = f32, .y = f32, .rows = 1, .cols = 1, .groupSize = 1},
      nullptr);
  REQUIRE(norm.code() == Status::Code::InvalidInput);
  Status fill = cuda::fill({.out = f64, .numel = 1}, nullptr);
  REQUIRE(fill.code() == Status::Code::InvalidInput);
}
