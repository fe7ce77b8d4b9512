//===- KernelsAttentionTest.cpp - causal GQA attention and its gradient ---===//

#include "kernels/Attention.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::ColumnWindow;
using sharc::kernels::test::maxRelativeError;
using sharc::kernels::test::numericGradient;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;
using sharc::kernels::test::weightedSum;

namespace {

// Eight query heads would be plain MHA at numKvHeads == numHeads; 4 over 2
// makes each KV head serve a group of two query heads.
constexpr int64_t kSeqLen = 5, kBatch = 2, kNumHeads = 4, kNumKvHeads = 2,
                  kHeadDim = 6;
constexpr int64_t kQNumel = kSeqLen * kBatch * kNumHeads * kHeadDim;
constexpr int64_t kKvNumel = kSeqLen * kBatch * kNumKvHeads * kHeadDim;
constexpr int64_t kLseNumel = kBatch * kNumHeads * kSeqLen;

struct Forward {
  Tensor out;
  std::vector<float> lse;
};

Forward runAttention(DType dtype, const Tensor &q, const Tensor &k,
                     const Tensor &v) {
  Forward result{Tensor(dtype, kQNumel), std::vector<float>(kLseNumel)};
  cpu::attention({.q = q.cview(),
                  .k = k.cview(),
                  .v = v.cview(),
                  .out = result.out.view(),
                  .lse = result.lse.data(),
                  .seqLen = kSeqLen,
                  .batch = kBatch,
                  .numHeads = kNumHeads,
                  .numKvHeads = kNumKvHeads,
                  .headDim = kHeadDim});
  return result;
}

} // namespace

TEST_CASE("grouped-query attention matches a float64 loop", "[kernels]") {
  std::mt19937 rng(11);
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor q(dtype, randomValues(kQNumel, rng, 2.0));
    Tensor k(dtype, randomValues(kKvNumel, rng, 2.0));
    Tensor v(dtype, randomValues(kKvNumel, rng));
    Forward forward = runAttention(dtype, q, k, v);
    std::vector<double> expectOut(kQNumel, 0.0), expectLse(kLseNumel);
    const double scale = 1 / std::sqrt(double(kHeadDim));
    for (int64_t b = 0; b < kBatch; ++b)
      for (int64_t h = 0; h < kNumHeads; ++h) {
        int64_t kvHead = h / (kNumHeads / kNumKvHeads);
        for (int64_t i = 0; i < kSeqLen; ++i) {
          int64_t qBase = ((i * kBatch + b) * kNumHeads + h) * kHeadDim;
          std::vector<double> scores(i + 1);
          double sumExp = 0;
          for (int64_t j = 0; j <= i; ++j) {
            int64_t kBase =
                ((j * kBatch + b) * kNumKvHeads + kvHead) * kHeadDim;
            double dot = 0;
            for (int64_t d = 0; d < kHeadDim; ++d)
              dot += q.at(qBase + d) * k.at(kBase + d);
            scores[j] = scale * dot;
            sumExp += std::exp(scores[j]);
          }
          double lse = std::log(sumExp);
          expectLse[(b * kNumHeads + h) * kSeqLen + i] = lse;
          for (int64_t j = 0; j <= i; ++j) {
            int64_t vBase =
                ((j * kBatch + b) * kNumKvHeads + kvHead) * kHeadDim;
            for (int64_t d = 0; d < kHeadDim; ++d)
              expectOut[qBase + d] +=
                  std::exp(scores[j] - lse) * v.at(vBase + d);
          }
        }
      }
    INFO("dtype " << dtypeName(dtype));
    double tolerance = dtype == DType::F64 ? 1e-13 : 2e-6;
    REQUIRE(maxRelativeError(forward.out.values(), expectOut) < tolerance);
    std::vector<double> lse(forward.lse.begin(), forward.lse.end());
    REQUIRE(maxRelativeError(lse, expectLse) < 2e-6);
  }
}

TEST_CASE("attention at position i ignores keys and values after i",
          "[kernels]") {
  std::mt19937 rng(12);
  Tensor q(DType::F32, randomValues(kQNumel, rng));
  std::vector<double> kValues = randomValues(kKvNumel, rng);
  std::vector<double> vValues = randomValues(kKvNumel, rng);
  Forward before = runAttention(DType::F32, q, Tensor(DType::F32, kValues),
                                Tensor(DType::F32, vValues));
  for (int64_t cut = 0; cut + 1 < kSeqLen; ++cut) {
    // Replace every key and value at positions > cut.
    std::vector<double> kChanged = kValues, vChanged = vValues;
    const int64_t rowNumel = kBatch * kNumKvHeads * kHeadDim;
    for (int64_t i = (cut + 1) * rowNumel; i < kKvNumel; ++i) {
      kChanged[i] = -3 * kChanged[i];
      vChanged[i] = 5 + vChanged[i];
    }
    Forward after = runAttention(DType::F32, q, Tensor(DType::F32, kChanged),
                                 Tensor(DType::F32, vChanged));
    const int64_t qRowNumel = kBatch * kNumHeads * kHeadDim;
    for (int64_t i = 0; i < kQNumel; ++i) {
      INFO("cut " << cut << ", element " << i);
      if (i < (cut + 1) * qRowNumel)
        REQUIRE(after.out.at(i) == before.out.at(i));
      else
        REQUIRE(after.out.at(i) != before.out.at(i)); // the change was seen
    }
  }
}

TEST_CASE("attention gradients match finite differences of the forward",
          "[kernels]") {
  std::mt19937 rng(13);
  const DType f64 = DType::F64;
  std::vector<double> qValues = randomValues(kQNumel, rng, 2.0);
  std::vector<double> kValues = randomValues(kKvNumel, rng, 2.0);
  std::vector<double> vValues = randomValues(kKvNumel, rng);
  std::vector<double> cotangent = randomValues(kQNumel, rng);
  Tensor q(f64, qValues), k(f64, kValues), v(f64, vValues);
  Tensor dout(f64, cotangent);
  Forward forward = runAttention(f64, q, k, v);
  Tensor dq(f64, kQNumel), dk(f64, kKvNumel), dv(f64, kKvNumel);
  cpu::attentionGrad({.q = q.cview(),
                      .k = k.cview(),
                      .v = v.cview(),
                      .out = forward.out.cview(),
                      .dout = dout.cview(),
                      .lse = forward.lse.data(),
                      .dq = dq.view(),
                      .dk = dk.view(),
                      .dv = dv.view(),
                      .seqLen = kSeqLen,
                      .batch = kBatch,
                      .numHeads = kNumHeads,
                      .numKvHeads = kNumKvHeads,
                      .headDim = kHeadDim});
  auto objective = [&](const std::vector<double> &qs,
                       const std::vector<double> &ks,
                       const std::vector<double> &vs) {
    Forward result =
        runAttention(f64, Tensor(f64, qs), Tensor(f64, ks), Tensor(f64, vs));
    return weightedSum(cotangent, result.out.values());
  };
  auto numericDq = numericGradient(qValues, [&](const auto &point) {
    return objective(point, kValues, vValues);
  });
  auto numericDk = numericGradient(kValues, [&](const auto &point) {
    return objective(qValues, point, vValues);
  });
  auto numericDv = numericGradient(vValues, [&](const auto &point) {
    return objective(qValues, kValues, point);
  });
  // The backward recomputes p from the fp32 lse, so ~1e-7 is its floor.
  CHECK(maxRelativeError(dq.values(), numericDq) < 1e-6);
  CHECK(maxRelativeError(dk.values(), numericDk) < 1e-6);
  CHECK(maxRelativeError(dv.values(), numericDv) < 1e-6);
}

TEST_CASE("a query block against all keys is those rows of full attention, "
          "and the blocks' gradients sum to the full ones",
          "[kernels]") {
  // Context parallelism's K/V all-gather: block r of numBlocks holds
  // queries r*blockLen.. and meets all seqLen keys (kernels/Attention.h).
  constexpr int64_t seqLen = 6, batch = 2, heads = 4, kvHeads = 2, dim = 4;
  const DType f64 = DType::F64;
  const int64_t rowQ = batch * heads * dim, rowKv = batch * kvHeads * dim;
  std::mt19937 rng(14);
  std::vector<double> qValues = randomValues(seqLen * rowQ, rng, 2.0);
  std::vector<double> kValues = randomValues(seqLen * rowKv, rng, 2.0);
  std::vector<double> vValues = randomValues(seqLen * rowKv, rng);
  std::vector<double> cotangent = randomValues(seqLen * rowQ, rng);
  Tensor q(f64, qValues), k(f64, kValues), v(f64, vValues),
      dout(f64, cotangent);
  Tensor out(f64, seqLen * rowQ), dq(f64, seqLen * rowQ);
  Tensor dk(f64, seqLen * rowKv), dv(f64, seqLen * rowKv);
  std::vector<float> lse(batch * heads * seqLen);
  AttentionArgs whole{.q = q.cview(),
                      .k = k.cview(),
                      .v = v.cview(),
                      .out = out.view(),
                      .lse = lse.data(),
                      .seqLen = seqLen,
                      .batch = batch,
                      .numHeads = heads,
                      .numKvHeads = kvHeads,
                      .headDim = dim};
  cpu::attention(whole);
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
  for (int64_t numBlocks : {2, 3}) {
    const int64_t blockLen = seqLen / numBlocks;
    std::vector<double> dkSum(seqLen * rowKv, 0.0), dvSum(seqLen * rowKv, 0.0);
    for (int64_t r = 0; r < numBlocks; ++r) {
      INFO(numBlocks << " blocks, block " << r);
      auto rows = [&](const std::vector<double> &all) {
        return std::vector<double>(all.begin() + r * blockLen * rowQ,
                                   all.begin() + (r + 1) * blockLen * rowQ);
      };
      Tensor qBlock(f64, rows(qValues)), doutBlock(f64, rows(cotangent));
      Tensor outBlock(f64, blockLen * rowQ), dqBlock(f64, blockLen * rowQ);
      Tensor dkPart(f64, seqLen * rowKv), dvPart(f64, seqLen * rowKv);
      std::vector<float> lseBlock(batch * heads * blockLen);
      cpu::attention({.q = qBlock.cview(),
                      .k = k.cview(),
                      .v = v.cview(),
                      .out = outBlock.view(),
                      .lse = lseBlock.data(),
                      .seqLen = blockLen,
                      .batch = batch,
                      .numHeads = heads,
                      .numKvHeads = kvHeads,
                      .headDim = dim,
                      .kvSeqLen = seqLen,
                      .queryStart = r * blockLen});
      REQUIRE(maxRelativeError(outBlock.values(), rows(out.values())) < 1e-13);
      for (int64_t bh = 0; bh < batch * heads; ++bh)
        for (int64_t i = 0; i < blockLen; ++i)
          REQUIRE(lseBlock[bh * blockLen + i] ==
                  lse[bh * seqLen + r * blockLen + i]);
      cpu::attentionGrad({.q = qBlock.cview(),
                          .k = k.cview(),
                          .v = v.cview(),
                          .out = outBlock.cview(),
                          .dout = doutBlock.cview(),
                          .lse = lseBlock.data(),
                          .dq = dqBlock.view(),
                          .dk = dkPart.view(),
                          .dv = dvPart.view(),
                          .seqLen = blockLen,
                          .batch = batch,
                          .numHeads = heads,
                          .numKvHeads = kvHeads,
                          .headDim = dim,
                          .kvSeqLen = seqLen,
                          .queryStart = r * blockLen});
      REQUIRE(maxRelativeError(dqBlock.values(), rows(dq.values())) < 1e-12);
      for (int64_t i = 0; i < seqLen * rowKv; ++i) {
        dkSum[i] += dkPart.at(i);
        dvSum[i] += dvPart.at(i);
      }
    }
    INFO(numBlocks << " blocks");
    REQUIRE(maxRelativeError(dkSum, dk.values()) < 1e-12);
    REQUIRE(maxRelativeError(dvSum, dv.values()) < 1e-12);
  }
}

TEST_CASE("attention reads v and writes dv as columns of wider rows",
          "[kernels]") {
  // The fused q/k/v projection's v: the last kNumKvHeads heads of rows
  // holding q, k and v side by side.
  std::mt19937 rng(14);
  const DType f32 = DType::F32;
  const int64_t kvWidth = kNumKvHeads * kHeadDim;
  ColumnWindow window{kSeqLen * kBatch, kvWidth,
                      (kNumHeads + 2 * kNumKvHeads) * kHeadDim,
                      (kNumHeads + kNumKvHeads) * kHeadDim};
  const double fill = 9.0;
  Tensor q(f32, randomValues(kQNumel, rng, 2.0));
  Tensor k(f32, randomValues(kKvNumel, rng, 2.0));
  Tensor v(f32, randomValues(kKvNumel, rng));
  Tensor dout(f32, randomValues(kQNumel, rng));
  Tensor wideV(f32, window.embed(v.values(), fill));
  const void *vColumns =
      static_cast<const float *>(wideV.cview().data) + window.offset;
  Forward packed = runAttention(f32, q, k, v);
  Forward strided{Tensor(f32, kQNumel), std::vector<float>(kLseNumel)};
  AttentionArgs forward{.q = q.cview(),
                        .k = k.cview(),
                        .v = {vColumns, f32},
                        .out = strided.out.view(),
                        .lse = strided.lse.data(),
                        .seqLen = kSeqLen,
                        .batch = kBatch,
                        .numHeads = kNumHeads,
                        .numKvHeads = kNumKvHeads,
                        .headDim = kHeadDim,
                        .vPitch = window.pitch};
  cpu::attention(forward);
  REQUIRE(strided.out.values() == packed.out.values());
  REQUIRE(strided.lse == packed.lse);

  Tensor dq(f32, kQNumel), dk(f32, kKvNumel), dv(f32, kKvNumel);
  AttentionGradArgs backward{.q = q.cview(),
                             .k = k.cview(),
                             .v = v.cview(),
                             .out = packed.out.cview(),
                             .dout = dout.cview(),
                             .lse = packed.lse.data(),
                             .dq = dq.view(),
                             .dk = dk.view(),
                             .dv = dv.view(),
                             .seqLen = kSeqLen,
                             .batch = kBatch,
                             .numHeads = kNumHeads,
                             .numKvHeads = kNumKvHeads,
                             .headDim = kHeadDim};
  cpu::attentionGrad(backward);
  Tensor stridedDq(f32, kQNumel), stridedDk(f32, kKvNumel);
  Tensor wideDv(f32, std::vector<double>(window.rows * window.pitch, fill));
  backward.v = {vColumns, f32};
  backward.vPitch = window.pitch;
  backward.dq = stridedDq.view();
  backward.dk = stridedDk.view();
  backward.dv = {static_cast<float *>(wideDv.view().data) + window.offset, f32};
  backward.dvPitch = window.pitch;
  cpu::attentionGrad(backward);
  REQUIRE(stridedDq.values() == dq.values());
  REQUIRE(stridedDk.values() == dk.values());
  REQUIRE(window.extract(wideDv.values()) == dv.values());
  REQUIRE(window.untouchedOutside(wideDv.values(), fill));
}
