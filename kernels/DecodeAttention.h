//===- DecodeAttention.h - a new position against the key/value cache -*- C++
//-*-===//
// defines: DecodeAttentionArgs, decodeAttention (cpu::, cuda::)
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
  int64_t rows = 1; ///< T: positions per sample this step
};

namespace cpu {
void decodeAttention(const DecodeAttentionArgs &args);
} // namespace cpu

namespace cuda {
Status decodeAttention(const DecodeAttentionArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
