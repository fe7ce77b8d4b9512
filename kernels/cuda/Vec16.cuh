//===- Vec16.cuh - 16-byte loads and stores of bf16 or f32 ---*- CUDA -*-===//
// defines: kVecBytes, vecAligned, Vec, widen, loadRaw, loadVec, storeVec
//          (cuda::)
//
// The memory-bound kernels' fast paths (RmsNormVec.cu, CrossEntropyVec.cu)
// move 16 bytes per load and store (8 bf16 or 4 f32) and compute in float.
// The caller checks that the base pointers are 16-byte aligned.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace sharc::kernels::cuda {

inline constexpr int kVecBytes = 16;

/// Whether a pointer may be read or written as 16-byte vectors.
inline bool vecAligned(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % kVecBytes == 0;
}

/// One 16-byte vector of T widened to float.
template <typename T> struct Vec {
  static constexpr int kElems = kVecBytes / static_cast<int>(sizeof(T));
  float v[kElems];
};

/// A 16-byte vector of T widened to float.
template <typename T> __device__ __forceinline__ Vec<T> widen(uint4 raw) {
  Vec<T> out;
  if constexpr (sizeof(T) == 2) {
    const auto *pairs = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float2 f = __bfloat1622float2(pairs[i]);
      out.v[2 * i] = f.x;
      out.v[2 * i + 1] = f.y;
    }
  } else {
    const auto *floats = reinterpret_cast<const float *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      out.v[i] = floats[i];
  }
  return out;
}

template <typename T>
__device__ __forceinline__ uint4 loadRaw(const T *base, int64_t vec) {
  return reinterpret_cast<const uint4 *>(base)[vec];
}

template <typename T>
__device__ __forceinline__ Vec<T> loadVec(const T *base, int64_t vec) {
  return widen<T>(loadRaw(base, vec));
}

template <typename T>
__device__ __forceinline__ void
storeVec(T *base, int64_t vec, const float (&values)[Vec<T>::kElems]) {
  uint4 raw;
  if constexpr (sizeof(T) == 2) {
    auto *pairs = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      pairs[i] = __floats2bfloat162_rn(values[2 * i], values[2 * i + 1]);
  } else {
    auto *floats = reinterpret_cast<float *>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      floats[i] = values[i];
  }
  reinterpret_cast<uint4 *>(base)[vec] = raw;
}

} // namespace sharc::kernels::cuda
