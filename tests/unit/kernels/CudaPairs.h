//===- CudaPairs.h - host and device tensors for cuda tests -----*- C++ -*-===//
// defines: kFloatTypes, requireCuda, requireRan, DeviceBuffer, requireClose,
//          tolerance, Pair, IntPair, ScalarPair, requireSameBits
//
// The cuda kernel tests write each op's arguments once, as a function of the
// side they point at: a Pair holds a tensor on the host (for cpu::) and a
// poisoned or uploaded twin on the device (for cuda::).
//
//   Pair x(DType::BF16, randomValues(n, rng)), y(DType::BF16, n);
//   auto args = [&](bool onDevice) {
//     return ScaleArgs{.x = x.in(onDevice), .y = y.out(onDevice), .numel = n};
//   };
//   cpu::scale(args(false));
//   requireRan(cuda::scale(args(true), nullptr));
//   y.requireMatch(0.0);
#pragma once

#include "kernels/TensorView.h"
#include "tests/unit/kernels/TestTensors.h"

#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace sharc::kernels::test {

inline constexpr DType kFloatTypes[] = {DType::F32, DType::BF16};

inline void requireCuda(cudaError_t error) {
  INFO("CUDA: " << cudaGetErrorString(error));
  REQUIRE(error == cudaSuccess);
}

/// A launch that returned ok and ran to completion without a CUDA error.
inline void requireRan(const Status &status) {
  INFO(status.message());
  REQUIRE(status.isOk());
  requireCuda(cudaDeviceSynchronize());
}

/// Device memory, freed on every path out of a test (REQUIRE throws).
class DeviceBuffer {
public:
  explicit DeviceBuffer(int64_t numBytes) : numBytes_(numBytes) {
    requireCuda(cudaMalloc(&data_, std::max<int64_t>(numBytes, 1)));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  void *data() const { return data_; }
  void upload(const void *host) {
    requireCuda(cudaMemcpy(data_, host, numBytes_, cudaMemcpyHostToDevice));
  }
  void download(void *host) const {
    requireCuda(cudaMemcpy(host, data_, numBytes_, cudaMemcpyDeviceToHost));
  }
  /// 0xff bytes are NaN in f32 and bf16, so an element a kernel skips shows.
  void poison() { requireCuda(cudaMemset(data_, 0xff, numBytes_)); }

private:
  void *data_ = nullptr;
  int64_t numBytes_;
};

/// No NaN in the device result, and its normwise relative error against the
/// cpu's within `maxError` (0: the same values).
inline void requireClose(const Tensor &actual, const Tensor &expected,
                         double maxError) {
  std::vector<double> actualValues = actual.values();
  auto firstNan = std::find_if(actualValues.begin(), actualValues.end(),
                               [](double value) { return std::isnan(value); });
  INFO("first NaN at element " << (firstNan - actualValues.begin()));
  REQUIRE(firstNan == actualValues.end());
  double error = maxRelativeError(actualValues, expected.values());
  INFO("max relative error " << error << ", allowed " << maxError);
  REQUIRE(error <= maxError);
}

inline double tolerance(DType dtype, double f32Tolerance) {
  return dtype == DType::BF16 ? 1e-2 : f32Tolerance;
}

/// One tensor on both sides: host storage for the cpu op and a device twin
/// for the cuda op, `offset` elements into its buffer (1 defeats the
/// kernels' vector paths). An output's device side starts poisoned.
class Pair {
public:
  Pair(DType dtype, const std::vector<double> &values, int64_t offset = 0)
      : Pair(dtype, static_cast<int64_t>(values.size()), offset) {
    host_ = Tensor(dtype, values);
    requireCuda(cudaMemcpy(deviceAddress(), host_.cview().data, numBytes(),
                           cudaMemcpyHostToDevice));
  }
  Pair(DType dtype, int64_t numel, int64_t offset = 0)
      : host_(dtype, numel), offset_(offset),
        buffer_((numel + offset) * dtypeSize(dtype)) {
    buffer_.poison();
  }

  ConstTensorView in(bool onDevice) const {
    return onDevice ? ConstTensorView{deviceAddress(), dtype()} : host_.cview();
  }
  TensorView out(bool onDevice) {
    return onDevice ? TensorView{deviceAddress(), dtype()} : host_.view();
  }
  const Tensor &host() const { return host_; }
  /// The device side to NaN again, before a second launch.
  void poison() { buffer_.poison(); }
  Tensor deviceCopy() const {
    Tensor copy(dtype(), host_.numel());
    requireCuda(cudaMemcpy(copy.view().data, deviceAddress(), numBytes(),
                           cudaMemcpyDeviceToHost));
    return copy;
  }
  /// The device side against the host side.
  void requireMatch(double maxError) const {
    requireClose(deviceCopy(), host_, maxError);
  }

private:
  DType dtype() const { return host_.cview().dtype; }
  int64_t numBytes() const { return host_.numel() * dtypeSize(dtype()); }
  void *deviceAddress() const {
    return static_cast<char *>(buffer_.data()) + offset_ * dtypeSize(dtype());
  }

  Tensor host_;
  int64_t offset_;
  DeviceBuffer buffer_;
};

/// int32 ids or labels on both sides.
class IntPair {
public:
  explicit IntPair(std::vector<int32_t> values)
      : host_(std::move(values)),
        device_(static_cast<int64_t>(host_.size() * sizeof(int32_t))) {
    device_.upload(host_.data());
  }
  const int32_t *on(bool onDevice) const {
    return onDevice ? static_cast<const int32_t *>(device_.data())
                    : host_.data();
  }
  int64_t size() const { return static_cast<int64_t>(host_.size()); }

private:
  std::vector<int32_t> host_;
  DeviceBuffer device_;
};

/// An fp32 scalar on both sides (a loss, or dloss); the device side starts
/// poisoned or holding `value`.
class ScalarPair {
public:
  explicit ScalarPair(float value = NAN) : host_(value), device_(4) {
    device_.upload(&host_);
  }
  float *on(bool onDevice) {
    return onDevice ? static_cast<float *>(device_.data()) : &host_;
  }
  float deviceValue() const {
    float actual = NAN;
    device_.download(&actual);
    return actual;
  }
  void requireMatch(double maxError) const {
    float actual = deviceValue();
    INFO("device " << actual << ", cpu " << host_);
    REQUIRE(!std::isnan(actual));
    REQUIRE(std::abs(actual - host_) <= maxError * std::abs(host_));
  }

private:
  float host_;
  DeviceBuffer device_;
};

/// The same bytes: a deterministic kernel run twice on the same inputs.
inline void requireSameBits(const Tensor &actual, const Tensor &expected,
                            DType dtype) {
  REQUIRE(actual.numel() == expected.numel());
  size_t numBytes = static_cast<size_t>(actual.numel() * dtypeSize(dtype));
  REQUIRE(std::memcmp(actual.cview().data, expected.cview().data, numBytes) ==
          0);
}

} // namespace sharc::kernels::test
