//===- KernelsBf16Test.cpp - bf16 storage: rounding and fp32 parity -------===//

#include "kernels/AdamW.h"
#include "kernels/Attention.h"
#include "kernels/Elementwise.h"
#include "kernels/Matmul.h"
#include "kernels/RmsNorm.h"
#include "kernels/Rope.h"
#include "tests/unit/kernels/AdamWNonFiniteCases.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

using namespace sharc;
using namespace sharc::kernels;
using sharc::kernels::test::maxRelativeError;
using sharc::kernels::test::NonFiniteCase;
using sharc::kernels::test::nonFiniteCases;
using sharc::kernels::test::NonFiniteUpdate;
using sharc::kernels::test::randomValues;
using sharc::kernels::test::Tensor;

namespace {

uint16_t storedBits(double value) {
  uint16_t bits = 0;
  storeElement({&bits, DType::BF16}, 0, value);
  return bits;
}

/// Random values that bf16 holds exactly, so F32 and BF16 inputs agree.
std::vector<double> bf16Values(int64_t numel, std::mt19937 &rng) {
  return Tensor(DType::BF16, randomValues(numel, rng)).values();
}

/// Runs `op` on inputs stored as F32 and as BF16 (same values) and checks
/// that the bf16 output is the fp32 output rounded once: same fp32 math.
void requireBf16IsRoundedF32(
    const std::vector<std::vector<double>> &inputs, int64_t outNumel,
    const std::function<void(const std::vector<Tensor> &, Tensor &)> &op) {
  std::vector<Tensor> f32Inputs, bf16Inputs;
  for (const auto &values : inputs) {
    f32Inputs.emplace_back(DType::F32, values);
    bf16Inputs.emplace_back(DType::BF16, values);
  }
  Tensor f32Out(DType::F32, outNumel), bf16Out(DType::BF16, outNumel);
  op(f32Inputs, f32Out);
  op(bf16Inputs, bf16Out);
  const auto *f32Data = static_cast<const float *>(f32Out.cview().data);
  const auto *bf16Data = static_cast<const uint16_t *>(bf16Out.cview().data);
  for (int64_t i = 0; i < outNumel; ++i) {
    INFO("element " << i);
    REQUIRE(bf16Data[i] == floatToBf16(f32Data[i]));
  }
  // And that is within bf16's relative step (2^-8) of the fp32 result.
  REQUIRE(maxRelativeError(bf16Out.values(), f32Out.values()) < 1.0 / 256);
}

} // namespace

TEST_CASE("bf16 stores round to nearest even through fp32", "[kernels]") {
  const double ulp = std::ldexp(1.0, -7); // bf16 step in [1, 2)
  CHECK(storedBits(1.0) == 0x3f80);
  CHECK(storedBits(1.0 + ulp / 2) == 0x3f80);     // tie, even down
  CHECK(storedBits(1.0 + 3 * ulp / 2) == 0x3f82); // tie, even up
  CHECK(storedBits(1.0 + ulp / 2 + std::ldexp(1.0, -20)) == 0x3f81); // above
  CHECK(storedBits(1.0 + ulp / 2 - std::ldexp(1.0, -20)) == 0x3f80); // below
  CHECK(storedBits(-(1.0 + 3 * ulp / 2)) == 0xbf82);
  // 2^-30 above the tie vanishes in the fp32 rounding that comes first, so
  // the tie rule applies (a direct double-to-bf16 rounding would go up).
  CHECK(storedBits(1.0 + ulp / 2 + std::ldexp(1.0, -30)) == 0x3f80);
  CHECK(std::isnan(bf16ToFloat(storedBits(NAN))));
}

TEST_CASE("bf16 matmul, dgrad and wgrad are the fp32 results rounded",
          "[kernels]") {
  std::mt19937 rng(41);
  const int64_t m = 9, n = 13, k = 11;
  auto x = bf16Values(m * k, rng), w = bf16Values(n * k, rng),
       dy = bf16Values(m * n, rng);
  requireBf16IsRoundedF32({x, w}, m * n, [&](const auto &in, Tensor &out) {
    cpu::matmul({.x = in[0].cview(),
                 .w = in[1].cview(),
                 .y = out.view(),
                 .m = m,
                 .n = n,
                 .k = k});
  });
  requireBf16IsRoundedF32({dy, w}, m * k, [&](const auto &in, Tensor &out) {
    cpu::matmulDgrad({.dy = in[0].cview(),
                      .w = in[1].cview(),
                      .dx = out.view(),
                      .m = m,
                      .n = n,
                      .k = k});
  });
  requireBf16IsRoundedF32({dy, x}, n * k, [&](const auto &in, Tensor &out) {
    cpu::matmulWgrad({.dy = in[0].cview(),
                      .x = in[1].cview(),
                      .dw = out.view(),
                      .m = m,
                      .n = n,
                      .k = k});
  });
}

TEST_CASE("bf16 rms norm, rope, swiglu and attention are fp32 rounded",
          "[kernels]") {
  std::mt19937 rng(42);
  const int64_t rows = 3, cols = 12, numel = rows * cols;
  auto x = bf16Values(numel, rng), w = bf16Values(cols, rng),
       up = bf16Values(numel, rng);
  requireBf16IsRoundedF32({x, w}, numel, [&](const auto &in, Tensor &out) {
    cpu::rmsNorm({.x = in[0].cview(),
                  .w = in[1].cview(),
                  .y = out.view(),
                  .rows = rows,
                  .cols = cols,
                  .groupSize = cols});
  });
  // [seqLen 3, batch 1, 2 heads of 6]
  requireBf16IsRoundedF32({x}, numel, [&](const auto &in, Tensor &out) {
    cpu::rope({.x = in[0].cview(),
               .y = out.view(),
               .seqLen = 3,
               .batch = 1,
               .numHeads = 2,
               .headDim = 6});
  });
  requireBf16IsRoundedF32({x, up}, numel, [&](const auto &in, Tensor &out) {
    cpu::swiglu({.gate = in[0].cview(),
                 .up = in[1].cview(),
                 .y = out.view(),
                 .numel = numel});
  });
  // q [3, 1, 2 heads * 6], k and v [3, 1, 1 head * 6]
  auto k = bf16Values(18, rng), v = bf16Values(18, rng);
  std::vector<float> lse(6);
  requireBf16IsRoundedF32({x, k, v}, numel, [&](const auto &in, Tensor &out) {
    cpu::attention({.q = in[0].cview(),
                    .k = in[1].cview(),
                    .v = in[2].cview(),
                    .out = out.view(),
                    .lse = lse.data(),
                    .seqLen = 3,
                    .batch = 1,
                    .numHeads = 2,
                    .numKvHeads = 1,
                    .headDim = 6});
  });
}

TEST_CASE("adamw with an f32 master is the f32 update, param its rounding",
          "[kernels]") {
  // bf16-mixed (kernels/AdamW.h): a bf16 parameter and gradient, an f32
  // master and f32 moments. The master must follow exactly the update of an
  // f32 parameter with f32 moments on the same gradients, and the bf16
  // parameter must be the master rounded, after every step.
  const int64_t numel = 517;
  std::mt19937 rng(31);
  std::vector<double> start = randomValues(numel, rng);
  Tensor reference(DType::F32, start), referenceM(DType::F32, numel),
      referenceV(DType::F32, numel);
  Tensor master(DType::F32, start), param(DType::BF16, start),
      m(DType::F32, numel), v(DType::F32, numel);
  Tensor pureBf16(DType::BF16, start), pureM(DType::BF16, numel),
      pureV(DType::BF16, numel);
  for (int64_t step = 1; step <= 4; ++step) {
    Tensor grad(DType::BF16, randomValues(numel, rng));
    auto args = [&](Tensor &p, Tensor &pm, Tensor &pv) {
      return AdamWArgs{.param = p.view(),
                       .m = pm.view(),
                       .v = pv.view(),
                       .grad = grad.cview(),
                       .numel = numel,
                       .step = step,
                       .lr = 1e-3,
                       .weightDecay = 0.1};
    };
    cpu::adamw(args(reference, referenceM, referenceV));
    AdamWArgs mixed = args(param, m, v);
    mixed.master = master.view();
    cpu::adamw(mixed);
    cpu::adamw(args(pureBf16, pureM, pureV));
    INFO("step " << step);
    REQUIRE(master.values() == reference.values());
    REQUIRE(m.values() == referenceM.values());
    REQUIRE(v.values() == referenceV.values());
    for (int64_t i = 0; i < numel; ++i)
      REQUIRE(param.at(i) == bf16ToFloat(storedBits(master.at(i))));
  }
  // Pure bf16 rounds every update away from the f32 run; the master does
  // not (relative error of a bf16 store is up to 2^-9).
  REQUIRE(maxRelativeError(pureBf16.values(), reference.values()) > 1e-4);
}

TEST_CASE("adamw flags exactly the updates that store a NaN or an infinity",
          "[kernels]") {
  const int64_t numel = 37;
  std::mt19937 rng(37);
  for (const NonFiniteCase &c : nonFiniteCases())
    for (unsigned before : {0u, 1u}) {
      INFO(c.name << ", flag " << before << " before");
      NonFiniteUpdate u(c, numel, 11, rng);
      Tensor weights(c.master ? DType::F32 : u.paramType, u.weights),
          param(u.paramType, u.param), m(u.stateType, u.m), v(u.stateType, u.v),
          grad(u.gradType, u.grad);
      unsigned flag = before;
      AdamWArgs args{.param = c.master ? param.view() : weights.view(),
                     .m = m.view(),
                     .v = v.view(),
                     .grad = grad.cview(),
                     .numel = numel,
                     .step = 2,
                     .lr = 1e-3,
                     .weightDecay = c.weightDecay,
                     .nonFinite = &flag};
      if (c.master)
        args.master = weights.view();
      cpu::adamw(args);
      // The flag is only ever set: a finite update leaves a 1 as it is.
      REQUIRE(flag == (c.storesNonFinite ? 1u : before));
      const Tensor &stored = c.master ? param : weights;
      bool allFinite = true;
      const std::vector<const Tensor *> storedTensors = {&stored, &m, &v};
      for (const Tensor *tensor : storedTensors)
        for (double value : tensor->values())
          allFinite = allFinite && std::isfinite(value);
      REQUIRE(allFinite == !c.storesNonFinite);
    }
}
