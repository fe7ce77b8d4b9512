//===- RopeFreqs.h - rope's inverse frequencies as parameters ---*- C++ -*-===//
// defines: kRopeMaxHalf, RopeInvFreqs, ropeInvFreqs (cuda::)
//
// The device rope kernels (Rope.cu, RmsNormRope.cu, RmsNormRopeVec.cu)
// take the inverse frequencies as a __grid_constant__ table computed on
// the host by cpu/Rope.cpp's expression and the same libm, so the device
// angles start from the cpu's bits.
#pragma once

#include "kernels/Rope.h"

#include <cstdint>

namespace sharc::kernels::cuda {

/// headDim up to 1024; the table is 2 KiB of kernel parameters.
inline constexpr int kRopeMaxHalf = 512;

struct RopeInvFreqs {
  float values[kRopeMaxHalf];
};

/// The table for `headDim` (at most 2 * kRopeMaxHalf; callers check).
inline RopeInvFreqs ropeInvFreqs(int64_t headDim, double theta) {
  RopeInvFreqs table{};
  for (int64_t i = 0; i < headDim / 2 && i < kRopeMaxHalf; ++i)
    table.values[i] = ropeInverseFrequency<float>(i, headDim, theta);
  return table;
}

} // namespace sharc::kernels::cuda
