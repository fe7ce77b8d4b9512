//===- AdamW.cpp - decoupled-weight-decay Adam update on the cpu ----------===//
//
// Implements the math stated in kernels/AdamW.h. The per-step scalars are
// formed in double and rounded once, as torch forms them in Python. Like
// torch's in-place ops, the decayed p and the new m and v are rounded to
// their storage type before the final update reads them, which makes pure
// bf16 training behave as torch's does. With a master (bf16-mixed) the
// update reads and writes the master, then stores it rounded to param.
//
//===----------------------------------------------------------------------===//

#include "kernels/AdamW.h"

#include <cmath>

namespace sharc::kernels::cpu {
namespace {

/// The value `value` takes after a store to `dtype` and a load back.
template <typename Acc> Acc roundTo(DType dtype, Acc value) {
  switch (dtype) {
  case DType::F32:
    return static_cast<float>(value);
  case DType::BF16:
    return bf16ToFloat(floatToBf16(static_cast<float>(value)));
  case DType::I32:
  case DType::F64:
    return value;
  }
  return value;
}

template <typename Acc> void adamwImpl(const AdamWArgs &args) {
  double step = static_cast<double>(args.step);
  Acc beta1 = static_cast<Acc>(args.beta1);
  Acc beta2 = static_cast<Acc>(args.beta2);
  Acc oneMinusBeta1 = static_cast<Acc>(1.0 - args.beta1);
  Acc oneMinusBeta2 = static_cast<Acc>(1.0 - args.beta2);
  Acc decay = static_cast<Acc>(1.0 - args.lr * args.weightDecay);
  Acc stepSize = static_cast<Acc>(args.lr / (1.0 - std::pow(args.beta1, step)));
  Acc bc2Sqrt = static_cast<Acc>(std::sqrt(1.0 - std::pow(args.beta2, step)));
  Acc eps = static_cast<Acc>(args.eps);
  Acc gradScale =
      args.gradNormSq
          ? static_cast<Acc>(clipScale(*args.gradNormSq, args.maxNorm))
          : Acc(1);
  bool allFinite = true;
  for (int64_t i = 0; i < args.numel; ++i) {
    Acc grad = static_cast<Acc>(loadElement(args.grad, i)) * gradScale;
    // bf16-mixed: the update is the master's; param only receives it.
    const TensorView &weights = args.master.data ? args.master : args.param;
    Acc param = static_cast<Acc>(loadElement(weights, i));
    param = roundTo(weights.dtype, param * decay);
    Acc m = static_cast<Acc>(loadElement(args.m, i));
    m = roundTo(args.m.dtype, beta1 * m + oneMinusBeta1 * grad);
    Acc v = static_cast<Acc>(loadElement(args.v, i));
    v = roundTo(args.v.dtype, beta2 * v + oneMinusBeta2 * grad * grad);
    param -= stepSize * m / (std::sqrt(v) / bc2Sqrt + eps);
    if (args.master.data)
      storeElement(args.master, i, param);
    storeElement(args.param, i, param);
    storeElement(args.m, i, m);
    storeElement(args.v, i, v);
    // m and v are rounded already; param as its own storage holds it (a
    // finite f32 may round to a bf16 infinity), which covers the master.
    allFinite = allFinite && std::isfinite(m) && std::isfinite(v) &&
                std::isfinite(roundTo(args.param.dtype, param));
  }
  if (!allFinite && args.nonFinite)
    *args.nonFinite = 1;
}

} // namespace

void adamw(const AdamWArgs &args) {
  if (args.param.dtype == DType::F64 || args.m.dtype == DType::F64)
    adamwImpl<double>(args);
  else
    adamwImpl<float>(args);
}

} // namespace sharc::kernels::cpu
