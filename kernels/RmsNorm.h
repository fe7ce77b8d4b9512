//===- RmsNorm.h - grouped RMSNorm forward and backward ---------*- C++ -*-===//
// defines: RmsNormArgs, RmsNormGradArgs, rmsNorm, rmsNormGrad (cpu::, cuda::),
//          rmsNormGradScratchBytes (cuda::), kRmsNormGradMaxBlocks
//
// x is [rows, cols] with cols = groups * groupSize; each contiguous group of
// groupSize elements is normalised on its own and scaled by w[groupSize].
// groupSize == cols is the ordinary layer norm; groupSize == head_dim is the
// per-head q_norm/k_norm on a [tokens, heads*head_dim] projection.
//   rstd[r,g] = 1/sqrt(mean_{c in g} x[r,c]^2 + eps)
//   y[r,c]    = (x[r,c] * rstd[r,g]) * w[c mod groupSize]
// As in the original, x*rstd is formed in fp32 and multiplied by w after.
// Backward (rstd recomputed), with xhat = x*rstd and g = dy*w:
//   dx[r,c] = rstd * (g[c] - xhat[c] * mean_{c' in group} g[c'] xhat[c'])
//   dw[j]   = sum over rows and groups of dy * xhat   (fp32 accumulation)
// dw is overwritten, not accumulated. With an addend r (rms_norm_grad_add;
// r.data null for none), dx[r,c] gets r[r,c] added in fp32 before its one
// rounding; r has dx's dtype and may be dx itself. On the device the dw
// reduction needs rmsNormGradScratchBytes(args) bytes of scratch (fp32 partial
// sums, over a partition fixed by the sizes alone, so dw is the same bits every
// run); the cpu ignores `scratch`.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct RmsNormArgs {
  ConstTensorView x, w;
  TensorView y;
  int64_t rows = 0, cols = 0, groupSize = 0;
  double eps = 1e-6;
};

struct RmsNormGradArgs {
  ConstTensorView x, w, dy;
  TensorView dx, dw;
  int64_t rows = 0, cols = 0, groupSize = 0;
  double eps = 1e-6;
  void *scratch = nullptr; ///< device only, of rmsNormGradScratchBytes
  ConstTensorView r{};     ///< dx's addend, or data null
};

/// The device backward's partition: at most this many blocks, each leaving
/// one row of partial dw sums, so its scratch is at most this many rows of
/// groupSize floats (what plan/DeviceWorkspace.h predicts).
inline constexpr int64_t kRmsNormGradMaxBlocks = 512;

namespace cpu {
void rmsNorm(const RmsNormArgs &args);
void rmsNormGrad(const RmsNormGradArgs &args);
} // namespace cpu

namespace cuda {
Status rmsNorm(const RmsNormArgs &args, DeviceStream stream);
Status rmsNormGrad(const RmsNormGradArgs &args, DeviceStream stream);
/// Scratch bytes rmsNormGrad needs; depends on rows, cols and groupSize only.
int64_t rmsNormGradScratchBytes(const RmsNormGradArgs &args);
} // namespace cuda

} // namespace sharc::kernels
