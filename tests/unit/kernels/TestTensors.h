//===- TestTensors.h - kernel test tensors ----------------------*- C++ -*-===//
// defines: Tensor, randomValues, maxRelativeError, numericGradient,
//          numericGradients, weightedSum, ColumnWindow
//
// Tests build every input from a std::vector<double>, store it in the
// dtype under test (Tensor rounds through storeElement) and compute the
// reference from the stored values, so reference and kernel see the same
// inputs bit for bit.
#pragma once

#include "kernels/TensorView.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace sharc::kernels::test {

/// A tensor in any storage type, backed by 8-byte words so the data is
/// aligned for every dtype.
class Tensor {
public:
  Tensor(DType dtype, int64_t numel)
      : dtype_(dtype), numel_(numel), words_(std::max<int64_t>(numel, 1)) {}
  Tensor(DType dtype, const std::vector<double> &values)
      : Tensor(dtype, static_cast<int64_t>(values.size())) {
    for (int64_t i = 0; i < numel_; ++i)
      storeElement(view(), i, values[i]);
  }

  TensorView view() { return {words_.data(), dtype_}; }
  ConstTensorView cview() const { return {words_.data(), dtype_}; }
  double at(int64_t i) const { return loadElement(cview(), i); }
  int64_t numel() const { return numel_; }
  std::vector<double> values() const {
    std::vector<double> result(numel_);
    for (int64_t i = 0; i < numel_; ++i)
      result[i] = at(i);
    return result;
  }

private:
  DType dtype_;
  int64_t numel_;
  std::vector<double> words_;
};

/// Uniform values with magnitude in [0.1, 1] and random sign: non-zero, so
/// a kernel that drops a term cannot pass by multiplying it by zero.
inline std::vector<double> randomValues(int64_t numel, std::mt19937 &rng,
                                        double scale = 1.0) {
  std::uniform_real_distribution<double> magnitude(0.1, 1.0);
  std::bernoulli_distribution negative(0.5);
  std::vector<double> values(numel);
  for (double &value : values)
    value = scale * (negative(rng) ? -magnitude(rng) : magnitude(rng));
  return values;
}

/// max |actual - expected| / max |expected|: a normwise relative error that
/// does not blow up on entries near zero.
inline double maxRelativeError(const std::vector<double> &actual,
                               const std::vector<double> &expected) {
  if (actual.size() != expected.size())
    return INFINITY;
  double maxDiff = 0, maxRef = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    maxDiff = std::max(maxDiff, std::abs(actual[i] - expected[i]));
    maxRef = std::max(maxRef, std::abs(expected[i]));
  }
  return maxDiff / std::max(maxRef, 1e-300);
}

/// sum_i weights[i] * values[i]: the objective whose gradient with respect
/// to a kernel's inputs is its backward applied to `weights`.
inline double weightedSum(const std::vector<double> &weights,
                          const std::vector<double> &values) {
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i)
    sum += weights[i] * values.at(i);
  return sum;
}

/// Central differences of `objective` at `point`, one coordinate at a time.
inline std::vector<double> numericGradient(
    std::vector<double> point,
    const std::function<double(const std::vector<double> &)> &objective,
    double step = 1e-5) {
  std::vector<double> gradient(point.size());
  for (size_t i = 0; i < point.size(); ++i) {
    double saved = point[i];
    point[i] = saved + step;
    double above = objective(point);
    point[i] = saved - step;
    double below = objective(point);
    point[i] = saved;
    gradient[i] = (above - below) / (2 * step);
  }
  return gradient;
}

/// numericGradient with respect to each of `inputs` in turn, the others held
/// at their values: entry i is the gradient with respect to inputs[i].
inline std::vector<std::vector<double>> numericGradients(
    const std::vector<std::vector<double>> &inputs,
    const std::function<double(const std::vector<std::vector<double>> &)>
        &objective,
    double step = 1e-5) {
  std::vector<std::vector<double>> gradients;
  for (size_t which = 0; which < inputs.size(); ++which) {
    std::vector<std::vector<double>> point = inputs;
    gradients.push_back(numericGradient(
        inputs[which],
        [&](const std::vector<double> &moved) {
          point[which] = moved;
          return objective(point);
        },
        step));
  }
  return gradients;
}

/// Columns [offset, offset + width) of rows `pitch` elements long: how a
/// kernel sees a column view (the fused q/k/v projection's q, k or v).
struct ColumnWindow {
  int64_t rows, width, pitch, offset;
  /// Packed values placed in the window, every other element `fill`.
  std::vector<double> embed(const std::vector<double> &packed,
                            double fill) const {
    std::vector<double> wide(rows * pitch, fill);
    for (int64_t i = 0; i < rows * width; ++i)
      wide[i / width * pitch + offset + i % width] = packed[i];
    return wide;
  }
  /// The window's elements of `wide`, packed.
  std::vector<double> extract(const std::vector<double> &wide) const {
    std::vector<double> packed(rows * width);
    for (int64_t i = 0; i < rows * width; ++i)
      packed[i] = wide[i / width * pitch + offset + i % width];
    return packed;
  }
  /// Whether every element outside the window is still `fill`.
  bool untouchedOutside(const std::vector<double> &wide, double fill) const {
    for (int64_t i = 0; i < rows * pitch; ++i) {
      int64_t column = i % pitch;
      if ((column < offset || column >= offset + width) && wide[i] != fill)
        return false;
    }
    return true;
  }
};

} // namespace sharc::kernels::test
