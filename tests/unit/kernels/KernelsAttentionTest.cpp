//===- KernelsAttentionTest.cpp - causal GQA attention and its gradient ---===//

#include "kernels/Attention.h"
#include "tests/unit/kernels/AttentionTestShapes.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

// Eight query heads would be plain MHA at numKvHeads == numHeads; 4 over 2
// makes each KV head serve a group of two query heads.
constexpr AttentionShape kShape{
    .seqLen = 5, .batch = 2, .numHeads = 4, .numKvHeads = 2, .headDim = 6};
constexpr int64_t kSeqLen = kShape.seqLen;
constexpr int64_t kQNumel = kShape.qNumel(), kKvNumel = kShape.kvNumel(),
                  kLseNumel = kShape.lseNumel();

struct Forward {
  Tensor out;
  std::vector<float> lse;
};

Forward runAttention(DType dtype, const Tensor &q, const Tensor &k,
                     const Tensor &v) {
  Forward result{Tensor(dtype, kQNumel), std::vector<float>(kLseNumel)};
  cpu::attention(shaped(AttentionArgs{.q = q.cview(),
                                      .k = k.cview(),
                                      .v = v.cview(),
                                      .out = result.out.view(),
                                      .lse = result.lse.data()},
                        kShape));
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
    ReferenceAttention expect =
        referenceAttention(kShape, q.values(), {}, k.values(), v.values());
    INFO("dtype " << dtypeName(dtype));
    double tolerance = dtype == DType::F64 ? 1e-13 : 2e-6;
    REQUIRE(maxRelativeError(forward.out.values(), expect.out) < tolerance);
    std::vector<double> lse(forward.lse.begin(), forward.lse.end());
    REQUIRE(maxRelativeError(lse, expect.lse) < 2e-6);
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
    const int64_t rowNumel = kShape.rowKv();
    for (int64_t i = (cut + 1) * rowNumel; i < kKvNumel; ++i) {
      kChanged[i] = -3 * kChanged[i];
      vChanged[i] = 5 + vChanged[i];
    }
    Forward after = runAttention(DType::F32, q, Tensor(DType::F32, kChanged),
                                 Tensor(DType::F32, vChanged));
    const int64_t qRowNumel = kShape.rowQ();
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
  cpu::attentionGrad(shaped(AttentionGradArgs{.q = q.cview(),
                                              .k = k.cview(),
                                              .v = v.cview(),
                                              .out = forward.out.cview(),
                                              .dout = dout.cview(),
                                              .lse = forward.lse.data(),
                                              .dq = dq.view(),
                                              .dk = dk.view(),
                                              .dv = dv.view()},
                            kShape));
  auto numeric =
      numericGradients({qValues, kValues, vValues}, [&](const auto &in) {
        Forward result = runAttention(f64, Tensor(f64, in[0]),
                                      Tensor(f64, in[1]), Tensor(f64, in[2]));
        return weightedSum(cotangent, result.out.values());
      });
  // The backward recomputes p from the fp32 lse, so ~1e-7 is its floor.
  CHECK(maxRelativeError(dq.values(), numeric[0]) < 1e-6);
  CHECK(maxRelativeError(dk.values(), numeric[1]) < 1e-6);
  CHECK(maxRelativeError(dv.values(), numeric[2]) < 1e-6);
}

TEST_CASE("a query block against all keys is those rows of full attention, "
          "and the blocks' gradients sum to the full ones",
          "[kernels]") {
  // Context parallelism's K/V all-gather: block r of numBlocks holds
  // queries r*blockLen.. and meets all seqLen keys (kernels/Attention.h).
  std::mt19937 rng(14);
  requireSplitQueriesMatchFull(
      SequenceSplit::Contiguous,
      {.seqLen = 6, .batch = 2, .numHeads = 4, .numKvHeads = 2, .headDim = 4},
      rng);
}

TEST_CASE("attention reads v and writes dv as columns of wider rows",
          "[kernels]") {
  // The fused q/k/v projection's v: the last numKvHeads heads of rows
  // holding q, k and v side by side.
  std::mt19937 rng(14);
  const DType f32 = DType::F32;
  const int64_t heads = kShape.numHeads, kvHeads = kShape.numKvHeads;
  ColumnWindow window{kSeqLen * kShape.batch, kvHeads * kShape.headDim,
                      (heads + 2 * kvHeads) * kShape.headDim,
                      (heads + kvHeads) * kShape.headDim};
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
  cpu::attention(shaped(AttentionArgs{.q = q.cview(),
                                      .k = k.cview(),
                                      .v = {vColumns, f32},
                                      .out = strided.out.view(),
                                      .lse = strided.lse.data(),
                                      .vPitch = window.pitch},
                        kShape));
  REQUIRE(strided.out.values() == packed.out.values());
  REQUIRE(strided.lse == packed.lse);

  Tensor dq(f32, kQNumel), dk(f32, kKvNumel), dv(f32, kKvNumel);
  AttentionGradArgs backward =
      shaped(AttentionGradArgs{.q = q.cview(),
                               .k = k.cview(),
                               .v = v.cview(),
                               .out = packed.out.cview(),
                               .dout = dout.cview(),
                               .lse = packed.lse.data(),
                               .dq = dq.view(),
                               .dk = dk.view(),
                               .dv = dv.view()},
             kShape);
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
