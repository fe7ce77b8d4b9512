//===- VocabParallelLoss.h - vocab-parallel loss ----------------*- C++ -*-===//
// defines: VocabMaxArgs, TargetLogitArgs, SumExpArgs, VocabParallelLossArgs,
//          VocabParallelLossGradArgs, vocabMax, targetLogit, sumExp,
//          vocabParallelLoss, vocabParallelLossGrad (cpu::, cuda::)
//
// The cross entropy of kernels/CrossEntropy.h when each rank holds only the
// logits of global columns [vocabStart, vocabStart + localVocab). Columns at
// or beyond validVocab (vocabulary padding) take no part anywhere; a label
// outside [0, validVocab) (-100 included) marks an ignored row. For one rank,
// with x = logits [numTokens, localVocab] and g(j) = vocabStart + j:
//   m[t] = max_{j: g(j) < validVocab} x[t,j]            (-inf if no such j)
//   t[t] = x[t, label - vocabStart] if the label is valid and local, else 0
//   e[t] = sum_{j: g(j) < validVocab} exp(x[t,j] - M[t])
// where M = allreduce_max(m) is the global max; T = allreduce_sum(t) and
// E = allreduce_sum(e) are the global target logit and softmax denominator.
//   loss    = sum_{t valid} (log E[t] + M[t] - T[t]) / max(1, #valid)
//   dx[t,j] = dloss * (exp(x[t,j] - M[t]) / E[t] - [g(j) == label[t]])
//             / max(1, #valid)
// dx is 0 on ignored rows and padded columns and is overwritten. The loss
// reads no logits. All math is fp32 (fp64 for F64 logits); m, t, e are
// [numTokens] F32 in a plan, and may be F64 so float64 tests keep full
// precision. loss and dloss are fp32 scalars, as in CrossEntropy.h.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct VocabMaxArgs {
  ConstTensorView logits;
  TensorView vocabMax; ///< m, [numTokens]
  int64_t numTokens = 0, localVocab = 0, vocabStart = 0, validVocab = 0;
};

struct TargetLogitArgs {
  ConstTensorView logits;
  const int32_t *labels = nullptr;
  TensorView targetLogit; ///< t, [numTokens]
  int64_t numTokens = 0, localVocab = 0, vocabStart = 0, validVocab = 0;
};

struct SumExpArgs {
  ConstTensorView logits;
  ConstTensorView vocabMax; ///< M, the all-reduced max
  TensorView sumExp;        ///< e, [numTokens]
  int64_t numTokens = 0, localVocab = 0, vocabStart = 0, validVocab = 0;
};

struct VocabParallelLossArgs {
  const int32_t *labels = nullptr;
  ConstTensorView vocabMax, targetLogit, sumExp; ///< M, T, E (all-reduced)
  float *loss = nullptr;
  int64_t numTokens = 0, validVocab = 0;
};

struct VocabParallelLossGradArgs {
  ConstTensorView logits;
  const int32_t *labels = nullptr;
  ConstTensorView vocabMax, sumExp; ///< M, E (all-reduced)
  const float *dloss = nullptr;
  TensorView dlogits;
  int64_t numTokens = 0, localVocab = 0, vocabStart = 0, validVocab = 0;
};

namespace cpu {
void vocabMax(const VocabMaxArgs &args);
void targetLogit(const TargetLogitArgs &args);
void sumExp(const SumExpArgs &args);
void vocabParallelLoss(const VocabParallelLossArgs &args);
void vocabParallelLossGrad(const VocabParallelLossGradArgs &args);
} // namespace cpu

namespace cuda {
Status vocabMax(const VocabMaxArgs &args, DeviceStream stream);
Status targetLogit(const TargetLogitArgs &args, DeviceStream stream);
Status sumExp(const SumExpArgs &args, DeviceStream stream);
Status vocabParallelLoss(const VocabParallelLossArgs &args,
                         DeviceStream stream);
Status vocabParallelLossGrad(const VocabParallelLossGradArgs &args,
                             DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
