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
#include "kernels/cpu/FloatVectors.h"
#include "kernels/cpu/KernelThreads.h"
#include "planner/plan/HostThreads.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

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

/// The step's scalars in Acc, each rounded once from double.
template <typename Acc> struct Scalars {
  Acc beta1, beta2, oneMinusBeta1, oneMinusBeta2, decay, stepSize, bc2Sqrt, eps,
      gradScale;
};

/// An update's elements read and written through the views; the storage
/// types, which updateElements rounds each value to as a store and a load
/// would, are the views'.
template <typename Acc> struct ViewAccess {
  const AdamWArgs &args;
  /// bf16-mixed: the update is the master's; param only receives it.
  const TensorView &weights = args.master.data ? args.master : args.param;
  DType weightType = weights.dtype, mType = args.m.dtype, vType = args.v.dtype,
        paramType = args.param.dtype;

  Acc grad(int64_t i) const {
    return static_cast<Acc>(loadElement(args.grad, i));
  }
  Acc weight(int64_t i) const {
    return static_cast<Acc>(loadElement(weights, i));
  }
  Acc m(int64_t i) const { return static_cast<Acc>(loadElement(args.m, i)); }
  Acc v(int64_t i) const { return static_cast<Acc>(loadElement(args.v, i)); }
  void store(int64_t i, Acc param, Acc m, Acc v) const {
    if (args.master.data)
      storeElement(args.master, i, param);
    storeElement(args.param, i, param);
    storeElement(args.m, i, m);
    storeElement(args.v, i, v);
  }
};

/// The same for an update whose tensors are all f32 with no master (the
/// cpu's usual case): float pointers, and storage types known when it is
/// compiled, so every rounding folds to the identity and no element pays a
/// dtype switch. The same values, so the same bits.
struct F32Access {
  const float *grads;
  float *params, *ms, *vs;
  static constexpr DType weightType = DType::F32, mType = DType::F32,
                         vType = DType::F32, paramType = DType::F32;

  float grad(int64_t i) const { return grads[i]; }
  float weight(int64_t i) const { return params[i]; }
  float m(int64_t i) const { return ms[i]; }
  float v(int64_t i) const { return vs[i]; }
  void store(int64_t i, float param, float m, float v) const {
    params[i] = param;
    ms[i] = m;
    vs[i] = v;
  }
};

/// The update of elements [start, numel); whether every value it stored is
/// finite.
template <typename Acc, typename Access>
bool updateElements(const Scalars<Acc> &s, const Access &access, int64_t numel,
                    int64_t start = 0) {
  bool allFinite = true;
  for (int64_t i = start; i < numel; ++i) {
    Acc grad = access.grad(i) * s.gradScale;
    Acc param = roundTo(access.weightType, access.weight(i) * s.decay);
    Acc m =
        roundTo(access.mType, s.beta1 * access.m(i) + s.oneMinusBeta1 * grad);
    Acc v = roundTo(access.vType,
                    s.beta2 * access.v(i) + s.oneMinusBeta2 * grad * grad);
    param -= s.stepSize * m / (std::sqrt(v) / s.bc2Sqrt + s.eps);
    access.store(i, param, m, v);
    // m and v are rounded already; param as its own storage holds it (a
    // finite f32 may round to a bf16 infinity), which covers the master.
    allFinite = allFinite && std::isfinite(m) && std::isfinite(v) &&
                std::isfinite(roundTo(access.paramType, param));
  }
  return allFinite;
}

/// The all-f32 update over float vectors (FloatVectors.h): each lane
/// computes updateElements' expression for its element, the same
/// operations in the same order (sqrt, like + - * /, is correctly rounded
/// in every lane), so the same bits, V::kLanes elements at a time; the
/// tail goes element by element. Whether every stored value is finite:
/// x - x is 0 exactly for a finite x and NaN otherwise.
template <typename V>
[[gnu::always_inline]] inline bool updateF32Vectors(const Scalars<float> &s,
                                                    const F32Access &access,
                                                    int64_t numel) {
  using Vec = typename V::Vec;
  using Unaligned = typename V::Unaligned;
  Vec finite = {};
  int64_t whole = numel / V::kLanes * V::kLanes;
  for (int64_t i = 0; i < whole; i += V::kLanes) {
    Vec grad =
        *reinterpret_cast<const Unaligned *>(access.grads + i) * s.gradScale;
    Vec param =
        *reinterpret_cast<const Unaligned *>(access.params + i) * s.decay;
    Vec m = s.beta1 * *reinterpret_cast<const Unaligned *>(access.ms + i) +
            s.oneMinusBeta1 * grad;
    Vec v = s.beta2 * *reinterpret_cast<const Unaligned *>(access.vs + i) +
            s.oneMinusBeta2 * grad * grad;
    Vec root;
    for (int64_t lane = 0; lane < V::kLanes; ++lane)
      root[lane] = __builtin_sqrtf(v[lane]);
    param -= s.stepSize * m / (root / s.bc2Sqrt + s.eps);
    *reinterpret_cast<Unaligned *>(access.params + i) = param;
    *reinterpret_cast<Unaligned *>(access.ms + i) = m;
    *reinterpret_cast<Unaligned *>(access.vs + i) = v;
    finite += (m - m) + (v - v) + (param - param);
  }
  bool allFinite = true;
  for (int64_t lane = 0; lane < V::kLanes; ++lane)
    allFinite = allFinite && finite[lane] == 0.0f;
  return updateElements(s, access, numel, whole) && allFinite;
}

bool updateF32Baseline(const Scalars<float> &s, const F32Access &access,
                       int64_t numel) {
  return updateF32Vectors<Floats4>(s, access, numel);
}
#if defined(__x86_64__)
[[gnu::target("avx2")]] bool
updateF32Avx2(const Scalars<float> &s, const F32Access &access, int64_t numel) {
  return updateF32Vectors<Floats8>(s, access, numel);
}
#endif

/// useAdamWPath's setting.
std::atomic<AdamWPath> chosenPath{AdamWPath::Fastest};

/// Elements below which a share of an update is not worth a thread of its
/// own (a few hundred microseconds of work).
constexpr int64_t kElementsPerShare = int64_t{1} << 18;

template <typename Acc> void adamwImpl(const AdamWArgs &args) {
  double step = static_cast<double>(args.step);
  Scalars<Acc> s{
      .beta1 = static_cast<Acc>(args.beta1),
      .beta2 = static_cast<Acc>(args.beta2),
      .oneMinusBeta1 = static_cast<Acc>(1.0 - args.beta1),
      .oneMinusBeta2 = static_cast<Acc>(1.0 - args.beta2),
      .decay = static_cast<Acc>(1.0 - args.lr * args.weightDecay),
      .stepSize =
          static_cast<Acc>(args.lr / (1.0 - std::pow(args.beta1, step))),
      .bc2Sqrt = static_cast<Acc>(std::sqrt(1.0 - std::pow(args.beta2, step))),
      .eps = static_cast<Acc>(args.eps),
      .gradScale =
          args.gradNormSq
              ? static_cast<Acc>(clipScale(*args.gradNormSq, args.maxNorm))
              : Acc(1)};
  // Elements [begin, end), on one of the threads the update may use.
  auto updateShare = [&](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<Acc, float>)
      if (args.param.dtype == DType::F32 && args.m.dtype == DType::F32 &&
          args.v.dtype == DType::F32 && args.grad.dtype == DType::F32 &&
          !args.master.data) {
        F32Access access{static_cast<const float *>(args.grad.data) + begin,
                         static_cast<float *>(args.param.data) + begin,
                         static_cast<float *>(args.m.data) + begin,
                         static_cast<float *>(args.v.data) + begin};
        AdamWPath path = chosenPath.load(std::memory_order_relaxed);
#if defined(__x86_64__)
        if (path == AdamWPath::Fastest && cpuHasAvx2())
          return updateF32Avx2(s, access, end - begin);
#endif
        if (path != AdamWPath::Scalar)
          return updateF32Baseline(s, access, end - begin);
        return updateElements(s, access, end - begin);
      }
    return updateElements(s, ViewAccess<Acc>{args}, end, begin);
  };
  // Shares of whole cache lines of every tensor; each element is updated
  // alone, so the bits do not depend on the count.
  int64_t shares = shareCount(args.numel, kElementsPerShare);
  int64_t chunk = (args.numel / shares + 63) / 64 * 64;
  std::atomic<bool> allFinite{true};
  runShares(shares, [&](int64_t share) {
    int64_t begin = std::min(args.numel, share * chunk);
    if (!updateShare(begin, std::min(args.numel, begin + chunk)))
      allFinite.store(false, std::memory_order_relaxed);
  });
  if (!allFinite.load() && args.nonFinite)
    *args.nonFinite = 1;
}

} // namespace

void useAdamWPath(AdamWPath path) {
  chosenPath.store(path, std::memory_order_relaxed);
}

void adamw(const AdamWArgs &args) {
  if (args.param.dtype == DType::F64 || args.m.dtype == DType::F64)
    adamwImpl<double>(args);
  else
    adamwImpl<float>(args);
}

} // namespace sharc::kernels::cpu
