//===- DecodeAttention.h - a new position against the key/value cache -*- C++
//-*-===//
// defines: DecodeAttentionArgs, decodeAttention (cpu::, cuda::)
//
// One step of generation with a key/value cache (`sharc compile --decode`):
// each sample brings one new position. q is [1, B, Hq * D], k and v are
// [1, B, Hkv * D], the caches [C, B, Hkv * D] (C positions, sequence first
// as every activation), positions [B] int32 with 0 <= p_b < C (the runtime
// checks them). For each sample b, with p = positions[b]:
//   k' = rope(k_b, p), q' = rope(q_b, p)    kernels/Rope.h's rotation and
//        fp32 tables, each rounded to the storage type as rope's output is
//   kCache[p, b] = k',  vCache[p, b] = v_b
//   out[b, h] = sum_{t <= p} softmax_t(q'_h . kCache[t, b, g] / sqrt(D))
//               * vCache[t, b, g],   g = h / (Hq / Hkv)
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
};

namespace cpu {
void decodeAttention(const DecodeAttentionArgs &args);
} // namespace cpu

namespace cuda {
Status decodeAttention(const DecodeAttentionArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
