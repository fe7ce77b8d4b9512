//===- ElementAccess.cuh - one element of a bf16 or f32 view ----*- C++ -*-===//
//
// The kernels keep fp32 math over bf16 or f32 storage (the cpu twins'
// semantics, kernels/TensorView.h): loadAs widens an element to float,
// storeAs rounds to nearest-even on a bf16 store, as floatToBf16 does on the
// host. Views of other dtypes are refused by the launchers before a kernel
// runs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/TensorView.h"

#include <cuda_bf16.h>

#include <cstdint>

namespace sharc::kernels::cuda {

__device__ __forceinline__ float loadAs(ConstTensorView view, int64_t i) {
  if (view.dtype == DType::BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(view.data)[i]);
  return static_cast<const float *>(view.data)[i];
}

__device__ __forceinline__ void storeAs(TensorView view, int64_t i,
                                        float value) {
  if (view.dtype == DType::BF16)
    static_cast<__nv_bfloat16 *>(view.data)[i] = __float2bfloat16_rn(value);
  else
    static_cast<float *>(view.data)[i] = value;
}

} // namespace sharc::kernels::cuda
