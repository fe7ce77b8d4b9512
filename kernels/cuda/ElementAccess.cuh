//===- ElementAccess.cuh - elements of a bf16 or f32 view -------*- C++ -*-===//
// defines: loadAs, storeAs, Bf16x4, loadVec4, storeVec4, loadN, storeN,
//          checkFloatStorage (cuda::)
//
// The kernels keep fp32 math over bf16 or f32 storage (the cpu twins'
// semantics, kernels/TensorView.h): loadAs widens an element to float,
// storeAs rounds to nearest-even on a bf16 store, as floatToBf16 does on the
// host. loadVec4 and storeVec4 move four consecutive elements as one 8-byte
// (bf16) or 16-byte (f32) access, the vector paths of the elementwise,
// embedding and AdamW kernels (Vec16.cuh has the 16-byte ones of the norms
// and the loss). Views of other dtypes are refused by the launchers, with
// checkFloatStorage, before a kernel runs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <string>

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

/// Four bf16 elements as one 8-byte access.
struct alignas(8) Bf16x4 {
  __nv_bfloat16 values[4];
};

/// Elements [i, i + 4) of `data` as float; i is a multiple of 4 and `data`
/// is aligned to 4 elements.
__device__ __forceinline__ void loadVec4(const void *data, DType dtype,
                                         int64_t i, float (&out)[4]) {
  if (dtype == DType::BF16) {
    Bf16x4 pack = *reinterpret_cast<const Bf16x4 *>(
        static_cast<const __nv_bfloat16 *>(data) + i);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      out[k] = __bfloat162float(pack.values[k]);
  } else {
    float4 pack =
        *reinterpret_cast<const float4 *>(static_cast<const float *>(data) + i);
    out[0] = pack.x;
    out[1] = pack.y;
    out[2] = pack.z;
    out[3] = pack.w;
  }
}

/// Stores `in` to elements [i, i + 4) of `data`, rounding to nearest-even on
/// bf16; the alignment as for loadVec4.
__device__ __forceinline__ void storeVec4(void *data, DType dtype, int64_t i,
                                          const float (&in)[4]) {
  if (dtype == DType::BF16) {
    Bf16x4 pack;
#pragma unroll
    for (int k = 0; k < 4; ++k)
      pack.values[k] = __float2bfloat16_rn(in[k]);
    *reinterpret_cast<Bf16x4 *>(static_cast<__nv_bfloat16 *>(data) + i) = pack;
  } else {
    *reinterpret_cast<float4 *>(static_cast<float *>(data) + i) =
        make_float4(in[0], in[1], in[2], in[3]);
  }
}

__device__ __forceinline__ void loadVec4(ConstTensorView view, int64_t i,
                                         float (&out)[4]) {
  loadVec4(view.data, view.dtype, i, out);
}

__device__ __forceinline__ void storeVec4(TensorView view, int64_t i,
                                          const float (&in)[4]) {
  storeVec4(view.data, view.dtype, i, in);
}

/// Elements [i, i + N) as float, N 1 or 4 (loadAs or loadVec4): the vector
/// kernels' body written once for their aligned groups and their tail.
template <int N>
__device__ __forceinline__ void loadN(ConstTensorView view, int64_t i,
                                      float (&out)[N]) {
  static_assert(N == 1 || N == 4, "one element or a vector of four");
  if constexpr (N == 1)
    out[0] = loadAs(view, i);
  else
    loadVec4(view, i, out);
}

template <int N>
__device__ __forceinline__ void storeN(TensorView view, int64_t i,
                                       const float (&in)[N]) {
  static_assert(N == 1 || N == 4, "one element or a vector of four");
  if constexpr (N == 1)
    storeAs(view, i, in[0]);
  else
    storeVec4(view, i, in);
}

/// Refuses any storage but f32 and bf16, naming `kernel`: what every
/// launcher checks of its views before a kernel runs.
inline Status checkFloatStorage(const char *kernel,
                                std::initializer_list<DType> dtypes) {
  for (DType dtype : dtypes)
    if (dtype != DType::F32 && dtype != DType::BF16)
      return Status::invalidInput(std::string(kernel) + ": " +
                                  dtypeName(dtype) +
                                  " storage is not supported on the device "
                                  "(expected f32 or bf16)");
  return Status::ok();
}

} // namespace sharc::kernels::cuda
