//===- AdamWNonFiniteCases.h - updates that store a NaN or not --*- C++ -*-===//
// defines: NonFiniteCase, nonFiniteCases, NonFiniteUpdate
//
// One element of an otherwise finite AdamW update set so that a stored value
// goes non-finite, or stays just finite, for the cpu's test of AdamWArgs::
// nonFinite and the cuda kernels' against the cpu. The cases reach each
// stored value: v alone (a gradient whose square overflows f32 while m and
// the parameter stay finite), m, v and the parameter (a NaN gradient), the
// parameter alone (an infinite weight), and the bf16 parameter of an f32
// master on either side of the value from which round to nearest even
// stores bf16's infinity.
#pragma once

#include "kernels/AdamW.h"
#include "tests/unit/kernels/TestTensors.h"

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace sharc::kernels::test {

struct NonFiniteCase {
  const char *name;
  /// A bf16 parameter and gradient with an f32 master and f32 moments;
  /// otherwise every tensor f32.
  bool master;
  /// The special element's weight (the master's, or the parameter's),
  /// moments and gradient.
  double weight, m, v, grad;
  double weightDecay;
  bool storesNonFinite;
};

inline std::vector<NonFiniteCase> nonFiniteCases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // bf16's largest finite value is 0x7f7f0000 as f32 bits; from the
  // midpoint to its infinity, 0x7f7f8000, a store rounds up to infinity
  // (the even neighbour).
  const double belowMidpoint = std::bit_cast<float>(0x7f7f7fffu);
  const double midpoint = std::bit_cast<float>(0x7f7f8000u);
  return {
      {"every value finite", false, 0.5, 0.1, 0.01, 0.3, 0.01, false},
      {"a NaN gradient", false, 0.5, 0.1, 0.01, nan, 0.01, true},
      // (1 - beta2) g g = 1e57: v is infinite, m = 1e29 and the parameter
      // (m / inf = 0) finite.
      {"a gradient whose square overflows", false, 0.5, 0.1, 0.01, 1e30, 0.01,
       true},
      {"an infinite weight", false, inf, 0.1, 0.01, 0.3, 0.01, true},
      // No decay and m = 0: the master keeps its value exactly.
      {"a master that bf16 rounds to its largest value", true, belowMidpoint,
       0.0, 0.0, 0.0, 0.0, false},
      {"a master that bf16 rounds to infinity", true, midpoint, 0.0, 0.0, 0.0,
       0.0, true},
  };
}

/// The values of one case's update of `numel` elements, element `special`
/// the case's and the others random and finite (v non-negative).
struct NonFiniteUpdate {
  DType paramType, stateType, gradType;
  std::vector<double> weights, param, m, v, grad;

  NonFiniteUpdate(const NonFiniteCase &c, int64_t numel, int64_t special,
                  std::mt19937 &rng)
      : paramType(c.master ? DType::BF16 : DType::F32), stateType(DType::F32),
        gradType(paramType), weights(randomValues(numel, rng)),
        param(randomValues(numel, rng)), m(randomValues(numel, rng, 0.1)),
        v(randomValues(numel, rng, 0.01)), grad(randomValues(numel, rng)) {
    for (double &value : v)
      value = std::abs(value);
    weights[special] = c.weight;
    m[special] = c.m;
    v[special] = c.v;
    grad[special] = c.grad;
    if (!c.master)
      param = weights;
  }
};

} // namespace sharc::kernels::test
