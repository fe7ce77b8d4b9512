//===- Rope.h - rotary position embedding (rotate-half form) ----*- C++ -*-===//
// defines: RopeArgs, ropeInverseFrequency, rope (cpu::, cuda::)
//
// x is [seqLen, batch, numHeads * headDim] (sequence first). For position
// p = positions().at(s) (s + positionOffset; under the balanced context-
// parallel split rows from secondRow on continue at secondStart) and
// i < headDim/2, in fp32 as the original computes its tables:
//   invFreq[i] = 1 / theta^(2i/headDim),  angle = p * invFreq[i]
//   y[.., i]          = x[i] cos(angle) - x[i + D/2] sin(angle)
//   y[.., i + D/2]    = x[i + D/2] cos(angle) + x[i] sin(angle)
// The backward is the same rotation by -angle (inverse = true), since the
// rotation is orthogonal: dx = R(-angle) dy.
#pragma once

#include "kernels/SequencePositions.h"
#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cmath>

namespace sharc::kernels {

struct RopeArgs {
  ConstTensorView x;
  TensorView y;
  int64_t seqLen = 0, batch = 0, numHeads = 0, headDim = 0;
  int64_t positionOffset = 0;
  int64_t secondRow = 0, secondStart = 0; ///< kernels/SequencePositions.h
  double theta = 1e6;
  bool inverse = false;
  RowPositions positions() const {
    return {positionOffset, secondRow, secondStart};
  }
};

/// invFreq[i] in Acc precision, each step rounded as the original builds
/// its fp32 table (the cpu's tables and the device's host-built one).
template <typename Acc>
Acc ropeInverseFrequency(int64_t i, int64_t headDim, double theta) {
  Acc exponent = static_cast<Acc>(2 * i) / static_cast<Acc>(headDim);
  return Acc(1) / std::pow(static_cast<Acc>(theta), exponent);
}

namespace cpu {
void rope(const RopeArgs &args);
} // namespace cpu

namespace cuda {
Status rope(const RopeArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
