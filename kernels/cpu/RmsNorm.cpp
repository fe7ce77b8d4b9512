//===- RmsNorm.cpp - grouped RMSNorm forward and backward on the cpu ------===//
//
// Implements the math stated in kernels/RmsNorm.h. Each group is read twice
// (statistics, then output) so that y may alias x and dx may alias dy.
//
//===----------------------------------------------------------------------===//

#include "kernels/RmsNorm.h"

#include "kernels/cpu/GroupRstd.h"

#include <cmath>
#include <vector>

namespace sharc::kernels::cpu {
namespace {

template <typename Acc> Acc load(ConstTensorView view, int64_t index) {
  return static_cast<Acc>(loadElement(view, index));
}

template <typename Acc> void rmsNormImpl(const RmsNormArgs &args) {
  int64_t groupSize = args.groupSize;
  for (int64_t begin = 0; begin < args.rows * args.cols; begin += groupSize) {
    Acc rstd = groupRstd<Acc>(args.x, begin, groupSize, args.eps);
    for (int64_t c = 0; c < groupSize; ++c) {
      Acc normalized = load<Acc>(args.x, begin + c) * rstd;
      storeElement(args.y, begin + c, normalized * load<Acc>(args.w, c));
    }
  }
}

template <typename Acc> void rmsNormGradImpl(const RmsNormGradArgs &args) {
  int64_t groupSize = args.groupSize;
  std::vector<Acc> dwSums(groupSize, Acc(0));
  for (int64_t begin = 0; begin < args.rows * args.cols; begin += groupSize) {
    Acc rstd = groupRstd<Acc>(args.x, begin, groupSize, args.eps);
    Acc sumGradXhat = 0;
    for (int64_t c = 0; c < groupSize; ++c) {
      Acc xhat = load<Acc>(args.x, begin + c) * rstd;
      Acc dy = load<Acc>(args.dy, begin + c);
      sumGradXhat += dy * load<Acc>(args.w, c) * xhat;
      dwSums[c] += dy * xhat;
    }
    Acc meanGradXhat = sumGradXhat / static_cast<Acc>(groupSize);
    for (int64_t c = 0; c < groupSize; ++c) {
      Acc xhat = load<Acc>(args.x, begin + c) * rstd;
      Acc grad = load<Acc>(args.dy, begin + c) * load<Acc>(args.w, c);
      Acc dx = rstd * (grad - xhat * meanGradXhat);
      // The addend before the one rounding (it may be dx itself: read
      // before the store).
      if (args.r.data)
        dx += load<Acc>(args.r, begin + c);
      storeElement(args.dx, begin + c, dx);
    }
  }
  for (int64_t c = 0; c < groupSize; ++c)
    storeElement(args.dw, c, dwSums[c]);
}

} // namespace

void rmsNorm(const RmsNormArgs &args) {
  if (args.groupSize <= 0)
    return;
  if (args.x.dtype == DType::F64 || args.y.dtype == DType::F64)
    rmsNormImpl<double>(args);
  else
    rmsNormImpl<float>(args);
}

void rmsNormGrad(const RmsNormGradArgs &args) {
  if (args.groupSize <= 0)
    return;
  if (args.x.dtype == DType::F64 || args.dx.dtype == DType::F64)
    rmsNormGradImpl<double>(args);
  else
    rmsNormGradImpl<float>(args);
}

} // namespace sharc::kernels::cpu
