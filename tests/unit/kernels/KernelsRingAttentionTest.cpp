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
#include "tests/unit/kernels/AttentionTestShapes.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

// Three blocks of two positions; 4 query heads over 2 KV heads.
constexpr int64_t kBlocks = 3, kBlockLen = 2, kSeqLen = kBlocks * kBlockLen;
constexpr AttentionShape kBlockShape{.seqLen = kBlockLen,
                                     .batch = 2,
                                     .numHeads = 4,
                                     .numKvHeads = 2,
                                     .headDim = 4};
constexpr int64_t kBatch = kBlockShape.batch, kHeads = kBlockShape.numHeads,
                  kDim = kBlockShape.headDim;
constexpr int64_t kRowQ = kBlockShape.rowQ(), kRowKv = kBlockShape.rowKv();
constexpr int64_t kLseBlock = kBlockShape.lseNumel();
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

/// `numRows` query rows at `queries` on as many keys at `keys` (k, v hold
/// those rows only).
Partial blockAttention(const std::vector<double> &q,
                       const std::vector<double> &k,
                       const std::vector<double> &v, int64_t numRows,
                       RowPositions queries, RowPositions keys) {
  const AttentionShape shape = kBlockShape.withRows(numRows);
  Partial result{Tensor(kF64, shape.qNumel()),
                 std::vector<float>(shape.lseNumel())};
  Tensor qt(kF64, q), kt(kF64, k), vt(kF64, v);
  cpu::attention(shaped(AttentionArgs{.q = qt.cview(),
                                      .k = kt.cview(),
                                      .v = vt.cview(),
                                      .out = result.out.view(),
                                      .lse = result.lse.data()},
                        shape, numRows, queries, keys));
  return result;
}

/// Query block `qBlock` on key block `kBlock` (k, v hold that block only).
Partial blockAttention(const std::vector<double> &q,
                       const std::vector<double> &k,
                       const std::vector<double> &v, int64_t qBlock,
                       int64_t kBlock) {
  return blockAttention(q, k, v, kBlockLen, {.start = qBlock * kBlockLen},
                        {.start = kBlock * kBlockLen});
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

struct BlockInputs {
  std::vector<double> q, k, v, dout, dlse;
};

/// q, k, v, the cotangent of out and that of lse for `numRows` rows.
BlockInputs randomBlockInputs(int64_t numRows, std::mt19937 &rng) {
  // A braced list is evaluated in order, so the draws are too.
  return {randomValues(numRows * kRowQ, rng, 2.0),
          randomValues(numRows * kRowKv, rng, 2.0),
          randomValues(numRows * kRowKv, rng),
          randomValues(numRows * kRowQ, rng),
          randomValues(kBlockShape.withRows(numRows).lseNumel(), rng)};
}

struct BlockGradient {
  Tensor dq, dk, dv;
};

/// The gradient of blockAttention(q, k, v, numRows, queries, keys), dlse
/// included, checked against finite differences; returned for checks of
/// its own.
BlockGradient requireBlockGradient(const BlockInputs &in, int64_t numRows,
                                   RowPositions queries, RowPositions keys) {
  const std::vector<double> &q = in.q, &k = in.k, &v = in.v;
  const std::vector<double> &dout = in.dout, &dlse = in.dlse;
  std::vector<float> dlseF(dlse.begin(), dlse.end());
  Partial forward = blockAttention(q, k, v, numRows, queries, keys);
  Tensor qt(kF64, q), kt(kF64, k), vt(kF64, v), dt(kF64, dout);
  BlockGradient result{Tensor(kF64, q.size()), Tensor(kF64, k.size()),
                       Tensor(kF64, v.size())};
  cpu::attentionGrad(shaped(AttentionGradArgs{.q = qt.cview(),
                                              .k = kt.cview(),
                                              .v = vt.cview(),
                                              .out = forward.out.cview(),
                                              .dout = dt.cview(),
                                              .lse = forward.lse.data(),
                                              .dlse = dlseF.data(),
                                              .dq = result.dq.view(),
                                              .dk = result.dk.view(),
                                              .dv = result.dv.view()},
                            kBlockShape.withRows(numRows), numRows, queries,
                            keys));
  // An empty row's lse is the constant kEmptyRowLse: its term has no
  // gradient, and at 1e30 it would swamp the differences, so the objective
  // leaves it out.
  auto objective = [&](const std::vector<std::vector<double>> &qkv) {
    Partial p = blockAttention(qkv[0], qkv[1], qkv[2], numRows, queries, keys);
    std::vector<double> seenDlse = dlse, lse = widen(p.lse);
    for (size_t row = 0; row < lse.size(); ++row)
      if (p.lse[row] == kEmptyRowLse)
        seenDlse[row] = lse[row] = 0;
    return weightedSum(dout, p.out.values()) + weightedSum(seenDlse, lse);
  };
  // lse is stored in f32: a wide step keeps its rounding (~1e-7 per row)
  // small against the difference; a dropped dlse term would be O(1).
  auto numeric = numericGradients({q, k, v}, objective, 1.0 / 256);
  CHECK(maxRelativeError(result.dq.values(), numeric[0]) < 1e-3);
  CHECK(maxRelativeError(result.dk.values(), numeric[1]) < 1e-3);
  CHECK(maxRelativeError(result.dv.values(), numeric[2]) < 1e-3);
  return result;
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
    cpu::attention(shaped(AttentionArgs{.q = qt.cview(),
                                        .k = kt.cview(),
                                        .v = vt.cview(),
                                        .out = whole.out.view(),
                                        .lse = whole.lse.data()},
                          kBlockShape, kSeqLen, {.start = r * kBlockLen}));
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
  BlockInputs in = randomBlockInputs(kBlockLen, rng);
  // Query block 2 on key block 1 (all keys seen) and on block 2 (causal).
  for (int64_t kBlock : {1, 2}) {
    INFO("key block " << kBlock);
    requireBlockGradient(in, kBlockLen, {.start = 2 * kBlockLen},
                         {.start = kBlock * kBlockLen});
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

RowPositions balanced(int64_t size, int64_t rank) {
  return rowPositions(SequenceSplit::Balanced, rank, size, kBalancedLen);
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
      auto [wantOut, wantLse] =
          referenceAttention(kBlockShape.withRows(kBalancedLen), qRows,
                             balanced(size, rank), k, v);
      // Step t holds the block of rank - t mod size: every rank's, own first.
      auto block = [&](int64_t keyRank) {
        return blockAttention(qRows, balancedRows(k, size, keyRank, kRowKv),
                              balancedRows(v, size, keyRank, kRowKv),
                              kBalancedLen, balanced(size, rank),
                              balanced(size, keyRank));
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
  BlockInputs in = randomBlockInputs(kBalancedLen, rng);
  // cp 2: the own block (two causal pairs and a full one), rank 1's keys
  // at rank 0 (its early chunk sees none) and rank 0's at rank 1 (its late
  // chunk, keys 3c.., is seen by nobody: dk and dv 0 there).
  for (auto [rank, keyRank] :
       {std::pair<int64_t, int64_t>{0, 0}, {0, 1}, {1, 0}}) {
    INFO("rank " << rank << ", keys of rank " << keyRank);
    BlockGradient gradient = requireBlockGradient(
        in, kBalancedLen, balanced(2, rank), balanced(2, keyRank));
    if (rank == 1 && keyRank == 0)
      for (int64_t i = kChunk * kRowKv; i < kBalancedLen * kRowKv; ++i)
        REQUIRE((gradient.dk.at(i) == 0.0 && gradient.dv.at(i) == 0.0));
  }
}
