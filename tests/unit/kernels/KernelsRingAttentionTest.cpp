//===- KernelsRingAttentionTest.cpp - key blocks, lse merge, dlse ---------===//
//
// Ring attention's kernels on the cpu: attention of a query block on one
// key block (keyStart), the log-sum-exp merge of such partials and both
// backwards. The merged blocks must give whole-sequence attention (rows of
// the kernel KernelsAttentionTest pins to a float64 loop), and every
// gradient is checked against finite differences: the block's dlse path
// and the merge's, whose lse inputs and outputs are f32.
//
//===----------------------------------------------------------------------===//

#include "kernels/Attention.h"
#include "kernels/LseMerge.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::maxRelativeError;
using sharc::kernels::test::numericGradient;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;
using sharc::kernels::test::weightedSum;

namespace {

// Three blocks of two positions; 4 query heads over 2 KV heads.
constexpr int64_t kBlocks = 3, kBlockLen = 2, kSeqLen = kBlocks * kBlockLen;
constexpr int64_t kBatch = 2, kHeads = 4, kKvHeads = 2, kDim = 4;
constexpr int64_t kRowQ = kBatch * kHeads * kDim,
                  kRowKv = kBatch * kKvHeads * kDim;
constexpr int64_t kLseBlock = kBatch * kHeads * kBlockLen;
const DType kF64 = DType::F64;

/// Rows [first, first + count) of a sequence-first tensor of `rowNumel`.
std::vector<double> rowsOf(const std::vector<double> &all, int64_t first,
                           int64_t count, int64_t rowNumel) {
  return {all.begin() + first * rowNumel,
          all.begin() + (first + count) * rowNumel};
}

struct Partial {
  Tensor out;
  std::vector<float> lse;
};

/// Query block `qBlock` on key block `kBlock` (k, v hold that block only).
Partial blockAttention(const std::vector<double> &q,
                       const std::vector<double> &k,
                       const std::vector<double> &v, int64_t qBlock,
                       int64_t kBlock) {
  Partial result{Tensor(kF64, kBlockLen * kRowQ),
                 std::vector<float>(kLseBlock)};
  Tensor qt(kF64, q), kt(kF64, k), vt(kF64, v);
  cpu::attention({.q = qt.cview(),
                  .k = kt.cview(),
                  .v = vt.cview(),
                  .out = result.out.view(),
                  .lse = result.lse.data(),
                  .seqLen = kBlockLen,
                  .batch = kBatch,
                  .numHeads = kHeads,
                  .numKvHeads = kKvHeads,
                  .headDim = kDim,
                  .kvSeqLen = kBlockLen,
                  .queryStart = qBlock * kBlockLen,
                  .keyStart = kBlock * kBlockLen});
  return result;
}

Partial merge(const Partial &a, const Partial &b) {
  Partial result{Tensor(kF64, a.out.numel()), std::vector<float>(a.lse.size())};
  cpu::lseMerge({.outA = a.out.cview(),
                 .outB = b.out.cview(),
                 .lseA = a.lse.data(),
                 .lseB = b.lse.data(),
                 .out = result.out.view(),
                 .lse = result.lse.data(),
                 .seqLen = kBlockLen,
                 .batch = kBatch,
                 .numHeads = kHeads,
                 .headDim = kDim});
  return result;
}

std::vector<double> widen(const std::vector<float> &values) {
  return {values.begin(), values.end()};
}

} // namespace

TEST_CASE("key blocks merged by log-sum-exp are attention over every key",
          "[kernels]") {
  std::mt19937 rng(41);
  auto q = randomValues(kSeqLen * kRowQ, rng, 2.0);
  auto k = randomValues(kSeqLen * kRowKv, rng, 2.0);
  auto v = randomValues(kSeqLen * kRowKv, rng);
  for (int64_t r = 0; r < kBlocks; ++r) {
    INFO("query block " << r);
    auto qBlock = rowsOf(q, r * kBlockLen, kBlockLen, kRowQ);
    // The K/V all-gather's kernel: the block against the whole sequence.
    Tensor qt(kF64, qBlock), kt(kF64, k), vt(kF64, v);
    Partial whole{Tensor(kF64, kBlockLen * kRowQ),
                  std::vector<float>(kLseBlock)};
    cpu::attention({.q = qt.cview(),
                    .k = kt.cview(),
                    .v = vt.cview(),
                    .out = whole.out.view(),
                    .lse = whole.lse.data(),
                    .seqLen = kBlockLen,
                    .batch = kBatch,
                    .numHeads = kHeads,
                    .numKvHeads = kKvHeads,
                    .headDim = kDim,
                    .kvSeqLen = kSeqLen,
                    .queryStart = r * kBlockLen});
    // The ring's order: the own (causal) block first, then earlier ones.
    auto block = [&](int64_t c) {
      return blockAttention(qBlock, rowsOf(k, c * kBlockLen, kBlockLen, kRowKv),
                            rowsOf(v, c * kBlockLen, kBlockLen, kRowKv), r, c);
    };
    Partial merged = block(r);
    for (int64_t c = r - 1; c >= 0; --c)
      merged = merge(merged, block(c));
    // A later block is seen by no query: zeros, and a weight of 0.
    if (r + 1 < kBlocks) {
      Partial later = block(r + 1);
      for (int64_t i = 0; i < later.out.numel(); ++i)
        REQUIRE(later.out.at(i) == 0.0);
      for (float lse : later.lse)
        REQUIRE(lse == kEmptyRowLse);
      merged = merge(merged, later);
    }
    REQUIRE(maxRelativeError(merged.out.values(), whole.out.values()) < 1e-6);
    REQUIRE(maxRelativeError(widen(merged.lse), widen(whole.lse)) < 1e-6);
  }
}

TEST_CASE("an attention block's gradient, dlse included, matches finite "
          "differences",
          "[kernels]") {
  std::mt19937 rng(42);
  auto q = randomValues(kBlockLen * kRowQ, rng, 2.0);
  auto k = randomValues(kBlockLen * kRowKv, rng, 2.0);
  auto v = randomValues(kBlockLen * kRowKv, rng);
  auto dout = randomValues(kBlockLen * kRowQ, rng);
  auto dlse = randomValues(kLseBlock, rng);
  std::vector<float> dlseF(dlse.begin(), dlse.end());
  // Query block 2 on key block 1 (all keys seen) and on block 2 (causal).
  for (int64_t kBlock : {1, 2}) {
    INFO("key block " << kBlock);
    Partial forward = blockAttention(q, k, v, 2, kBlock);
    Tensor qt(kF64, q), kt(kF64, k), vt(kF64, v), dt(kF64, dout);
    Tensor dq(kF64, q.size()), dk(kF64, k.size()), dv(kF64, v.size());
    cpu::attentionGrad({.q = qt.cview(),
                        .k = kt.cview(),
                        .v = vt.cview(),
                        .out = forward.out.cview(),
                        .dout = dt.cview(),
                        .lse = forward.lse.data(),
                        .dlse = dlseF.data(),
                        .dq = dq.view(),
                        .dk = dk.view(),
                        .dv = dv.view(),
                        .seqLen = kBlockLen,
                        .batch = kBatch,
                        .numHeads = kHeads,
                        .numKvHeads = kKvHeads,
                        .headDim = kDim,
                        .kvSeqLen = kBlockLen,
                        .queryStart = 2 * kBlockLen,
                        .keyStart = kBlock * kBlockLen});
    auto objective = [&](const std::vector<double> &qs,
                         const std::vector<double> &ks,
                         const std::vector<double> &vs) {
      Partial p = blockAttention(qs, ks, vs, 2, kBlock);
      return weightedSum(dout, p.out.values()) +
             weightedSum(dlse, widen(p.lse));
    };
    // lse is stored in f32: a wide step keeps its rounding (~1e-7 per row)
    // small against the difference; a dropped dlse term would be O(1).
    const double step = 1.0 / 256;
    auto numericDq = numericGradient(
        q, [&](const auto &x) { return objective(x, k, v); }, step);
    auto numericDk = numericGradient(
        k, [&](const auto &x) { return objective(q, x, v); }, step);
    auto numericDv = numericGradient(
        v, [&](const auto &x) { return objective(q, k, x); }, step);
    CHECK(maxRelativeError(dq.values(), numericDq) < 1e-3);
    CHECK(maxRelativeError(dk.values(), numericDk) < 1e-3);
    CHECK(maxRelativeError(dv.values(), numericDv) < 1e-3);
  }
}

TEST_CASE("lse_merge's gradient for each part matches finite differences",
          "[kernels]") {
  std::mt19937 rng(43);
  const int64_t numel = kBlockLen * kRowQ;
  auto outA = randomValues(numel, rng), outB = randomValues(numel, rng);
  // lse inputs are f32: multiples of 2^-10, so lse +- step is exact.
  auto onGrid = [](std::vector<double> values) {
    for (double &value : values)
      value = std::round(value * 1024) / 1024;
    return values;
  };
  auto lseA = onGrid(randomValues(kLseBlock, rng, 2.0));
  auto lseB = onGrid(randomValues(kLseBlock, rng, 2.0));
  lseB[3] = kEmptyRowLse; // a row the second part never saw
  auto dout = randomValues(numel, rng), dlse = randomValues(kLseBlock, rng);
  auto toFloat = [](const std::vector<double> &values) {
    return std::vector<float>(values.begin(), values.end());
  };
  auto objective = [&](const std::vector<double> &oa,
                       const std::vector<double> &la,
                       const std::vector<double> &ob,
                       const std::vector<double> &lb) {
    Partial m =
        merge({Tensor(kF64, oa), toFloat(la)}, {Tensor(kF64, ob), toFloat(lb)});
    return weightedSum(dout, m.out.values()) + weightedSum(dlse, widen(m.lse));
  };
  Partial a{Tensor(kF64, outA), toFloat(lseA)};
  Partial b{Tensor(kF64, outB), toFloat(lseB)};
  Partial merged = merge(a, b);
  Tensor doutT(kF64, dout);
  std::vector<float> dlseF = toFloat(dlse);
  const double step = 1.0 / 256; // lse's f32 rounding, as above
  for (int part = 0; part < 2; ++part) {
    INFO("part " << (part == 0 ? "a" : "b"));
    const Partial &mine = part == 0 ? a : b;
    Tensor dpart(kF64, numel);
    std::vector<float> dlsePart(kLseBlock);
    cpu::lseMergeGrad({.part = mine.out.cview(),
                       .out = merged.out.cview(),
                       .dout = doutT.cview(),
                       .lsePart = mine.lse.data(),
                       .lse = merged.lse.data(),
                       .dlse = dlseF.data(),
                       .dpart = dpart.view(),
                       .dlsePart = dlsePart.data(),
                       .seqLen = kBlockLen,
                       .batch = kBatch,
                       .numHeads = kHeads,
                       .headDim = kDim});
    auto numericOut = numericGradient(
        part == 0 ? outA : outB,
        [&](const auto &x) {
          return part == 0 ? objective(x, lseA, outB, lseB)
                           : objective(outA, lseA, x, lseB);
        },
        step);
    auto numericLse = numericGradient(
        part == 0 ? lseA : lseB,
        [&](const auto &x) {
          return part == 0 ? objective(outA, x, outB, lseB)
                           : objective(outA, lseA, outB, x);
        },
        step);
    CHECK(maxRelativeError(dpart.values(), numericOut) < 1e-3);
    CHECK(maxRelativeError(widen(dlsePart), numericLse) < 1e-3);
  }
}
