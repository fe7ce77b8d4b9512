//===- LseMerge.h - merging attention partials by log-sum-exp ---*- C++ -*-===//
// defines: LseMergeArgs, LseMergeGradArgs, lseMerge, lseMergeGrad (cpu::,
// cuda::)
//
// Ring attention computes each query block against one key block at a time
// (kernels/Attention.h with keyStart): partial outputs o_a, o_b of one
// query's rows over disjoint key sets, with their log-sum-exps lse_a,
// lse_b. Their union's softmax is a reweighting, for every row r = (s, b, h)
// of the [S, B, H*D] outputs (lse is [B, H, S]):
//   lse = log(exp(lse_a) + exp(lse_b))     (max-shifted)
//   w_x = exp(lse_x - lse),  o = w_a o_a + w_b o_b
// A row that saw no key has lse kEmptyRowLse, so its w is 0.
// Backward for one part x (lseMergeGrad runs once per part), with do and
// dlse the merged result's cotangents:
//   do_x   = w_x do
//   dlse_x = w_x (dlse + sum_d do[r,d] (o_x[r,d] - o[r,d]))
// since d o / d lse_x = w_x (o_x - o) and d lse / d lse_x = w_x. A null
// dlse is 0. At least fp32 math for every storage type (the cpu uses
// double); lse and dlse are f32.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct LseMergeArgs {
  ConstTensorView outA, outB;
  const float *lseA = nullptr, *lseB = nullptr;
  TensorView out;
  float *lse = nullptr;
  int64_t seqLen = 0, batch = 0, numHeads = 0, headDim = 0;
};

struct LseMergeGradArgs {
  ConstTensorView part, out, dout; ///< o_x, the merged o, do
  const float *lsePart = nullptr, *lse = nullptr, *dlse = nullptr;
  TensorView dpart;          ///< do_x
  float *dlsePart = nullptr; ///< dlse_x
  int64_t seqLen = 0, batch = 0, numHeads = 0, headDim = 0;
};

namespace cpu {
void lseMerge(const LseMergeArgs &args);
void lseMergeGrad(const LseMergeGradArgs &args);
} // namespace cpu

namespace cuda {
Status lseMerge(const LseMergeArgs &args, DeviceStream stream);
Status lseMergeGrad(const LseMergeGradArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
