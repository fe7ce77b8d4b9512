//===- DecodeAttention.h - a new position against the key/value cache -*- C++
//-*-===//
// defines: DecodeAttentionArgs, decodeAttention (cpu::, cuda::),
//          kDecodeChunk, decodeAttentionSplits, decodeAttentionScratchBytes
//
// One step of generation with a key/value cache (`sharc compile --decode`):
// each sample brings T new positions (1 a token; a prompt's chunk with
// --prefill-rows). q is [T, B, Hq * D], k and v are [T, B, Hkv * D], the
// caches [C, B, Hkv * D] (C positions, sequence first as every
// activation), positions [T, B] int32 with 0 <= p < C (the runtime checks
// them). First, for every row t and sample b, with p = positions[t, b]:
//   k' = rope(k_tb, p)                      kernels/Rope.h's rotation and
//        fp32 tables, rounded to the storage type as rope's output is
//   kCache[p, b] = k',  vCache[p, b] = v_tb
// then, with q' = rope(q_tb, p) rounded likewise:
//   out[t, b, h] = sum_{s <= p} softmax_s(q'_h . kCache[s, b, g] / sqrt(D))
//                  * vCache[s, b, g],   g = h / (Hq / Hkv)
// so a chunk of consecutive positions attends causally within itself. Two
// rows of one sample at the same position must bring the same k and v (the
// runtime allows a repeated position only with its token repeated).
// in fp32 (f64 for the tests' reference), the softmax over the scores less
// their maximum. Positions after p are never read, so a cache needs no
// clearing between prompts; the training forward computes the same
// numbers for the same tokens (rope, then causal attention).
//
// On the device the cache is read in chunks of kDecodeChunk positions, a
// block each for up to 32 queries that share a KV head (rows of a sample
// times heads of a group), so a long cache spreads over the GPU and a
// prefill's rows read each chunk once between them; each chunk leaves every
// query's maximum score, sum of exponentials and unnormalised output in
// fp32 scratch (decodeAttentionScratchBytes), merged by log-sum-exp after.
// The device takes head dims up to 256. The cpu ignores `scratch`.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

#include <cstdint>

namespace sharc::kernels {

struct DecodeAttentionArgs {
  ConstTensorView q, k, v;
  TensorView kCache, vCache;
  const int32_t *positions = nullptr;
  TensorView out;
  int64_t batch = 0, numHeads = 0, numKvHeads = 0, headDim = 0;
  int64_t cacheLen = 0;
  double theta = 1e6;
  int64_t rows = 1;        ///< T: positions per sample this step
  void *scratch = nullptr; ///< device only, of decodeAttentionScratchBytes
};

/// Positions of the cache one device block reads.
inline constexpr int64_t kDecodeChunk = 64;

/// The chunks a cache of `cacheLen` positions splits into.
constexpr int64_t decodeAttentionSplits(int64_t cacheLen) {
  return (cacheLen + kDecodeChunk - 1) / kDecodeChunk;
}

/// Each (row, sample, query head, chunk): headDim output columns, the
/// chunk's maximum score and its sum of exponentials, in fp32. Fixed by the
/// sizes alone, so the compiler's report predicts it (plan/DeviceWorkspace).
inline int64_t decodeAttentionScratchBytes(int64_t rows, int64_t batch,
                                           int64_t numHeads, int64_t headDim,
                                           int64_t cacheLen) {
  return rows * batch * numHeads * decodeAttentionSplits(cacheLen) *
         (headDim + 2) * 4;
}

namespace cpu {
void decodeAttention(const DecodeAttentionArgs &args);
} // namespace cpu

namespace cuda {
Status decodeAttention(const DecodeAttentionArgs &args, DeviceStream stream);
int64_t decodeAttentionScratchBytes(const DecodeAttentionArgs &args);
} // namespace cuda

} // namespace sharc::kernels
