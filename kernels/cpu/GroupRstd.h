//===- GroupRstd.h - one RMSNorm group's reciprocal root --------*- C++ -*-===//
// defines: groupRstd (cpu::)
//
// 1 / sqrt(mean of x[begin, begin + groupSize)^2 + eps) in Acc, summed in
// index order: the statistic cpu/RmsNorm.cpp and cpu/RmsNormRope.cpp share,
// so the fused kernel gives the unfused bits.
#pragma once

#include "kernels/TensorView.h"

#include <cmath>
#include <cstdint>

namespace sharc::kernels::cpu {

template <typename Acc>
Acc groupRstd(ConstTensorView x, int64_t begin, int64_t groupSize, double eps) {
  Acc sumSquares = 0;
  for (int64_t c = 0; c < groupSize; ++c) {
    Acc value = static_cast<Acc>(loadElement(x, begin + c));
    sumSquares += value * value;
  }
  Acc meanSquare = sumSquares / static_cast<Acc>(groupSize);
  return Acc(1) / std::sqrt(meanSquare + static_cast<Acc>(eps));
}

} // namespace sharc::kernels::cpu
