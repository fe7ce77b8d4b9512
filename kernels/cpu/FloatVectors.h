//===- FloatVectors.h - float vectors of GCC's vector extension -*- C++ -*-===//
// defines: Floats4, Floats8, cpuHasAvx2 (kernels::cpu::)
//
// The cpu kernels' vector paths (the GEMM's core, AdamW's all-f32 update)
// are written once over these and built for the target's baseline (4
// lanes; SSE2 on x86-64) and for AVX2 (8 lanes), chosen at run time by
// what the cpu has. Their + - * / are element by element, each rounded
// once, and never contracted into an fma (the files that use them are
// built with -ffp-contract=off, and no target they are built for enables
// fma), so a vector path gives the bits of the plain scalar loop it
// replaces.
//
// The types are named structs: a vector_size that depends on a template
// parameter is dropped without a word. `Unaligned` reads and writes float
// arrays at any alignment (a copy through memcpy went through the stack
// and stalled every load on store forwarding); no helper wraps it, since
// a function returning an 8-lane vector built outside an AVX2 function
// would change its ABI.
//
//   using V = Floats8;
//   V::Vec x = *reinterpret_cast<const V::Unaligned *>(p);
#pragma once

#include <cstdint>

namespace sharc::kernels::cpu {

#define SHARC_FLOAT_VECTOR(NAME, LANES)                                        \
  struct NAME {                                                                \
    using Vec = float __attribute__((vector_size(4 * LANES)));                 \
    using Unaligned =                                                          \
        float __attribute__((vector_size(4 * LANES), aligned(4), may_alias));  \
    static constexpr int64_t kLanes = LANES;                                   \
  };
SHARC_FLOAT_VECTOR(Floats4, 4)
SHARC_FLOAT_VECTOR(Floats8, 8)
#undef SHARC_FLOAT_VECTOR

/// Whether this cpu runs the AVX2 builds (Floats8); asked once.
inline bool cpuHasAvx2() {
#if defined(__x86_64__)
  static const bool hasAvx2 = __builtin_cpu_supports("avx2");
  return hasAvx2;
#else
  return false;
#endif
}

} // namespace sharc::kernels::cpu
