//===- Matmul.h - linear layer GEMMs: forward, dgrad, wgrad -----*- C++ -*-===//
// defines: MatmulArgs, MatmulDgradArgs, MatmulWgradArgs, matmul,
//          matmulDgrad, matmulWgrad, useBaselineGemm (cpu::; the CUDA
//          GEMMs are kernels/cuda/Gemm.h)
//
// Weights use the [out, in] layout (y = x W^T), as nn.Linear does.
//   forward: y[m,n]  = sum_k x[m,k] * w[n,k]
//   dgrad:   dx[m,k] = sum_n dy[m,n] * w[n,k]
//   wgrad:   dw[n,k] = sum_m dy[m,n] * x[m,k]
// fp32 accumulation (double for F64 storage); outputs are overwritten. The
// forward and dgrad take an optional addend r of the output's shape (a
// residual): y = x W^T + r, added to the fp32 sum before the one rounding
// to storage (cuBLASLt's C with beta 1), so the fused GEMM saves the
// elementwise pass and one rounding of a separate add.
#pragma once

#include "kernels/TensorView.h"

namespace sharc::kernels {

struct MatmulArgs {
  ConstTensorView x; ///< [m, k]
  ConstTensorView w; ///< [n, k]
  TensorView y;      ///< [m, n]
  int64_t m = 0, n = 0, k = 0;
  ConstTensorView addend = {}; ///< [m, n] or none (null data)
};

struct MatmulDgradArgs {
  ConstTensorView dy; ///< [m, n]
  ConstTensorView w;  ///< [n, k]
  TensorView dx;      ///< [m, k]
  int64_t m = 0, n = 0, k = 0;
  ConstTensorView addend = {}; ///< [m, k] or none (null data)
};

struct MatmulWgradArgs {
  ConstTensorView dy; ///< [m, n]
  ConstTensorView x;  ///< [m, k]
  TensorView dw;      ///< [n, k]
  int64_t m = 0, n = 0, k = 0;
};

namespace cpu {
void matmul(const MatmulArgs &args);
void matmulDgrad(const MatmulDgradArgs &args);
void matmulWgrad(const MatmulWgradArgs &args);

/// The f32 core is built for the target's baseline and, on x86-64, for
/// AVX2, which every call takes where the cpu has it; the bits are the
/// same. From useBaselineGemm(true) until useBaselineGemm(false) every call
/// takes the baseline build, so that tests can compare the two. A large
/// GEMM cuts C's columns into shares of whole panels on up to
/// kernelThreads() threads (kernels/cpu/KernelThreads.h), the same bits.
void useBaselineGemm(bool baseline);
} // namespace cpu

} // namespace sharc::kernels
