//===- Attention.h - causal grouped-query attention -------------*- C++ -*-===//
// defines: AttentionArgs, AttentionGradArgs, AttentionExtent, withExtent,
//          attention, attentionGrad (cpu::, cuda::)
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
// Context parallelism: q holds seqLen queries at global positions
// queryStart + i (under the balanced split, rows from querySecondRow on at
// querySecondStart + i - querySecondRow: two runs,
// kernels/SequencePositions.h), k and v hold kvSeqLen keys at global
// positions keyStart + j (from keySecondRow on, when it is > 0, at
// keySecondStart + j - keySecondRow: ring attention's K/V block under the
// balanced split holds two chunks as the queries do); the mask above reads
// the key's position <= the query's (the K/V all-gather: keyStart 0, all
// keys; ring attention: one block of keys). queries() and keyPositions()
// give the positions relative to the first key, which is all the kernels
// read; both increase with the row, so the keys a query sees are a prefix
// of the block. kvSeqLen 0 means seqLen (and the positions are then 0..:
// plain causal attention). A row that sees no key has out 0 and lse
// kEmptyRowLse, which is finite (non-finite checks stay meaningful) and so
// low that exp(kEmptyRowLse - lse) is 0 against any row that sees a key.
// Ring attention's blocks also take dlse, the cotangent of lse (their lse
// is merged, kernels/LseMerge.h): lse's derivative in s[i,j] is p[i,j], so
//   ds[i,j] = p[i,j] (dp[i,j] - delta[i] + dlse[i])
// which is the rule above with delta[i] - dlse[i] in delta's place. A null
// dlse is 0. The cuda kernels take any block that some query sees (the
// last query's position at or after the first key's); the binds never
// launch a block no query sees.
// v (and dv) may be columns of a wider tensor (the fused q/k/v
// projection's output): vPitch (dvPitch) elements from one [s, b] row to
// the next, 0 meaning packed (numKvHeads * headDim); the others are packed.
#pragma once

#include "kernels/SequencePositions.h"
#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

/// lse of a row that sees no key (see above).
inline constexpr float kEmptyRowLse = -1e30f;

struct AttentionArgs {
  ConstTensorView q, k, v;
  TensorView out;
  float *lse = nullptr; ///< [batch, numHeads, seqLen]
  int64_t seqLen = 0, batch = 0, numHeads = 0, numKvHeads = 0, headDim = 0;
  int64_t vPitch = 0;                                 ///< see above; 0: packed
  int64_t kvSeqLen = 0, queryStart = 0, keyStart = 0; ///< see above
  int64_t querySecondRow = 0, querySecondStart = 0;
  int64_t keySecondRow = 0, keySecondStart = 0;
  int64_t keys() const { return kvSeqLen > 0 ? kvSeqLen : seqLen; }
  RowPositions queries() const {
    return {queryStart - keyStart, querySecondRow, querySecondStart - keyStart};
  }
  RowPositions keyPositions() const {
    return {0, keySecondRow, keySecondStart - keyStart};
  }
};

struct AttentionGradArgs {
  ConstTensorView q, k, v, out, dout;
  const float *lse = nullptr;
  const float *dlse = nullptr; ///< [batch, numHeads, seqLen]; null: 0
  TensorView dq, dk, dv;
  int64_t seqLen = 0, batch = 0, numHeads = 0, numKvHeads = 0, headDim = 0;
  int64_t vPitch = 0, dvPitch = 0;                    ///< see above; 0: packed
  int64_t kvSeqLen = 0, queryStart = 0, keyStart = 0; ///< see above
  int64_t querySecondRow = 0, querySecondStart = 0;
  int64_t keySecondRow = 0, keySecondStart = 0;
  int64_t keys() const { return kvSeqLen > 0 ? kvSeqLen : seqLen; }
  RowPositions queries() const {
    return {queryStart - keyStart, querySecondRow, querySecondStart - keyStart};
  }
  RowPositions keyPositions() const {
    return {0, keySecondRow, keySecondStart - keyStart};
  }
};

/// The sizes and row positions AttentionArgs and AttentionGradArgs share,
/// stated once by a caller and set on either with withExtent: queries and
/// keys at global positions (one run, or two under the balanced split);
/// kvSeqLen 0 means seqLen.
struct AttentionExtent {
  int64_t seqLen = 0, batch = 0, numHeads = 0, numKvHeads = 0, headDim = 0;
  int64_t kvSeqLen = 0;
  RowPositions queries = {}, keys = {};
};

/// `args` with `extent`'s sizes and positions; its views, pitches and lse
/// are left as they were.
template <typename Args>
Args withExtent(Args args, const AttentionExtent &extent) {
  args.seqLen = extent.seqLen;
  args.batch = extent.batch;
  args.numHeads = extent.numHeads;
  args.numKvHeads = extent.numKvHeads;
  args.headDim = extent.headDim;
  args.kvSeqLen = extent.kvSeqLen;
  args.queryStart = extent.queries.start;
  args.querySecondRow = extent.queries.secondRow;
  args.querySecondStart = extent.queries.secondStart;
  args.keyStart = extent.keys.start;
  args.keySecondRow = extent.keys.secondRow;
  args.keySecondStart = extent.keys.secondStart;
  return args;
}

namespace cpu {
void attention(const AttentionArgs &args);
void attentionGrad(const AttentionGradArgs &args);
} // namespace cpu

namespace cuda {
Status attention(const AttentionArgs &args, DeviceStream stream);
Status attentionGrad(const AttentionGradArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
