//===- KernelsSequenceSplitTest.cpp - the balanced split's kernels --------===//
//
// Context parallelism's balanced split (kernels/SequencePositions.h): rank r
// of n holds chunks r and 2n-1-r of 2n. Its positions, the causal work it
// leaves each rank, and the kernels that read them: rope and rms_norm_rope
// on a rank's two chunks are those rows of the whole sequence's, attention
// of a rank's queries against all keys is those rows of full attention
// (the ranks' key gradients summing to the full ones), and permute_blocks
// reorders whole blocks.
//
//===----------------------------------------------------------------------===//

#include "kernels/Attention.h"
#include "kernels/Copy.h"
#include "kernels/RmsNormRope.h"
#include "kernels/Rope.h"
#include "kernels/SequencePositions.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

/// The rows of `all` (rowNumel values each) that rank `coord` of `size`
/// holds under the balanced split of `seqLen` rows.
std::vector<double> balancedRows(const std::vector<double> &all,
                                 int64_t rowNumel, int64_t seqLen,
                                 int64_t coord, int64_t size) {
  RowPositions positions =
      rowPositions(SequenceSplit::Balanced, coord, size, seqLen / size);
  std::vector<double> rows;
  for (int64_t i = 0; i < seqLen / size; ++i) {
    auto first = all.begin() + positions.at(i) * rowNumel;
    rows.insert(rows.end(), first, first + rowNumel);
  }
  return rows;
}

} // namespace

TEST_CASE("balanced positions are chunks r and 2n-1-r, increasing",
          "[kernels]") {
  // 3 ranks, 12 positions: chunks of 2; rank 1 holds chunks 1 and 4.
  RowPositions rank1 = rowPositions(SequenceSplit::Balanced, 1, 3, 4);
  std::vector<int64_t> got;
  for (int64_t i = 0; i < 4; ++i)
    got.push_back(rank1.at(i));
  REQUIRE(got == std::vector<int64_t>{2, 3, 8, 9});
  REQUIRE(rank1.firstRowFrom(0) == 0);
  REQUIRE(rank1.firstRowFrom(3) == 1);
  REQUIRE(rank1.firstRowFrom(5) == 2); // in the gap: the second run's start
  REQUIRE(rank1.firstRowFrom(9) == 3);
  REQUIRE(rank1.firstRowFrom(10) == 4); // past the last row
  RowPositions block = rowPositions(SequenceSplit::Contiguous, 2, 3, 4, 1);
  REQUIRE(block.isOneRun());
  REQUIRE(block.at(3) == 2 * 4 + 1 + 3);
  // Every position is held exactly once.
  for (int64_t n : {1, 2, 4}) {
    std::vector<int> held(8 * n, 0);
    for (int64_t r = 0; r < n; ++r) {
      RowPositions p = rowPositions(SequenceSplit::Balanced, r, n, 8);
      for (int64_t i = 0; i < 8; ++i) {
        ++held.at(p.at(i));
        if (i > 0)
          REQUIRE(p.at(i) > p.at(i - 1));
      }
    }
    REQUIRE(std::count(held.begin(), held.end(), 1) == 8 * n);
  }
}

TEST_CASE("the balanced split gives every rank the same causal work",
          "[kernels]") {
  // Count the (query, key) pairs a causal mask leaves each rank: key
  // position <= query position. Contiguous blocks give rank r (r + 1/2)
  // L^2 + L/2; the balanced chunks 2n c^2 + c each.
  constexpr int64_t seqLen = 64;
  for (int64_t n : {2, 4, 8}) {
    INFO(n << " ranks");
    int64_t localRows = seqLen / n;
    auto pairs = [&](SequenceSplit split, int64_t r) {
      RowPositions p = rowPositions(split, r, n, localRows);
      int64_t count = 0;
      for (int64_t i = 0; i < localRows; ++i)
        count += p.at(i) + 1;
      return count;
    };
    std::vector<int64_t> balanced, contiguous;
    for (int64_t r = 0; r < n; ++r) {
      balanced.push_back(pairs(SequenceSplit::Balanced, r));
      contiguous.push_back(pairs(SequenceSplit::Contiguous, r));
    }
    int64_t total = seqLen * (seqLen + 1) / 2;
    REQUIRE(std::accumulate(balanced.begin(), balanced.end(), int64_t{0}) ==
            total);
    REQUIRE(std::accumulate(contiguous.begin(), contiguous.end(), int64_t{0}) ==
            total);
    for (int64_t count : balanced)
      REQUIRE(count == total / n);
    // Contiguous: the last rank's work over the first's is (2n-1) L^2/2
    // + L/2 over L^2/2 + L/2.
    int64_t l = localRows;
    REQUIRE(contiguous.front() == l * (l + 1) / 2);
    REQUIRE(contiguous.back() == (n - 1) * l * l + l * (l + 1) / 2);
  }
}

TEST_CASE("rope and rms_norm_rope on a balanced rank's rows are those rows "
          "of the whole sequence's",
          "[kernels]") {
  constexpr int64_t seqLen = 12, batch = 2, heads = 3, dim = 8;
  constexpr int64_t rowNumel = batch * heads * dim;
  std::mt19937 rng(21);
  std::vector<double> x = randomValues(seqLen * rowNumel, rng, 2.0);
  std::vector<double> w = randomValues(dim, rng);
  std::vector<double> dy = randomValues(seqLen * rowNumel, rng);
  const DType f64 = DType::F64;
  Tensor xAll(f64, x), wAll(f64, w), dyAll(f64, dy);
  Tensor ropeAll(f64, x.size()), normRopeAll(f64, x.size());
  Tensor dxAll(f64, x.size()), dwAll(f64, dim);
  cpu::rope({.x = xAll.cview(),
             .y = ropeAll.view(),
             .seqLen = seqLen,
             .batch = batch,
             .numHeads = heads,
             .headDim = dim,
             .positionOffset = 3});
  cpu::rmsNormRope({.x = xAll.cview(),
                    .w = wAll.cview(),
                    .y = normRopeAll.view(),
                    .seqLen = seqLen,
                    .batch = batch,
                    .numHeads = heads,
                    .headDim = dim,
                    .positionOffset = 3});
  cpu::rmsNormRopeGrad({.x = xAll.cview(),
                        .w = wAll.cview(),
                        .dy = dyAll.cview(),
                        .dx = dxAll.view(),
                        .dw = dwAll.view(),
                        .seqLen = seqLen,
                        .batch = batch,
                        .numHeads = heads,
                        .headDim = dim,
                        .positionOffset = 3});
  for (int64_t n : {2, 3}) {
    int64_t localRows = seqLen / n;
    std::vector<double> dwSum(dim, 0.0);
    for (int64_t r = 0; r < n; ++r) {
      INFO(n << " ranks, rank " << r);
      RowPositions p =
          rowPositions(SequenceSplit::Balanced, r, n, localRows, 3);
      auto mine = [&](const std::vector<double> &all) {
        return balancedRows(all, rowNumel, seqLen, r, n);
      };
      Tensor xMine(f64, mine(x)), dyMine(f64, mine(dy));
      Tensor y(f64, localRows * rowNumel), z(f64, localRows * rowNumel);
      Tensor dx(f64, localRows * rowNumel), dw(f64, dim);
      cpu::rope({.x = xMine.cview(),
                 .y = y.view(),
                 .seqLen = localRows,
                 .batch = batch,
                 .numHeads = heads,
                 .headDim = dim,
                 .positionOffset = p.start,
                 .secondRow = p.secondRow,
                 .secondStart = p.secondStart});
      REQUIRE(y.values() == mine(ropeAll.values()));
      cpu::rmsNormRope({.x = xMine.cview(),
                        .w = wAll.cview(),
                        .y = z.view(),
                        .seqLen = localRows,
                        .batch = batch,
                        .numHeads = heads,
                        .headDim = dim,
                        .positionOffset = p.start,
                        .secondRow = p.secondRow,
                        .secondStart = p.secondStart});
      REQUIRE(z.values() == mine(normRopeAll.values()));
      cpu::rmsNormRopeGrad({.x = xMine.cview(),
                            .w = wAll.cview(),
                            .dy = dyMine.cview(),
                            .dx = dx.view(),
                            .dw = dw.view(),
                            .seqLen = localRows,
                            .batch = batch,
                            .numHeads = heads,
                            .headDim = dim,
                            .positionOffset = p.start,
                            .secondRow = p.secondRow,
                            .secondStart = p.secondStart});
      REQUIRE(dx.values() == mine(dxAll.values()));
      for (int64_t c = 0; c < dim; ++c)
        dwSum[c] += dw.at(c);
    }
    REQUIRE(maxRelativeError(dwSum, dwAll.values()) < 1e-13);
  }
}

TEST_CASE("a balanced rank's queries against all keys are those rows of "
          "full attention, and the ranks' gradients sum to the full ones",
          "[kernels]") {
  constexpr int64_t seqLen = 12, batch = 2, heads = 4, kvHeads = 2, dim = 4;
  const DType f64 = DType::F64;
  const int64_t rowQ = batch * heads * dim, rowKv = batch * kvHeads * dim;
  std::mt19937 rng(15);
  std::vector<double> qValues = randomValues(seqLen * rowQ, rng, 2.0);
  std::vector<double> kValues = randomValues(seqLen * rowKv, rng, 2.0);
  std::vector<double> vValues = randomValues(seqLen * rowKv, rng);
  std::vector<double> cotangent = randomValues(seqLen * rowQ, rng);
  Tensor q(f64, qValues), k(f64, kValues), v(f64, vValues),
      dout(f64, cotangent);
  Tensor out(f64, seqLen * rowQ), dq(f64, seqLen * rowQ);
  Tensor dk(f64, seqLen * rowKv), dv(f64, seqLen * rowKv);
  std::vector<float> lse(batch * heads * seqLen);
  cpu::attention({.q = q.cview(),
                  .k = k.cview(),
                  .v = v.cview(),
                  .out = out.view(),
                  .lse = lse.data(),
                  .seqLen = seqLen,
                  .batch = batch,
                  .numHeads = heads,
                  .numKvHeads = kvHeads,
                  .headDim = dim});
  cpu::attentionGrad({.q = q.cview(),
                      .k = k.cview(),
                      .v = v.cview(),
                      .out = out.cview(),
                      .dout = dout.cview(),
                      .lse = lse.data(),
                      .dq = dq.view(),
                      .dk = dk.view(),
                      .dv = dv.view(),
                      .seqLen = seqLen,
                      .batch = batch,
                      .numHeads = heads,
                      .numKvHeads = kvHeads,
                      .headDim = dim});
  for (int64_t n : {2, 3}) {
    const int64_t localRows = seqLen / n;
    std::vector<double> dkSum(seqLen * rowKv, 0.0), dvSum(seqLen * rowKv, 0.0);
    for (int64_t r = 0; r < n; ++r) {
      INFO(n << " ranks, rank " << r);
      RowPositions p = rowPositions(SequenceSplit::Balanced, r, n, localRows);
      auto mine = [&](const std::vector<double> &all) {
        return balancedRows(all, rowQ, seqLen, r, n);
      };
      Tensor qMine(f64, mine(qValues)), doutMine(f64, mine(cotangent));
      Tensor outMine(f64, localRows * rowQ), dqMine(f64, localRows * rowQ);
      Tensor dkPart(f64, seqLen * rowKv), dvPart(f64, seqLen * rowKv);
      std::vector<float> lseMine(batch * heads * localRows);
      cpu::attention({.q = qMine.cview(),
                      .k = k.cview(),
                      .v = v.cview(),
                      .out = outMine.view(),
                      .lse = lseMine.data(),
                      .seqLen = localRows,
                      .batch = batch,
                      .numHeads = heads,
                      .numKvHeads = kvHeads,
                      .headDim = dim,
                      .kvSeqLen = seqLen,
                      .queryStart = p.start,
                      .querySecondRow = p.secondRow,
                      .querySecondStart = p.secondStart});
      REQUIRE(maxRelativeError(outMine.values(), mine(out.values())) < 1e-13);
      for (int64_t bh = 0; bh < batch * heads; ++bh)
        for (int64_t i = 0; i < localRows; ++i)
          REQUIRE(lseMine[bh * localRows + i] == lse[bh * seqLen + p.at(i)]);
      cpu::attentionGrad({.q = qMine.cview(),
                          .k = k.cview(),
                          .v = v.cview(),
                          .out = outMine.cview(),
                          .dout = doutMine.cview(),
                          .lse = lseMine.data(),
                          .dq = dqMine.view(),
                          .dk = dkPart.view(),
                          .dv = dvPart.view(),
                          .seqLen = localRows,
                          .batch = batch,
                          .numHeads = heads,
                          .numKvHeads = kvHeads,
                          .headDim = dim,
                          .kvSeqLen = seqLen,
                          .queryStart = p.start,
                          .querySecondRow = p.secondRow,
                          .querySecondStart = p.secondStart});
      REQUIRE(maxRelativeError(dqMine.values(), mine(dq.values())) < 1e-12);
      for (int64_t i = 0; i < seqLen * rowKv; ++i) {
        dkSum[i] += dkPart.at(i);
        dvSum[i] += dvPart.at(i);
      }
    }
    INFO(n << " ranks");
    REQUIRE(maxRelativeError(dkSum, dk.values()) < 1e-12);
    REQUIRE(maxRelativeError(dvSum, dv.values()) < 1e-12);
  }
}

TEST_CASE("permute_blocks moves whole blocks of dimension 0", "[kernels]") {
  // 4 blocks of 3 floats: y's block i is x's block order[i].
  std::vector<float> x(12), y(12, -1.f);
  std::iota(x.begin(), x.end(), 0.f);
  cpu::permuteBlocks({.src = x.data(),
                      .dst = y.data(),
                      .blockBytes = 3 * sizeof(float),
                      .order = {0, 2, 3, 1}});
  REQUIRE(y == std::vector<float>{0, 1, 2, 6, 7, 8, 9, 10, 11, 3, 4, 5});
}
