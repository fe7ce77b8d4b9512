//===- KernelsDecodeTest.cpp - attention a position at a time from a cache ===//
//
// The reference is the training forward's own path: rope over the whole
// sequence, then causal attention (both checked against float64 loops and
// finite differences in KernelsAttentionTest and KernelsForwardTest).
// Feeding the same q, k, v one position a step through decode_attention
// must give each position's row of that attention, and so must chunks of
// several positions a step (a prompt's prefill), a padding row repeating
// the chunk's last included.

#include "kernels/Attention.h"
#include "kernels/DecodeAttention.h"
#include "kernels/Rope.h"
#include "kernels/cpu/KernelThreads.h"
#include "tests/unit/kernels/AttentionTestShapes.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <limits>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

constexpr AttentionShape kShape{
    .seqLen = 7, .batch = 2, .numHeads = 4, .numKvHeads = 2, .headDim = 6};
constexpr double kTheta = 10000.0;

std::vector<double> rows(const std::vector<double> &values, int64_t first,
                         int64_t count, int64_t rowNumel) {
  return {values.begin() + first * rowNumel,
          values.begin() + (first + count) * rowNumel};
}

/// rope then causal attention over the whole sequence, rounded as stored.
std::vector<double> fullForward(DType dtype, const Tensor &q, const Tensor &k,
                                const Tensor &v) {
  Tensor qRope(dtype, q.numel()), kRope(dtype, k.numel());
  for (auto [x, y, heads] : {std::tuple{&q, &qRope, kShape.numHeads},
                             std::tuple{&k, &kRope, kShape.numKvHeads}})
    cpu::rope(RopeArgs{.x = x->cview(),
                       .y = y->view(),
                       .seqLen = kShape.seqLen,
                       .batch = kShape.batch,
                       .numHeads = heads,
                       .headDim = kShape.headDim,
                       .theta = kTheta});
  Tensor out(dtype, q.numel());
  std::vector<float> lse(kShape.lseNumel());
  cpu::attention(shaped(AttentionArgs{.q = qRope.cview(),
                                      .k = kRope.cview(),
                                      .v = v.cview(),
                                      .out = out.view(),
                                      .lse = lse.data()},
                        kShape));
  return out.values();
}

struct Cache {
  Tensor k, v;
};

/// One decode step of every sample at `positions` ([T, B]), from T rows of
/// q, k, v.
std::vector<double> decodeStep(DType dtype, Cache &cache,
                               const std::vector<double> &q,
                               const std::vector<double> &k,
                               const std::vector<double> &v,
                               const std::vector<int32_t> &positions) {
  Tensor qRow(dtype, q), kRow(dtype, k), vRow(dtype, v);
  Tensor out(dtype, q.size());
  cpu::decodeAttention(DecodeAttentionArgs{
      .q = qRow.cview(),
      .k = kRow.cview(),
      .v = vRow.cview(),
      .kCache = cache.k.view(),
      .vCache = cache.v.view(),
      .positions = positions.data(),
      .out = out.view(),
      .batch = kShape.batch,
      .numHeads = kShape.numHeads,
      .numKvHeads = kShape.numKvHeads,
      .headDim = kShape.headDim,
      .cacheLen = kShape.seqLen,
      .theta = kTheta,
      .rows = static_cast<int64_t>(positions.size()) / kShape.batch});
  return out.values();
}

/// Random q, k, v of the whole sequence as stored, rope then causal
/// attention over it, caches of NaN (a read past a sample's position would
/// show), and the dtype's bound on the relative error.
struct Sequence {
  std::vector<double> q, k, v, expect;
  Cache cache;
  double tolerance;
};

Sequence randomSequence(DType dtype, std::mt19937 &rng) {
  Tensor q(dtype, randomValues(kShape.qNumel(), rng, 2.0));
  Tensor k(dtype, randomValues(kShape.kvNumel(), rng, 2.0));
  Tensor v(dtype, randomValues(kShape.kvNumel(), rng));
  std::vector<double> nans(kShape.kvNumel(),
                           std::numeric_limits<double>::quiet_NaN());
  return Sequence{q.values(),
                  k.values(),
                  v.values(),
                  fullForward(dtype, q, k, v),
                  Cache{Tensor(dtype, nans), Tensor(dtype, nans)},
                  dtype == DType::F64   ? 1e-12
                  : dtype == DType::F32 ? 2e-6
                                        : 2e-2};
}

} // namespace

TEST_CASE("decode attention a position at a time is rope then causal "
          "attention over the sequence",
          "[kernels]") {
  std::mt19937 rng(23);
  for (DType dtype : {DType::F64, DType::F32, DType::BF16}) {
    INFO("dtype " << dtypeName(dtype));
    Sequence seq = randomSequence(dtype, rng);
    for (int64_t s = 0; s < kShape.seqLen; ++s) {
      INFO("position " << s);
      std::vector<int32_t> positions(kShape.batch, static_cast<int32_t>(s));
      std::vector<double> out =
          decodeStep(dtype, seq.cache, rows(seq.q, s, 1, kShape.rowQ()),
                     rows(seq.k, s, 1, kShape.rowKv()),
                     rows(seq.v, s, 1, kShape.rowKv()), positions);
      REQUIRE(maxRelativeError(out, rows(seq.expect, s, 1, kShape.rowQ())) <
              seq.tolerance);
    }
    // Samples at different positions: sample 0 redoes position 2, sample 1
    // position 5 (the same inputs: the caches keep their values).
    std::vector<int32_t> positions{2, 5};
    std::vector<double> q2(kShape.rowQ()), k2(kShape.rowKv()),
        v2(kShape.rowKv()), expect2(kShape.rowQ());
    for (int64_t b = 0; b < kShape.batch; ++b) {
      int64_t s = positions[b];
      int64_t qWidth = kShape.rowQ() / kShape.batch;
      int64_t kvWidth = kShape.rowKv() / kShape.batch;
      for (int64_t i = 0; i < qWidth; ++i) {
        q2[b * qWidth + i] = seq.q[s * kShape.rowQ() + b * qWidth + i];
        expect2[b * qWidth + i] =
            seq.expect[s * kShape.rowQ() + b * qWidth + i];
      }
      for (int64_t i = 0; i < kvWidth; ++i) {
        k2[b * kvWidth + i] = seq.k[s * kShape.rowKv() + b * kvWidth + i];
        v2[b * kvWidth + i] = seq.v[s * kShape.rowKv() + b * kvWidth + i];
      }
    }
    REQUIRE(
        maxRelativeError(decodeStep(dtype, seq.cache, q2, k2, v2, positions),
                         expect2) < seq.tolerance);
  }
}

TEST_CASE("decode attention over chunks of positions is rope then causal "
          "attention over the sequence",
          "[kernels]") {
  std::mt19937 rng(29);
  for (DType dtype : {DType::F64, DType::F32, DType::BF16}) {
    INFO("dtype " << dtypeName(dtype));
    Sequence seq = randomSequence(dtype, rng);
    // Positions 0-2, then 3-5 with a fourth row repeating 5 (padding),
    // then 6 alone: 7 positions in chunks of 3, 4 and 1 rows.
    for (auto [first, count, pad] :
         {std::tuple{0, 3, 0}, {3, 3, 1}, {6, 1, 0}}) {
      INFO("chunk from " << first);
      std::vector<int32_t> positions;
      std::vector<double> qc, kc, vc;
      for (int64_t t = 0; t < count + pad; ++t) {
        int64_t s = first + std::min<int64_t>(t, count - 1);
        for (int64_t b = 0; b < kShape.batch; ++b)
          positions.push_back(static_cast<int32_t>(s));
        for (auto [from, to, width] : {std::tuple{&seq.q, &qc, kShape.rowQ()},
                                       {&seq.k, &kc, kShape.rowKv()},
                                       {&seq.v, &vc, kShape.rowKv()}}) {
          std::vector<double> row = rows(*from, s, 1, width);
          to->insert(to->end(), row.begin(), row.end());
        }
      }
      std::vector<double> out =
          decodeStep(dtype, seq.cache, qc, kc, vc, positions);
      REQUIRE(maxRelativeError(rows(out, 0, count, kShape.rowQ()),
                               rows(seq.expect, first, count, kShape.rowQ())) <
              seq.tolerance);
      if (pad > 0)
        REQUIRE(rows(out, count, 1, kShape.rowQ()) ==
                rows(out, count - 1, 1, kShape.rowQ()));
    }
  }
}

TEST_CASE("decode attention's (row, head) shares give one thread's bits",
          "[kernels]") {
  // 16 rows of a prefill at positions 584-599 of a 600-position cache, 4
  // heads over 2: 4.8 million multiply-adds, three shares on three
  // threads, each unit summed as on one.
  constexpr int64_t kCacheLen = 600, kRows = 16, kHeads = 4, kKvHeads = 2,
                    kDim = 64;
  std::mt19937 rng(31);
  for (DType dtype : {DType::F32, DType::BF16}) {
    INFO("dtype " << dtypeName(dtype));
    std::vector<double> q = randomValues(kRows * kHeads * kDim, rng, 2.0);
    std::vector<double> k = randomValues(kRows * kKvHeads * kDim, rng, 2.0);
    std::vector<double> v = randomValues(kRows * kKvHeads * kDim, rng);
    std::vector<double> kCache = randomValues(kCacheLen * kKvHeads * kDim, rng);
    std::vector<double> vCache = randomValues(kCacheLen * kKvHeads * kDim, rng);
    std::vector<int32_t> positions;
    for (int32_t t = 0; t < kRows; ++t)
      positions.push_back(static_cast<int32_t>(kCacheLen - kRows + t));
    auto run = [&](int64_t threads) {
      cpu::setKernelThreads(threads);
      Tensor qT(dtype, q), kT(dtype, k), vT(dtype, v);
      Tensor kCacheT(dtype, kCache), vCacheT(dtype, vCache);
      Tensor out(dtype, q.size());
      cpu::decodeAttention(DecodeAttentionArgs{.q = qT.cview(),
                                               .k = kT.cview(),
                                               .v = vT.cview(),
                                               .kCache = kCacheT.view(),
                                               .vCache = vCacheT.view(),
                                               .positions = positions.data(),
                                               .out = out.view(),
                                               .batch = 1,
                                               .numHeads = kHeads,
                                               .numKvHeads = kKvHeads,
                                               .headDim = kDim,
                                               .cacheLen = kCacheLen,
                                               .theta = kTheta,
                                               .rows = kRows});
      cpu::setKernelThreads(1);
      return out.values();
    };
    REQUIRE(run(3) == run(1));
  }
}
