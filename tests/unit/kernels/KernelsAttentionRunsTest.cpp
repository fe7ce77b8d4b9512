//===- KernelsAttentionRunsTest.cpp - a query block as prefix calls -------===//
//
// kernels/AttentionRuns.h cuts a rank's query block (context parallelism's
// K/V all-gather) into the calls a fused library runs: each run of
// consecutive query positions against the prefix of keys its last query
// sees, the causal diagonal aligned bottom-right. Here cpu::attention and
// cpu::attentionGrad run those calls and their results, put back in place
// (dk and dv summed over the calls, zero past the longest prefix), must be
// the whole block's, in f64, for every rank of 2, 3 and 4 on both splits.
// KernelsCudaAttentionTest checks cuDNN's calls against the same kernels.
//
//===----------------------------------------------------------------------===//

#include "kernels/AttentionRuns.h"
#include "kernels/SequencePositions.h"
#include "tests/unit/kernels/AttentionTestShapes.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

constexpr DType f64 = DType::F64;

/// The whole block's forward and backward, or a run's.
struct Attended {
  std::vector<double> out, lse, dq, dk, dv;
};

/// Attention of `shape`'s queries at `queries` against the first `keys` of
/// k and v, forward then backward with `dout`.
Attended attend(const AttentionShape &shape, int64_t keys,
                const RowPositions &queries, const std::vector<double> &q,
                const std::vector<double> &k, const std::vector<double> &v,
                const std::vector<double> &dout) {
  int64_t kvNumel = keys * shape.rowKv();
  Tensor tq(f64, q), tk(f64, rowsAt(k, shape.rowKv(), RowPositions{0}, keys)),
      tv(f64, rowsAt(v, shape.rowKv(), RowPositions{0}, keys)),
      tdout(f64, dout);
  Tensor out(f64, shape.qNumel()), dq(f64, shape.qNumel());
  Tensor dk(f64, kvNumel), dv(f64, kvNumel);
  std::vector<float> lse(shape.lseNumel());
  cpu::attention(shaped(AttentionArgs{.q = tq.cview(),
                                      .k = tk.cview(),
                                      .v = tv.cview(),
                                      .out = out.view(),
                                      .lse = lse.data()},
                        shape, keys, queries));
  cpu::attentionGrad(shaped(AttentionGradArgs{.q = tq.cview(),
                                              .k = tk.cview(),
                                              .v = tv.cview(),
                                              .out = out.cview(),
                                              .dout = tdout.cview(),
                                              .lse = lse.data(),
                                              .dq = dq.view(),
                                              .dk = dk.view(),
                                              .dv = dv.view()},
                            shape, keys, queries));
  return {out.values(),
          {lse.begin(), lse.end()},
          dq.values(),
          dk.values(),
          dv.values()};
}

} // namespace

TEST_CASE("a query block's prefix-causal calls, put back, are the block's "
          "attention",
          "[kernels]") {
  const int64_t seqLen = 24;
  const AttentionShape heads{seqLen, 2, 4, 2, 8};
  std::mt19937 rng(91);
  std::vector<double> k = randomValues(heads.kvNumel(), rng, 2.0);
  std::vector<double> v = randomValues(heads.kvNumel(), rng);
  for (int64_t n : {2, 3, 4})
    for (SequenceSplit split :
         {SequenceSplit::Balanced, SequenceSplit::Contiguous})
      for (int64_t r = 0; r < n; ++r) {
        bool balanced = split == SequenceSplit::Balanced;
        INFO("rank " << r << " of " << n << (balanced ? ", balanced" : ""));
        const int64_t rows = seqLen / n;
        const AttentionShape shape = heads.withRows(rows);
        RowPositions queries = rowPositions(split, r, n, rows);
        std::vector<double> q = randomValues(shape.qNumel(), rng, 2.0);
        std::vector<double> dout = randomValues(shape.qNumel(), rng);
        Attended whole = attend(shape, seqLen, queries, q, k, v, dout);

        auto runs = queryRuns(shaped(AttentionArgs{}, shape, seqLen, queries));
        REQUIRE(runs);
        // Balanced, two runs but on the last rank, whose chunks n-1 and n
        // are adjacent; the last run sees the longest prefix.
        CHECK(runs->size() == (balanced && r < n - 1 ? 2u : 1u));
        CHECK(runs->back().keys == queries.at(rows - 1) + 1);
        int64_t covered = 0;
        std::vector<double> dk(heads.kvNumel(), 0.0), dv(dk);
        for (const QueryRun &run : *runs) {
          REQUIRE(run.row == covered);
          covered += run.rows;
          // The run alone: queries at keys - rows .. keys - 1, the prefix.
          const AttentionShape part = heads.withRows(run.rows);
          Attended got = attend(
              part, run.keys, RowPositions{run.keys - run.rows},
              rowsAt(q, heads.rowQ(), RowPositions{run.row}, run.rows), k, v,
              rowsAt(dout, heads.rowQ(), RowPositions{run.row}, run.rows));
          RowPositions runRows{run.row};
          CHECK(maxRelativeError(got.out, rowsAt(whole.out, heads.rowQ(),
                                                 runRows, run.rows)) < 1e-13);
          CHECK(maxRelativeError(got.dq, rowsAt(whole.dq, heads.rowQ(), runRows,
                                                run.rows)) < 1e-13);
          // lse is [B, H, rows]: the run's rows of each (b, h).
          for (int64_t bh = 0; bh < heads.batch * heads.numHeads; ++bh)
            for (int64_t i = 0; i < run.rows; ++i)
              CHECK(got.lse[bh * run.rows + i] ==
                    Approx(whole.lse[bh * rows + run.row + i]).epsilon(1e-6));
          for (size_t i = 0; i < got.dk.size(); ++i) {
            dk[i] += got.dk[i];
            dv[i] += got.dv[i];
          }
        }
        CHECK(covered == rows);
        // dk and dv summed over the calls; the keys past the longest
        // prefix (seen by no query of the rank) are 0 in the block's too.
        CHECK(maxRelativeError(dk, whole.dk) < 1e-13);
        CHECK(maxRelativeError(dv, whole.dv) < 1e-13);
      }
}

TEST_CASE("prefix-causal calls refuse what one diagonal cannot mask",
          "[kernels]") {
  const AttentionShape shape{8, 1, 2, 1, 8};
  // Queries that all follow a ring block's keys: every key is seen.
  auto after = queryRuns(
      shaped(AttentionArgs{}, shape, 8, RowPositions{16}, RowPositions{0}));
  REQUIRE_FALSE(after);
  CHECK(after.status().message().find("prefix of the keys") !=
        std::string::npos);
  // A query before the first key.
  auto before = queryRuns(
      shaped(AttentionArgs{}, shape, 16, RowPositions{0}, RowPositions{4}));
  REQUIRE_FALSE(before);
  // Keys in two runs (the balanced ring's K/V block).
  auto twoKeyRuns = queryRuns(shaped(AttentionArgs{}, shape, 8,
                                     RowPositions{16}, RowPositions{0, 4, 12}));
  REQUIRE_FALSE(twoKeyRuns);
  CHECK(twoKeyRuns.status().message().find("keys in one run") !=
        std::string::npos);
  // A backward with dlse.
  std::vector<float> dlse(16);
  AttentionGradArgs grad = shaped(AttentionGradArgs{}, shape);
  grad.dlse = dlse.data();
  auto withDlse = queryRuns(grad);
  REQUIRE_FALSE(withDlse);
  CHECK(withDlse.status().message().find("dlse") != std::string::npos);
  grad.dlse = nullptr;
  auto square = queryRuns(grad);
  REQUIRE(square);
  REQUIRE(square->size() == 1);
  CHECK(square->front().rows == 8);
  CHECK(square->front().keys == 8);
}
