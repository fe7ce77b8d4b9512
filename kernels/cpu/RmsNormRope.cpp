//===- RmsNormRope.cpp - per-head RMSNorm fused with rope on the cpu ------===//
//
// Implements the math stated in kernels/RmsNormRope.h with the operations
// of cpu/RmsNorm.cpp and cpu/Rope.cpp in their order, so on f32 storage
// (Acc = float, nothing rounded in between) the results are theirs bit
// for bit. One head at a time: its normalised values (or its gradient
// rotated back) sit in a headDim buffer, so y may alias x and dx dy (when
// both are packed).
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNormRope.h"

#include "kernels/Rope.h"

#include "kernels/cpu/GroupRstd.h"

#include <cmath>
#include <vector>

namespace sharc::kernels::cpu {
namespace {

template <typename Acc> Acc load(ConstTensorView view, int64_t index) {
  return static_cast<Acc>(loadElement(view, index));
}

/// cos and sin (negated for the backward's rotation) of every frequency at
/// each position, built as cpu/Rope.cpp builds them.
template <typename Acc> class RopeTable {
public:
  RopeTable(int64_t headDim, double theta, bool inverse)
      : half_(headDim / 2), inverse_(inverse), invFreq_(half_), cos_(half_),
        sin_(half_) {
    for (int64_t i = 0; i < half_; ++i)
      invFreq_[i] = ropeInverseFrequency<Acc>(i, headDim, theta);
  }
  void setPosition(int64_t position) {
    Acc p = static_cast<Acc>(position);
    for (int64_t i = 0; i < half_; ++i) {
      Acc angle = p * invFreq_[i];
      cos_[i] = std::cos(angle);
      sin_[i] = inverse_ ? -std::sin(angle) : std::sin(angle);
    }
  }
  /// Rotates the head in `v` in place.
  void rotate(std::vector<Acc> &v) const {
    for (int64_t i = 0; i < half_; ++i) {
      Acc first = v[i], second = v[i + half_];
      v[i] = first * cos_[i] - second * sin_[i];
      v[i + half_] = second * cos_[i] + first * sin_[i];
    }
  }

private:
  int64_t half_;
  bool inverse_;
  std::vector<Acc> invFreq_, cos_, sin_;
};

template <typename Acc> void forwardImpl(const RmsNormRopeArgs &a) {
  RopeTable<Acc> table(a.headDim, a.theta, /*inverse=*/false);
  std::vector<Acc> head(a.headDim);
  int64_t headsPerPosition = a.batch * a.numHeads;
  HeadRows xRows = headRows(a.numHeads, a.batch, a.headDim, a.xPitch);
  auto dim = static_cast<int>(a.headDim);
  for (int64_t s = 0; s < a.seqLen; ++s) {
    table.setPosition(a.positions().at(s));
    for (int64_t h = 0; h < headsPerPosition; ++h) {
      int64_t begin = (s * headsPerPosition + h) * a.headDim;
      int64_t xBegin = xRows.at(s, static_cast<int>(h), dim);
      Acc rstd = groupRstd<Acc>(a.x, xBegin, a.headDim, a.eps);
      for (int64_t c = 0; c < a.headDim; ++c)
        head[c] = (load<Acc>(a.x, xBegin + c) * rstd) * load<Acc>(a.w, c);
      table.rotate(head);
      for (int64_t c = 0; c < a.headDim; ++c)
        storeElement(a.y, begin + c, head[c]);
    }
  }
}

template <typename Acc> void backwardImpl(const RmsNormRopeGradArgs &a) {
  RopeTable<Acc> table(a.headDim, a.theta, /*inverse=*/true);
  std::vector<Acc> grad(a.headDim), dwSums(a.headDim, Acc(0));
  int64_t headsPerPosition = a.batch * a.numHeads;
  HeadRows xRows = headRows(a.numHeads, a.batch, a.headDim, a.xPitch);
  HeadRows dxRows = headRows(a.numHeads, a.batch, a.headDim, a.dxPitch);
  auto dim = static_cast<int>(a.headDim);
  for (int64_t s = 0; s < a.seqLen; ++s) {
    table.setPosition(a.positions().at(s));
    for (int64_t h = 0; h < headsPerPosition; ++h) {
      int64_t begin = (s * headsPerPosition + h) * a.headDim;
      int64_t xBegin = xRows.at(s, static_cast<int>(h), dim);
      int64_t dxBegin = dxRows.at(s, static_cast<int>(h), dim);
      for (int64_t c = 0; c < a.headDim; ++c)
        grad[c] = load<Acc>(a.dy, begin + c);
      table.rotate(grad);
      Acc rstd = groupRstd<Acc>(a.x, xBegin, a.headDim, a.eps);
      Acc sumGradXhat = 0;
      for (int64_t c = 0; c < a.headDim; ++c) {
        Acc xhat = load<Acc>(a.x, xBegin + c) * rstd;
        sumGradXhat += grad[c] * load<Acc>(a.w, c) * xhat;
        dwSums[c] += grad[c] * xhat;
      }
      Acc meanGradXhat = sumGradXhat / static_cast<Acc>(a.headDim);
      for (int64_t c = 0; c < a.headDim; ++c) {
        Acc xhat = load<Acc>(a.x, xBegin + c) * rstd;
        storeElement(a.dx, dxBegin + c,
                     rstd *
                         (grad[c] * load<Acc>(a.w, c) - xhat * meanGradXhat));
      }
    }
  }
  for (int64_t c = 0; c < a.headDim; ++c)
    storeElement(a.dw, c, dwSums[c]);
}

bool wide(DType a, DType b) { return a == DType::F64 || b == DType::F64; }

} // namespace

void rmsNormRope(const RmsNormRopeArgs &args) {
  if (args.headDim <= 0)
    return;
  if (wide(args.x.dtype, args.y.dtype))
    forwardImpl<double>(args);
  else
    forwardImpl<float>(args);
}

void rmsNormRopeGrad(const RmsNormRopeGradArgs &args) {
  if (args.headDim <= 0)
    return;
  if (wide(args.x.dtype, args.dx.dtype))
    backwardImpl<double>(args);
  else
    backwardImpl<float>(args);
}

} // namespace sharc::kernels::cpu
