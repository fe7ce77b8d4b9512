//===- SumSquares.h - a rank's share of the squared grad norm ---*- C++ -*-===//
// defines: SumSquaresArgs, sumSquares (cpu::), SumSquares (cuda::)
//
// sum = sum_i (sum_j xs[i][j]^2) / replicas[i], stored as one f32. Every
// square, each tensor's sum and the weighted total are double, so the
// result does not depend on how the elements were split over ranks beyond
// the final rounding to f32 (the sharded runs add the ranks' shares with
// an all_reduce and must match the dense run). replicas[i] >= 1: a tensor
// that k ranks hold alike counts 1/k on each, so the sum over the ranks
// counts it once (sharc-adamw's gradient clipping).
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <memory>
#include <vector>

namespace sharc::kernels {

struct SumSquaresArgs {
  std::vector<ConstTensorView> xs;
  std::vector<int64_t> numels;   ///< one per tensor
  std::vector<int64_t> replicas; ///< one per tensor, >= 1
  float *sum = nullptr;          ///< one f32
};

namespace cpu {
void sumSquares(const SumSquaresArgs &args);
} // namespace cpu

namespace cuda {
/// The tensors of `args`, reduced in one pass of fixed-size chunks whose
/// double partials a second kernel adds in chunk order: the same bits on
/// every run. The tables and the partials are allocated once, at create.
class SumSquares {
public:
  static Result<std::unique_ptr<SumSquares>> create(const SumSquaresArgs &args);
  ~SumSquares();
  SumSquares(const SumSquares &) = delete;
  SumSquares &operator=(const SumSquares &) = delete;
  Status run(DeviceStream stream) const;

private:
  SumSquares() = default;
  struct Tables; ///< the device tables and partials
  std::unique_ptr<Tables> tables_;
};
} // namespace cuda

} // namespace sharc::kernels
