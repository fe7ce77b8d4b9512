//===- KernelsAttentionRunsTest.cpp - a query block as prefix calls -------===//
//
// kernels/AttentionRuns.h cuts a rank's block of queries against a block
// of keys into the calls a fused library runs: each run of queries against
// the prefix of keys it sees, causal along the bottom-right diagonal or
// unmasked, and rows that see no key. Here cpu::attention and
// cpu::attentionGrad run those calls and their results, put back in place
// (dk and dv summed over the calls, zero past the longest prefix; empty
// rows out 0, lse kEmptyRowLse, dq 0), must be the whole block's, in f64,
// for every rank of 2, 3 and 4 on both splits: context parallelism's K/V
// all-gather (all keys) and every block of ring attention (each kv_shift).
// KernelsCudnnAttentionTest checks cuDNN's calls against the same kernels.
//
//===----------------------------------------------------------------------===//

#include "kernels/AttentionRuns.h"
#include "kernels/SequencePositions.h"
#include "tests/unit/kernels/AttentionTestShapes.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <optional>
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
/// k and v at `keyPositions`, forward then backward with `dout`.
Attended attend(const AttentionShape &shape, int64_t keys,
                const RowPositions &queries, const RowPositions &keyPositions,
                const std::vector<double> &q, const std::vector<double> &k,
                const std::vector<double> &v, const std::vector<double> &dout) {
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
                        shape, keys, queries, keyPositions));
  cpu::attentionGrad(shaped(AttentionGradArgs{.q = tq.cview(),
                                              .k = tk.cview(),
                                              .v = tv.cview(),
                                              .out = out.cview(),
                                              .dout = tdout.cview(),
                                              .lse = lse.data(),
                                              .dq = dq.view(),
                                              .dk = dk.view(),
                                              .dv = dv.view()},
                            shape, keys, queries, keyPositions));
  return {out.values(),
          {lse.begin(), lse.end()},
          dq.values(),
          dk.values(),
          dv.values()};
}

/// Checks `shape`'s block of queries at `queries` against `numKeys` keys at
/// `keyPositions` (k, v) cut into queryRuns' calls; the runs.
std::vector<QueryRun> checkCalls(const AttentionShape &shape,
                                 const RowPositions &queries,
                                 const RowPositions &keyPositions,
                                 int64_t numKeys, const std::vector<double> &k,
                                 const std::vector<double> &v,
                                 std::mt19937 &rng) {
  const int64_t rows = shape.seqLen;
  const AttentionShape one = shape.withRows(1);
  std::vector<double> q = randomValues(shape.qNumel(), rng, 2.0);
  std::vector<double> dout = randomValues(shape.qNumel(), rng);
  Attended whole = attend(shape, numKeys, queries, keyPositions, q, k, v, dout);
  std::vector<QueryRun> runs = queryRuns(queries, rows, keyPositions, numKeys);
  int64_t covered = 0, longest = 0;
  std::vector<double> dk(numKeys * one.rowKv(), 0.0), dv(dk);
  for (const QueryRun &run : runs) {
    INFO("run from row " << run.row << ", " << run.rows << " rows, " << run.keys
                         << " keys" << (run.causal ? ", causal" : ""));
    REQUIRE(run.row == covered);
    REQUIRE(run.rows > 0);
    REQUIRE(run.keys >= longest); // the prefixes grow with the row
    covered += run.rows;
    longest = run.keys;
    RowPositions runRows{run.row};
    if (run.keys == 0) {
      // Rows that see no key: out 0, lse kEmptyRowLse, dq 0.
      for (double x : rowsAt(whole.out, shape.rowQ(), runRows, run.rows))
        REQUIRE(x == 0.0);
      for (double x : rowsAt(whole.dq, shape.rowQ(), runRows, run.rows))
        REQUIRE(x == 0.0);
      for (int64_t bh = 0; bh < shape.batch * shape.numHeads; ++bh)
        for (int64_t i = 0; i < run.rows; ++i)
          REQUIRE(whole.lse[bh * rows + run.row + i] == kEmptyRowLse);
      continue;
    }
    // The call alone over the prefix, its keys at 0..keys-1: causal, the
    // queries at keys - rows .. keys - 1; unmasked, all after the keys.
    const AttentionShape part = shape.withRows(run.rows);
    Attended got =
        attend(part, run.keys,
               RowPositions{run.causal ? run.keys - run.rows : run.keys},
               RowPositions{0}, rowsAt(q, shape.rowQ(), runRows, run.rows), k,
               v, rowsAt(dout, shape.rowQ(), runRows, run.rows));
    CHECK(maxRelativeError(got.out, rowsAt(whole.out, shape.rowQ(), runRows,
                                           run.rows)) < 1e-13);
    CHECK(maxRelativeError(got.dq, rowsAt(whole.dq, shape.rowQ(), runRows,
                                          run.rows)) < 1e-13);
    // lse is [B, H, rows]: the run's rows of each (b, h).
    for (int64_t bh = 0; bh < shape.batch * shape.numHeads; ++bh)
      for (int64_t i = 0; i < run.rows; ++i)
        CHECK(got.lse[bh * run.rows + i] ==
              Approx(whole.lse[bh * rows + run.row + i]).epsilon(1e-6));
    for (size_t i = 0; i < got.dk.size(); ++i) {
      dk[i] += got.dk[i];
      dv[i] += got.dv[i];
    }
  }
  CHECK(covered == rows);
  // dk and dv summed over the calls; the keys past the longest prefix
  // (seen by no query of the rank) are 0 in the block's too.
  CHECK(maxRelativeError(dk, whole.dk) < 1e-13);
  CHECK(maxRelativeError(dv, whole.dv) < 1e-13);
  return runs;
}

size_t callsOf(const std::vector<QueryRun> &runs) {
  size_t calls = 0;
  for (const QueryRun &run : runs)
    calls += run.keys > 0;
  return calls;
}

} // namespace

TEST_CASE("a K/V all-gather block's prefix-causal calls, put back, are the "
          "block's attention",
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
        RowPositions queries = rowPositions(split, r, n, rows);
        std::vector<QueryRun> runs = checkCalls(
            heads.withRows(rows), queries, RowPositions{0}, seqLen, k, v, rng);
        // Balanced, two causal runs but on the last rank, whose chunks n-1
        // and n are adjacent; the last run sees the longest prefix.
        CHECK(runs.size() == (balanced && r < n - 1 ? 2u : 1u));
        CHECK(runs.back().keys == queries.at(rows - 1) + 1);
        for (const QueryRun &run : runs)
          CHECK(run.causal);
      }
}

TEST_CASE("every ring attention block is at most one call, put back, the "
          "block's attention",
          "[kernels]") {
  const int64_t seqLen = 48;
  const AttentionShape heads{seqLen, 2, 4, 2, 8};
  std::mt19937 rng(92);
  for (int64_t n : {2, 3, 4})
    for (SequenceSplit split :
         {SequenceSplit::Balanced, SequenceSplit::Contiguous})
      for (int64_t r = 0; r < n; ++r)
        for (int64_t shift = 0; shift < n; ++shift) {
          bool balanced = split == SequenceSplit::Balanced;
          INFO("rank " << r << " of " << n << (balanced ? ", balanced" : "")
                       << ", kv_shift " << shift);
          std::optional<int64_t> block = ringKeyBlock(split, r, n, shift);
          if (!block) // the contiguous chain has not reached this rank
            continue;
          const int64_t rows = seqLen / n;
          const AttentionShape shape = heads.withRows(rows);
          RowPositions queries = rowPositions(split, r, n, rows);
          RowPositions keys = rowPositions(split, *block, n, rows);
          std::vector<double> k = randomValues(shape.kvNumel(), rng, 2.0);
          std::vector<double> v = randomValues(shape.kvNumel(), rng);
          // Positions relative to the first key, as AttentionArgs gives.
          RowPositions relQueries{queries.start - keys.start, queries.secondRow,
                                  queries.secondStart - keys.start};
          RowPositions relKeys{0, keys.secondRow,
                               keys.secondStart - keys.start};
          std::vector<QueryRun> runs =
              checkCalls(shape, relQueries, relKeys, rows, k, v, rng);
          // A block is one call or none: the own block causal, an earlier
          // one (or an earlier chunk) unmasked over a prefix; the balanced
          // split's later blocks leave its first chunk without keys.
          CHECK(callsOf(runs) <= 1);
          if (shift == 0)
            CHECK((runs.size() == 1 && runs[0].causal && runs[0].keys == rows));
          if (!balanced && shift > 0)
            CHECK(
                (runs.size() == 1 && !runs[0].causal && runs[0].keys == rows));
        }
}

TEST_CASE("prefix-masked calls refuse a backward with dlse", "[kernels]") {
  const AttentionShape shape{8, 1, 2, 1, 8};
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
  CHECK(*square == std::vector<QueryRun>{{0, 8, 8, true}});
  // Queries that all follow the keys see every key: one unmasked call.
  CHECK(queryRuns(RowPositions{16}, 8, RowPositions{0}, 8) ==
        std::vector<QueryRun>{{0, 8, 8, false}});
  // Queries before the first key see none at first; the last call is the
  // second run.
  std::vector<QueryRun> late =
      queryRuns(RowPositions{0}, 8, RowPositions{4}, 8);
  CHECK(late == std::vector<QueryRun>{{0, 4, 0, false}, {4, 4, 4, true}});
  CHECK(lastCall(late) == 1);
  // Queries that all precede the keys: no call at all.
  std::vector<QueryRun> none =
      queryRuns(RowPositions{0}, 8, RowPositions{8}, 8);
  CHECK(none == std::vector<QueryRun>{{0, 8, 0, false}});
  CHECK(lastCall(none) == none.size());
}
