//===- KernelsRingAttentionTest.cpp - key blocks, lse merge, dlse ---------===//
//
// Ring attention's kernels on the cpu: attention of a query block on one
// key block (keyStart), the log-sum-exp merge of such partials and both
// backwards. The merged blocks must give whole-sequence attention (rows of
// the kernel KernelsAttentionTest pins to a float64 loop), and every
// gradient is checked against finite differences: the block's dlse path
// and the merge's, whose lse inputs and outputs are f32. Under the balanced
// split queries and keys are two chunks each: the blocks of every rank
// round the full ring must give a float64 loop's attention over the whole
// sequence, with rows that see no key empty, and the gradient of such a
// block must match finite differences.
//
//===----------------------------------------------------------------------===//

#include "kernels/Attention.h"
#include "kernels/LseMerge.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <algorithm>
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
  cpu::lseMerge(
      {.outA = a.out.cview(),
       .outB = b.out.cview(),
       .lseA = a.lse.data(),
       .lseB = b.lse.data(),
       .out = result.out.view(),
       .lse = result.lse.data(),
       .seqLen = static_cast<int64_t>(a.lse.size()) / (kBatch * kHeads),
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

//===----------------------------------------------------------------------===//
// The balanced split (kernels/SequencePositions.h): rank r's block is chunks
// r and 2C-1-r, and so is every K/V block that comes round the ring.
//===----------------------------------------------------------------------===//

namespace {

constexpr int64_t kChunk = 2, kBalancedLen = 2 * kChunk;
constexpr int64_t kBalancedLse = kBatch * kHeads * kBalancedLen;

/// Rank `rank`'s rows (chunks rank, 2 size - 1 - rank) of a natural-order
/// sequence-first tensor.
std::vector<double> balancedRows(const std::vector<double> &all, int64_t size,
                                 int64_t rank, int64_t rowNumel) {
  auto rows = rowsOf(all, rank * kChunk, kChunk, rowNumel);
  auto late = rowsOf(all, (2 * size - 1 - rank) * kChunk, kChunk, rowNumel);
  rows.insert(rows.end(), late.begin(), late.end());
  return rows;
}

/// Rank `rank`'s query block on the K/V block of rank `keyRank`, both
/// balanced.
Partial balancedBlock(const std::vector<double> &q,
                      const std::vector<double> &k,
                      const std::vector<double> &v, int64_t size, int64_t rank,
                      int64_t keyRank) {
  RowPositions queries =
      rowPositions(SequenceSplit::Balanced, rank, size, kBalancedLen);
  RowPositions keys =
      rowPositions(SequenceSplit::Balanced, keyRank, size, kBalancedLen);
  Partial result{Tensor(kF64, kBalancedLen * kRowQ),
                 std::vector<float>(kBalancedLse)};
  Tensor qt(kF64, q), kt(kF64, k), vt(kF64, v);
  cpu::attention({.q = qt.cview(),
                  .k = kt.cview(),
                  .v = vt.cview(),
                  .out = result.out.view(),
                  .lse = result.lse.data(),
                  .seqLen = kBalancedLen,
                  .batch = kBatch,
                  .numHeads = kHeads,
                  .numKvHeads = kKvHeads,
                  .headDim = kDim,
                  .kvSeqLen = kBalancedLen,
                  .queryStart = queries.start,
                  .keyStart = keys.start,
                  .querySecondRow = queries.secondRow,
                  .querySecondStart = queries.secondStart,
                  .keySecondRow = keys.secondRow,
                  .keySecondStart = keys.secondStart});
  return result;
}

/// Float64 causal attention of `numRows` query rows at `positions` on the
/// natural-order keys (key j at position j): out and lse, as the header's
/// formulas read, with no kernel in between.
std::pair<std::vector<double>, std::vector<double>>
referenceAttention(const std::vector<double> &q, const RowPositions &positions,
                   int64_t numRows, const std::vector<double> &k,
                   const std::vector<double> &v) {
  std::vector<double> out(numRows * kRowQ, 0.0);
  std::vector<double> lse(kBatch * kHeads * numRows);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t h = 0; h < kHeads; ++h) {
      int64_t kvHead = h / (kHeads / kKvHeads);
      for (int64_t i = 0; i < numRows; ++i) {
        std::vector<double> scores;
        for (int64_t j = 0; j <= positions.at(i); ++j) {
          double dot = 0;
          for (int64_t d = 0; d < kDim; ++d)
            dot += q[((i * kBatch + b) * kHeads + h) * kDim + d] *
                   k[((j * kBatch + b) * kKvHeads + kvHead) * kDim + d];
          scores.push_back(dot / std::sqrt(double(kDim)));
        }
        double top = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double score : scores)
          sum += std::exp(score - top);
        double rowLse = top + std::log(sum);
        lse[(b * kHeads + h) * numRows + i] = rowLse;
        for (int64_t j = 0; j < static_cast<int64_t>(scores.size()); ++j)
          for (int64_t d = 0; d < kDim; ++d)
            out[((i * kBatch + b) * kHeads + h) * kDim + d] +=
                std::exp(scores[j] - rowLse) *
                v[((j * kBatch + b) * kKvHeads + kvHead) * kDim + d];
      }
    }
  return {out, lse};
}

} // namespace

TEST_CASE("balanced blocks round the full ring are attention over every key",
          "[kernels]") {
  std::mt19937 rng(44);
  for (int64_t size : {2, 3}) {
    const int64_t seqLen = 2 * size * kChunk;
    auto q = randomValues(seqLen * kRowQ, rng, 2.0);
    auto k = randomValues(seqLen * kRowKv, rng, 2.0);
    auto v = randomValues(seqLen * kRowKv, rng);
    for (int64_t rank = 0; rank < size; ++rank) {
      INFO("cp " << size << ", rank " << rank);
      auto qRows = balancedRows(q, size, rank, kRowQ);
      auto [wantOut, wantLse] = referenceAttention(
          qRows,
          rowPositions(SequenceSplit::Balanced, rank, size, kBalancedLen),
          kBalancedLen, k, v);
      // Step t holds the block of rank - t mod size: every rank's, own first.
      auto block = [&](int64_t keyRank) {
        return balancedBlock(qRows, balancedRows(k, size, keyRank, kRowKv),
                             balancedRows(v, size, keyRank, kRowKv), size, rank,
                             keyRank);
      };
      Partial merged = block(rank);
      for (int64_t step = 1; step < size; ++step) {
        int64_t keyRank = (rank - step + size) % size;
        Partial next = block(keyRank);
        // A later rank's block holds keys after every query of the early
        // chunk: those rows see none (out 0, lse kEmptyRowLse).
        if (keyRank > rank)
          for (int64_t b = 0; b < kBatch; ++b)
            for (int64_t h = 0; h < kHeads; ++h)
              for (int64_t i = 0; i < kChunk; ++i) {
                REQUIRE(next.lse[(b * kHeads + h) * kBalancedLen + i] ==
                        kEmptyRowLse);
                for (int64_t d = 0; d < kDim; ++d)
                  REQUIRE(next.out.at(((i * kBatch + b) * kHeads + h) * kDim +
                                      d) == 0.0);
              }
        merged = merge(merged, next);
      }
      REQUIRE(maxRelativeError(merged.out.values(), wantOut) < 1e-6);
      REQUIRE(maxRelativeError(widen(merged.lse), wantLse) < 1e-6);
    }
  }
}

TEST_CASE("a balanced block's gradient, rows that see no key included, "
          "matches finite differences",
          "[kernels]") {
  std::mt19937 rng(45);
  auto q = randomValues(kBalancedLen * kRowQ, rng, 2.0);
  auto k = randomValues(kBalancedLen * kRowKv, rng, 2.0);
  auto v = randomValues(kBalancedLen * kRowKv, rng);
  auto dout = randomValues(kBalancedLen * kRowQ, rng);
  auto dlse = randomValues(kBalancedLse, rng);
  std::vector<float> dlseF(dlse.begin(), dlse.end());
  // cp 2: the own block (two causal pairs and a full one), rank 1's keys
  // at rank 0 (its early chunk sees none) and rank 0's at rank 1 (its late
  // chunk, keys 3c.., is seen by nobody: dk and dv 0 there).
  for (auto [rank, keyRank] :
       {std::pair<int64_t, int64_t>{0, 0}, {0, 1}, {1, 0}}) {
    INFO("rank " << rank << ", keys of rank " << keyRank);
    Partial forward = balancedBlock(q, k, v, 2, rank, keyRank);
    RowPositions queries =
        rowPositions(SequenceSplit::Balanced, rank, 2, kBalancedLen);
    RowPositions keys =
        rowPositions(SequenceSplit::Balanced, keyRank, 2, kBalancedLen);
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
                        .seqLen = kBalancedLen,
                        .batch = kBatch,
                        .numHeads = kHeads,
                        .numKvHeads = kKvHeads,
                        .headDim = kDim,
                        .kvSeqLen = kBalancedLen,
                        .queryStart = queries.start,
                        .keyStart = keys.start,
                        .querySecondRow = queries.secondRow,
                        .querySecondStart = queries.secondStart,
                        .keySecondRow = keys.secondRow,
                        .keySecondStart = keys.secondStart});
    // An empty row's lse is the constant kEmptyRowLse: its term has no
    // gradient, and at 1e30 it would swamp the differences, so the
    // objective leaves it out.
    auto objective = [&](const std::vector<double> &qs,
                         const std::vector<double> &ks,
                         const std::vector<double> &vs) {
      Partial p = balancedBlock(qs, ks, vs, 2, rank, keyRank);
      double sum = weightedSum(dout, p.out.values());
      for (int64_t row = 0; row < kBalancedLse; ++row)
        if (p.lse[row] != kEmptyRowLse)
          sum += dlse[row] * p.lse[row];
      return sum;
    };
    const double step = 1.0 / 256; // lse's f32 rounding, as above
    auto numericDq = numericGradient(
        q, [&](const auto &x) { return objective(x, k, v); }, step);
    auto numericDk = numericGradient(
        k, [&](const auto &x) { return objective(q, x, v); }, step);
    auto numericDv = numericGradient(
        v, [&](const auto &x) { return objective(q, k, x); }, step);
    CHECK(maxRelativeError(dq.values(), numericDq) < 1e-3);
    CHECK(maxRelativeError(dk.values(), numericDk) < 1e-3);
    CHECK(maxRelativeError(dv.values(), numericDv) < 1e-3);
    if (rank == 1 && keyRank == 0)
      for (int64_t i = kChunk * kRowKv; i < kBalancedLen * kRowKv; ++i)
        REQUIRE((dk.at(i) == 0.0 && dv.at(i) == 0.0));
  }
}
