//===- TensorView.h - untyped tensor pointers for kernels -------*- C++ -*-===//
// defines: TensorView, ConstTensorView, DeviceStream, loadElement,
//          storeElement
//
// Kernels take storage pointers with their element type; shapes come in each
// op's argument struct. The CPU kernels load every element as float (double
// when the storage is F64), compute, and round on store, so bf16 storage
// behaves as "fp32 math, bf16 memory".
#pragma once

#include "planner/plan/DType.h"

#include <cstdint>

/// CUDA's stream type (cudaStream_t is CUstream_st *), named without the
/// CUDA headers so the op headers stay includable on the CPU side.
struct CUstream_st;

namespace sharc::kernels {

using DeviceStream = CUstream_st *;

struct ConstTensorView {
  const void *data = nullptr;
  DType dtype = DType::F32;
};

struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  operator ConstTensorView() const { return {data, dtype}; }
};

/// Reads element `index` as double (exact for every storage type).
inline double loadElement(ConstTensorView view, int64_t index) {
  switch (view.dtype) {
  case DType::F32:
    return static_cast<const float *>(view.data)[index];
  case DType::BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(view.data)[index]);
  case DType::I32:
    return static_cast<const int32_t *>(view.data)[index];
  case DType::F64:
    return static_cast<const double *>(view.data)[index];
  }
  return 0.0;
}

/// Writes `value` to element `index`, rounding to the storage type. Float
/// results are first rounded to float so that F32 and BF16 outputs see the
/// same fp32 value a GPU kernel would produce.
inline void storeElement(TensorView view, int64_t index, double value) {
  switch (view.dtype) {
  case DType::F32:
    static_cast<float *>(view.data)[index] = static_cast<float>(value);
    return;
  case DType::BF16:
    static_cast<uint16_t *>(view.data)[index] =
        floatToBf16(static_cast<float>(value));
    return;
  case DType::I32:
    static_cast<int32_t *>(view.data)[index] = static_cast<int32_t>(value);
    return;
  case DType::F64:
    static_cast<double *>(view.data)[index] = value;
    return;
  }
}

} // namespace sharc::kernels
