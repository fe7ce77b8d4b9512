//===- AttentionTestShapes.h - cpu attention tests' shapes ------*- C++ -*-===//
// defines: AttentionShape, shaped, rowsAt, referenceAttention,
//          requireSplitQueriesMatchFull
//
// The attention tests (KernelsAttentionTest, KernelsRingAttentionTest,
// KernelsSequenceSplitTest; KernelsCudaAttentionTest's `sized`) state a shape
// once and set its sizes and row positions on AttentionArgs or
// AttentionGradArgs with `shaped`:
//
//   AttentionShape shape{seqLen, batch, heads, kvHeads, dim};
//   cpu::attention(shaped(AttentionArgs{.q = q.cview(), .k = k.cview(),
//                                       .v = v.cview(), .out = out.view(),
//                                       .lse = lse.data()},
//                         shape));
#pragma once

#include "kernels/Attention.h"
#include "kernels/SequencePositions.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace sharc::kernels::test {

/// seqLen sequence-first rows of q (and of k and v, when square).
struct AttentionShape {
  int64_t seqLen, batch, numHeads, numKvHeads, headDim;
  constexpr int64_t rowQ() const { return batch * numHeads * headDim; }
  constexpr int64_t rowKv() const { return batch * numKvHeads * headDim; }
  constexpr int64_t qNumel() const { return seqLen * rowQ(); }
  constexpr int64_t kvNumel() const { return seqLen * rowKv(); }
  constexpr int64_t lseNumel() const { return batch * numHeads * seqLen; }
  /// The same heads over `numRows` rows.
  constexpr AttentionShape withRows(int64_t numRows) const {
    AttentionShape rows = *this;
    rows.seqLen = numRows;
    return rows;
  }
};

/// `args` with `shape`'s sizes, its queries at `queries` against `kvSeqLen`
/// keys at `keys`. The defaults (square, both from position 0) are the
/// argument structs' own.
template <typename Args>
Args shaped(Args args, const AttentionShape &shape, int64_t kvSeqLen = 0,
            RowPositions queries = {}, RowPositions keys = {}) {
  return withExtent(args,
                    AttentionExtent{shape.seqLen, shape.batch, shape.numHeads,
                                    shape.numKvHeads, shape.headDim, kvSeqLen,
                                    queries, keys});
}

/// The `numRows` rows of `all` (rowNumel values each) at `positions`.
inline std::vector<double> rowsAt(const std::vector<double> &all,
                                  int64_t rowNumel,
                                  const RowPositions &positions,
                                  int64_t numRows) {
  std::vector<double> rows;
  for (int64_t i = 0; i < numRows; ++i) {
    auto first = all.begin() + positions.at(i) * rowNumel;
    rows.insert(rows.end(), first, first + rowNumel);
  }
  return rows;
}

struct ReferenceAttention {
  std::vector<double> out, lse;
};

/// Float64 causal attention of `shape.seqLen` query rows at `positions` on
/// natural-order keys (key j at position j): out and lse as the formulas of
/// kernels/Attention.h read, with no kernel in between.
inline ReferenceAttention referenceAttention(const AttentionShape &shape,
                                             const std::vector<double> &q,
                                             const RowPositions &positions,
                                             const std::vector<double> &k,
                                             const std::vector<double> &v) {
  const int64_t batch = shape.batch, heads = shape.numHeads,
                kvHeads = shape.numKvHeads, dim = shape.headDim;
  ReferenceAttention result{std::vector<double>(shape.qNumel(), 0.0),
                            std::vector<double>(shape.lseNumel())};
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t kvHead = h / (heads / kvHeads);
      for (int64_t i = 0; i < shape.seqLen; ++i) {
        std::vector<double> scores;
        for (int64_t j = 0; j <= positions.at(i); ++j) {
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d)
            dot += q[((i * batch + b) * heads + h) * dim + d] *
                   k[((j * batch + b) * kvHeads + kvHead) * dim + d];
          scores.push_back(dot / std::sqrt(double(dim)));
        }
        double top = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double score : scores)
          sum += std::exp(score - top);
        double rowLse = top + std::log(sum);
        result.lse[(b * heads + h) * shape.seqLen + i] = rowLse;
        for (int64_t j = 0; j < static_cast<int64_t>(scores.size()); ++j)
          for (int64_t d = 0; d < dim; ++d)
            result.out[((i * batch + b) * heads + h) * dim + d] +=
                std::exp(scores[j] - rowLse) *
                v[((j * batch + b) * kvHeads + kvHead) * dim + d];
      }
    }
  return result;
}

/// Splits the queries of `whole` over 2 and then 3 ranks by `split` (rank r
/// holds rowPositions(split, r, n, ...)) and requires each rank's attention
/// against all keys to be those rows of full attention (lse to the bit), its
/// dq those rows of the full dq, and its dk and dv summed over the ranks the
/// full ones. All in f64.
inline void requireSplitQueriesMatchFull(SequenceSplit split,
                                         const AttentionShape &whole,
                                         std::mt19937 &rng) {
  const DType f64 = DType::F64;
  const int64_t seqLen = whole.seqLen, rowQ = whole.rowQ();
  std::vector<double> qValues = randomValues(whole.qNumel(), rng, 2.0);
  std::vector<double> kValues = randomValues(whole.kvNumel(), rng, 2.0);
  std::vector<double> vValues = randomValues(whole.kvNumel(), rng);
  std::vector<double> cotangent = randomValues(whole.qNumel(), rng);
  Tensor k(f64, kValues), v(f64, vValues);
  struct Run {
    Tensor out;
    std::vector<float> lse;
    Tensor dq, dk, dv;
  };
  // Rows of q and of the cotangent at `p` against all keys, forward and back.
  auto run = [&](const AttentionShape &shape, const std::vector<double> &qRows,
                 const std::vector<double> &doutRows, int64_t kvSeqLen,
                 RowPositions p) {
    Tensor q(f64, qRows), dout(f64, doutRows);
    Run result{Tensor(f64, shape.qNumel()),
               std::vector<float>(shape.lseNumel()),
               Tensor(f64, shape.qNumel()), Tensor(f64, whole.kvNumel()),
               Tensor(f64, whole.kvNumel())};
    cpu::attention(shaped(AttentionArgs{.q = q.cview(),
                                        .k = k.cview(),
                                        .v = v.cview(),
                                        .out = result.out.view(),
                                        .lse = result.lse.data()},
                          shape, kvSeqLen, p));
    cpu::attentionGrad(shaped(AttentionGradArgs{.q = q.cview(),
                                                .k = k.cview(),
                                                .v = v.cview(),
                                                .out = result.out.cview(),
                                                .dout = dout.cview(),
                                                .lse = result.lse.data(),
                                                .dq = result.dq.view(),
                                                .dk = result.dk.view(),
                                                .dv = result.dv.view()},
                              shape, kvSeqLen, p));
    return result;
  };
  Run all = run(whole, qValues, cotangent, 0, {});
  for (int64_t n : {2, 3}) {
    const AttentionShape local = whole.withRows(seqLen / n);
    std::vector<double> dkSum(whole.kvNumel(), 0.0),
        dvSum(whole.kvNumel(), 0.0);
    for (int64_t r = 0; r < n; ++r) {
      INFO(n << " ranks, rank " << r);
      RowPositions p = rowPositions(split, r, n, local.seqLen);
      auto mine = [&](const std::vector<double> &rows) {
        return rowsAt(rows, rowQ, p, local.seqLen);
      };
      Run part = run(local, mine(qValues), mine(cotangent), seqLen, p);
      REQUIRE(maxRelativeError(part.out.values(), mine(all.out.values())) <
              1e-13);
      for (int64_t bh = 0; bh < whole.batch * whole.numHeads; ++bh)
        for (int64_t i = 0; i < local.seqLen; ++i)
          REQUIRE(part.lse[bh * local.seqLen + i] ==
                  all.lse[bh * seqLen + p.at(i)]);
      REQUIRE(maxRelativeError(part.dq.values(), mine(all.dq.values())) <
              1e-12);
      for (int64_t i = 0; i < whole.kvNumel(); ++i) {
        dkSum[i] += part.dk.at(i);
        dvSum[i] += part.dv.at(i);
      }
    }
    INFO(n << " ranks");
    REQUIRE(maxRelativeError(dkSum, all.dk.values()) < 1e-12);
    REQUIRE(maxRelativeError(dvSum, all.dv.values()) < 1e-12);
  }
}

} // namespace sharc::kernels::test
