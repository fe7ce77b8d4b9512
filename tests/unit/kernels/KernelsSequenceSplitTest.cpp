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
#include "tests/unit/kernels/AttentionTestShapes.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

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
  Tensor wAll(f64, w);
  struct Outputs {
    Tensor rope, normRope, dx, dw;
  };
  // The `numRows` rows of x and dy at `rows`, at positions `p`, through
  // the three kernels.
  auto run = [&](const RowPositions &rows, const RowPositions &p,
                 int64_t numRows) {
    auto mine = [&](const std::vector<double> &all) {
      return rowsAt(all, rowNumel, rows, numRows);
    };
    const int64_t numel = numRows * rowNumel;
    Tensor xMine(f64, mine(x)), dyMine(f64, mine(dy));
    Outputs result{Tensor(f64, numel), Tensor(f64, numel), Tensor(f64, numel),
                   Tensor(f64, dim)};
    auto positioned = [&](auto args) {
      args.seqLen = numRows;
      args.batch = batch;
      args.numHeads = heads;
      args.headDim = dim;
      args.positionOffset = p.start;
      args.secondRow = p.secondRow;
      args.secondStart = p.secondStart;
      return args;
    };
    cpu::rope(
        positioned(RopeArgs{.x = xMine.cview(), .y = result.rope.view()}));
    cpu::rmsNormRope(positioned(RmsNormRopeArgs{
        .x = xMine.cview(), .w = wAll.cview(), .y = result.normRope.view()}));
    cpu::rmsNormRopeGrad(
        positioned(RmsNormRopeGradArgs{.x = xMine.cview(),
                                       .w = wAll.cview(),
                                       .dy = dyMine.cview(),
                                       .dx = result.dx.view(),
                                       .dw = result.dw.view()}));
    return result;
  };
  Outputs all = run({}, {.start = 3}, seqLen);
  for (int64_t n : {2, 3}) {
    int64_t localRows = seqLen / n;
    std::vector<double> dwSum(dim, 0.0);
    for (int64_t r = 0; r < n; ++r) {
      INFO(n << " ranks, rank " << r);
      RowPositions rows =
          rowPositions(SequenceSplit::Balanced, r, n, localRows);
      auto mine = [&](const Tensor &whole) {
        return rowsAt(whole.values(), rowNumel, rows, localRows);
      };
      Outputs local =
          run(rows, rowPositions(SequenceSplit::Balanced, r, n, localRows, 3),
              localRows);
      REQUIRE(local.rope.values() == mine(all.rope));
      REQUIRE(local.normRope.values() == mine(all.normRope));
      REQUIRE(local.dx.values() == mine(all.dx));
      for (int64_t c = 0; c < dim; ++c)
        dwSum[c] += local.dw.at(c);
    }
    REQUIRE(maxRelativeError(dwSum, all.dw.values()) < 1e-13);
  }
}

TEST_CASE("a balanced rank's queries against all keys are those rows of "
          "full attention, and the ranks' gradients sum to the full ones",
          "[kernels]") {
  std::mt19937 rng(15);
  requireSplitQueriesMatchFull(
      SequenceSplit::Balanced,
      {.seqLen = 12, .batch = 2, .numHeads = 4, .numKvHeads = 2, .headDim = 4},
      rng);
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
