//===- KernelsNormRopeTest.cpp - rms_norm_rope against its two parts ------===//
//
// The fused per-head norm and rope (kernels/RmsNormRope.h) must be
// rms_norm then rope, and its backward rope_grad then rms_norm_grad, bit
// for bit on f32 and f64 storage (nothing is rounded in between there);
// on bf16 it must be closer to the float64 composition than the bound of a
// bf16 op. The backward is also checked against finite differences of the
// forward, so the pair is right on its own and not only equal to the parts.
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNorm.h"
#include "kernels/RmsNormRope.h"
#include "kernels/Rope.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>

#include <cstring>

using namespace sharc;
using namespace sharc::kernels;
using namespace sharc::kernels::test;

namespace {

struct Shape {
  int64_t seqLen, batch, numHeads, headDim, positionOffset;
  double theta, eps;
  int64_t numel() const { return seqLen * batch * numHeads * headDim; }
};

/// The inputs of one case, stored in `dtype`.
struct Inputs {
  Tensor x, w, dy;
  Inputs(DType dtype, const Shape &s, std::mt19937 &rng)
      : x(dtype, randomValues(s.numel(), rng, 3.0)),
        w(dtype, randomValues(s.headDim, rng)),
        dy(dtype, randomValues(s.numel(), rng)) {}
};

RmsNormRopeArgs forwardArgs(const Shape &s, const Inputs &in, Tensor &y) {
  return {.x = in.x.cview(),
          .w = in.w.cview(),
          .y = y.view(),
          .seqLen = s.seqLen,
          .batch = s.batch,
          .numHeads = s.numHeads,
          .headDim = s.headDim,
          .positionOffset = s.positionOffset,
          .eps = s.eps,
          .theta = s.theta};
}

RmsNormRopeGradArgs backwardArgs(const Shape &s, const Inputs &in, Tensor &dx,
                                 Tensor &dw) {
  return {.x = in.x.cview(),
          .w = in.w.cview(),
          .dy = in.dy.cview(),
          .dx = dx.view(),
          .dw = dw.view(),
          .seqLen = s.seqLen,
          .batch = s.batch,
          .numHeads = s.numHeads,
          .headDim = s.headDim,
          .positionOffset = s.positionOffset,
          .eps = s.eps,
          .theta = s.theta};
}

RopeArgs ropeArgs(const Shape &s, ConstTensorView x, TensorView y,
                  bool inverse) {
  return {.x = x,
          .y = y,
          .seqLen = s.seqLen,
          .batch = s.batch,
          .numHeads = s.numHeads,
          .headDim = s.headDim,
          .positionOffset = s.positionOffset,
          .theta = s.theta,
          .inverse = inverse};
}

/// y of rms_norm then rope, each rounded to `dtype` storage.
Tensor composedForward(DType dtype, const Shape &s, const Inputs &in) {
  Tensor normed(dtype, s.numel()), y(dtype, s.numel());
  int64_t cols = s.numHeads * s.headDim;
  cpu::rmsNorm({.x = in.x.cview(),
                .w = in.w.cview(),
                .y = normed.view(),
                .rows = s.seqLen * s.batch,
                .cols = cols,
                .groupSize = s.headDim,
                .eps = s.eps});
  cpu::rope(ropeArgs(s, normed.cview(), y.view(), false));
  return y;
}

/// dx and dw of rope_grad then rms_norm_grad.
std::pair<Tensor, Tensor> composedBackward(DType dtype, const Shape &s,
                                           const Inputs &in) {
  Tensor rotated(dtype, s.numel()), dx(dtype, s.numel()), dw(dtype, s.headDim);
  cpu::rope(ropeArgs(s, in.dy.cview(), rotated.view(), true));
  cpu::rmsNormGrad({.x = in.x.cview(),
                    .w = in.w.cview(),
                    .dy = rotated.cview(),
                    .dx = dx.view(),
                    .dw = dw.view(),
                    .rows = s.seqLen * s.batch,
                    .cols = s.numHeads * s.headDim,
                    .groupSize = s.headDim,
                    .eps = s.eps});
  return {std::move(dx), std::move(dw)};
}

void requireSameBits(const Tensor &a, const Tensor &b) {
  REQUIRE(a.numel() == b.numel());
  std::vector<double> va = a.values(), vb = b.values();
  for (size_t i = 0; i < va.size(); ++i) {
    INFO("element " << i << ": " << va[i] << " vs " << vb[i]);
    REQUIRE(std::memcmp(&va[i], &vb[i], sizeof(double)) == 0);
  }
}

// An offset past the first period, head dims with an odd and an even
// number of pairs, one head and several.
const Shape kShapes[] = {{7, 2, 3, 34, 0, 1e6, 1e-6},
                         {5, 3, 2, 16, 900, 1e4, 1e-5},
                         {3, 1, 1, 96, 4000, 1e6, 1e-6}};

} // namespace

TEST_CASE("rms_norm_rope is rms_norm then rope, bit for bit on f32 and f64",
          "[kernels]") {
  std::mt19937 rng(81);
  for (const Shape &s : kShapes)
    for (DType dtype : {DType::F32, DType::F64}) {
      INFO("head dim " << s.headDim << ", dtype " << dtypeName(dtype));
      Inputs in(dtype, s, rng);
      Tensor y(dtype, s.numel()), dx(dtype, s.numel()), dw(dtype, s.headDim);
      cpu::rmsNormRope(forwardArgs(s, in, y));
      requireSameBits(y, composedForward(dtype, s, in));
      cpu::rmsNormRopeGrad(backwardArgs(s, in, dx, dw));
      auto [wantDx, wantDw] = composedBackward(dtype, s, in);
      requireSameBits(dx, wantDx);
      requireSameBits(dw, wantDw);
    }
}

TEST_CASE("bf16 rms_norm_rope keeps fp32 between the norm and the rotation",
          "[kernels]") {
  std::mt19937 rng(82);
  for (const Shape &s : kShapes) {
    INFO("head dim " << s.headDim);
    Inputs in(DType::BF16, s, rng);
    // The float64 composition on the same stored bf16 values.
    Inputs wide(DType::F64, s, rng);
    wide.x = Tensor(DType::F64, in.x.values());
    wide.w = Tensor(DType::F64, in.w.values());
    wide.dy = Tensor(DType::F64, in.dy.values());
    Tensor y(DType::BF16, s.numel()), dx(DType::BF16, s.numel()),
        dw(DType::BF16, s.headDim);
    cpu::rmsNormRope(forwardArgs(s, in, y));
    cpu::rmsNormRopeGrad(backwardArgs(s, in, dx, dw));
    auto [wantDx, wantDw] = composedBackward(DType::F64, s, wide);
    // One bf16 rounding of each output: 2^-8 relative at most.
    CHECK(maxRelativeError(y.values(),
                           composedForward(DType::F64, s, wide).values()) <
          4e-3);
    CHECK(maxRelativeError(dx.values(), wantDx.values()) < 4e-3);
    CHECK(maxRelativeError(dw.values(), wantDw.values()) < 4e-3);
  }
}

TEST_CASE("rms_norm_rope_grad is the gradient of rms_norm_rope", "[kernels]") {
  const Shape s{3, 2, 2, 8, 7, 1e4, 1e-6};
  std::mt19937 rng(83);
  Inputs in(DType::F64, s, rng);
  Tensor dx(DType::F64, s.numel()), dw(DType::F64, s.headDim);
  cpu::rmsNormRopeGrad(backwardArgs(s, in, dx, dw));
  std::vector<double> cotangent = in.dy.values();
  auto objective = [&](const std::vector<double> &x,
                       const std::vector<double> &w) {
    Inputs point = in;
    point.x = Tensor(DType::F64, x);
    point.w = Tensor(DType::F64, w);
    Tensor y(DType::F64, s.numel());
    cpu::rmsNormRope(forwardArgs(s, point, y));
    return weightedSum(cotangent, y.values());
  };
  std::vector<double> x = in.x.values(), w = in.w.values();
  std::vector<double> numericDx = numericGradient(
      x, [&](const std::vector<double> &p) { return objective(p, w); });
  std::vector<double> numericDw = numericGradient(
      w, [&](const std::vector<double> &p) { return objective(x, p); });
  REQUIRE(maxRelativeError(dx.values(), numericDx) < 1e-6);
  REQUIRE(maxRelativeError(dw.values(), numericDw) < 1e-6);
}

TEST_CASE("rms_norm_rope reads x and writes dx as columns of wider rows",
          "[kernels]") {
  // The fused q/k/v projection's q: heads 2..4 of 7 per row, so rows are
  // 7 heads apart and x starts two heads in.
  std::mt19937 rng(84);
  for (const Shape &s : kShapes)
    for (DType dtype : {DType::F32, DType::BF16}) {
      INFO("head dim " << s.headDim << ", dtype " << dtypeName(dtype));
      ColumnWindow window{s.seqLen * s.batch, s.numHeads * s.headDim,
                          (s.numHeads + 4) * s.headDim, 2 * s.headDim};
      const double fill = -7.0;
      Inputs in(dtype, s, rng);
      Tensor wideX(dtype, window.embed(in.x.values(), fill));
      Tensor y(dtype, s.numel()), dx(dtype, s.numel()), dw(dtype, s.headDim);
      cpu::rmsNormRope(forwardArgs(s, in, y));
      cpu::rmsNormRopeGrad(backwardArgs(s, in, dx, dw));

      Tensor stridedY(dtype, s.numel()), stridedDw(dtype, s.headDim);
      Tensor wideDx(dtype,
                    std::vector<double>(window.rows * window.pitch, fill));
      RmsNormRopeArgs forward = forwardArgs(s, in, stridedY);
      forward.x = {static_cast<const char *>(wideX.cview().data) +
                       window.offset * dtypeSize(dtype),
                   dtype};
      forward.xPitch = window.pitch;
      cpu::rmsNormRope(forward);
      RmsNormRopeGradArgs backward = backwardArgs(s, in, wideDx, stridedDw);
      backward.x = forward.x;
      backward.xPitch = window.pitch;
      backward.dx = {static_cast<char *>(wideDx.view().data) +
                         window.offset * dtypeSize(dtype),
                     dtype};
      backward.dxPitch = window.pitch;
      cpu::rmsNormRopeGrad(backward);

      requireSameBits(stridedY, y);
      requireSameBits(stridedDw, dw);
      requireSameBits(Tensor(DType::F64, window.extract(wideDx.values())),
                      Tensor(DType::F64, dx.values()));
      REQUIRE(window.untouchedOutside(wideDx.values(), fill));
    }
}
