//===- Attention.h - causal grouped-query attention -------------*- C++ -*-===//
// defines: AttentionArgs, AttentionGradArgs, attention, attentionGrad (cpu::,
// cuda::)
//
// q is [seqLen, batch, numHeads*headDim], k and v [seqLen, batch,
// numKvHeads*headDim] (sequence first); query head h uses KV head
// h / (numHeads / numKvHeads). With scale = 1/sqrt(headDim), for key
// positions j <= i (causal):
//   s[b,h,i,j] = scale * sum_d q[i,b,h,d] k[j,b,kv(h),d]
//   lse[b,h,i] = log sum_{j<=i} exp(s[b,h,i,j])         (fp32, saved)
//   p[b,h,i,j] = exp(s - lse)
//   out[i,b,h,d] = sum_j p[b,h,i,j] v[j,b,kv(h),d]
// Backward, with p recomputed from lse (no [S,S] tensor is kept):
//   dv[j,kv] += sum_{h in group(kv), i>=j} p[i,j] dout[i,h]
//   dp[i,j]   = sum_d dout[i,h,d] v[j,kv,d];  delta[i] = sum_d dout[i] out[i]
//   ds[i,j]   = p[i,j] (dp[i,j] - delta[i])
//   dq[i,h]   = scale sum_j ds[i,j] k[j,kv];  dk[j,kv] += scale sum ds[i,j]
//   q[i,h]
// All sums in fp32; dq, dk, dv are overwritten.
// Context parallelism's K/V all-gather: q holds seqLen queries at global
// positions queries().at(i) (queryStart + i; under the balanced split, rows
// from querySecondRow on at querySecondStart + i - querySecondRow: two runs,
// kernels/SequencePositions.h), k and v hold kvSeqLen keys at positions
// 0..; the mask above reads j <= queries().at(i). kvSeqLen 0 means seqLen
// (and the positions are then 0..: plain causal attention).
#pragma once

#include "kernels/SequencePositions.h"
#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct AttentionArgs {
  ConstTensorView q, k, v;
  TensorView out;
  float *lse = nullptr; ///< [batch, numHeads, seqLen]
  int64_t seqLen = 0, batch = 0, numHeads = 0, numKvHeads = 0, headDim = 0;
  int64_t kvSeqLen = 0, queryStart = 0; ///< see above
  int64_t querySecondRow = 0, querySecondStart = 0;
  int64_t keys() const { return kvSeqLen > 0 ? kvSeqLen : seqLen; }
  RowPositions queries() const {
    return {queryStart, querySecondRow, querySecondStart};
  }
};

struct AttentionGradArgs {
  ConstTensorView q, k, v, out, dout;
  const float *lse = nullptr;
  TensorView dq, dk, dv;
  int64_t seqLen = 0, batch = 0, numHeads = 0, numKvHeads = 0, headDim = 0;
  int64_t kvSeqLen = 0, queryStart = 0; ///< see above
  int64_t querySecondRow = 0, querySecondStart = 0;
  int64_t keys() const { return kvSeqLen > 0 ? kvSeqLen : seqLen; }
  RowPositions queries() const {
    return {queryStart, querySecondRow, querySecondStart};
  }
};

namespace cpu {
void attention(const AttentionArgs &args);
void attentionGrad(const AttentionGradArgs &args);
} // namespace cpu

namespace cuda {
Status attention(const AttentionArgs &args, DeviceStream stream);
Status attentionGrad(const AttentionGradArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
