//===- CrossEntropy.h - mean token cross entropy ----------------*- C++ -*-===//
// defines: CrossEntropyArgs, CrossEntropyGradArgs, crossEntropy,
//          crossEntropyGrad (cpu::, cuda::), crossEntropyScratchBytes (cuda::)
//
// logits [numTokens, vocab] (any float storage), labels [numTokens] int32
// with -100 meaning "ignore". The causal shift is done by whoever fills the
// labels (labels[s] = tokens[s+1], the last position -100). Columns at or
// beyond validVocab (vocabulary padding) take no part in the softmax.
//   lse[t]  = log sum_{v < validVocab} exp(x[t,v])   (fp32, max-subtracted)
//   loss    = sum_{t valid} (lse[t] - x[t,label[t]]) / max(1, #valid)
//   dx[t,v] = dloss * (softmax(x[t])[v] - [v == label[t]]) / max(1, #valid)
// dx is 0 on ignored rows and padded columns. loss and dloss are fp32
// scalars; logits are read-only (the original overwrote them, section 8).
// On the device the loss needs crossEntropyScratchBytes(args) bytes of
// scratch (one fp32 term per row, summed in a fixed order, so the loss is
// the same bits every run); the cpu ignores `scratch`.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct CrossEntropyArgs {
  ConstTensorView logits;
  const int32_t *labels = nullptr;
  float *loss = nullptr;
  int64_t numTokens = 0, vocab = 0, validVocab = 0;
  void *scratch = nullptr; ///< device only, of crossEntropyScratchBytes
};

struct CrossEntropyGradArgs {
  ConstTensorView logits;
  const int32_t *labels = nullptr;
  const float *dloss = nullptr;
  TensorView dlogits;
  int64_t numTokens = 0, vocab = 0, validVocab = 0;
};

namespace cpu {
void crossEntropy(const CrossEntropyArgs &args);
void crossEntropyGrad(const CrossEntropyGradArgs &args);
} // namespace cpu

namespace cuda {
Status crossEntropy(const CrossEntropyArgs &args, DeviceStream stream);
Status crossEntropyGrad(const CrossEntropyGradArgs &args, DeviceStream stream);
/// Scratch bytes crossEntropy needs; depends on numTokens only.
int64_t crossEntropyScratchBytes(const CrossEntropyArgs &args);
} // namespace cuda

} // namespace sharc::kernels
