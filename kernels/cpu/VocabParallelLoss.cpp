//===- VocabParallelLoss.cpp - sharded-vocab cross entropy on the cpu -----===//
//
// Implements the math stated in kernels/VocabParallelLoss.h. As in
// cpu/CrossEntropy.cpp, a label outside [0, validVocab) other than -100 is
// treated as ignored rather than read out of bounds, so the sharded loss
// matches the dense one on any labels.
//
//===----------------------------------------------------------------------===//

#include "kernels/VocabParallelLoss.h"

#include "kernels/LabelCount.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sharc::kernels::cpu {
namespace {

/// Local columns [0, result) are real vocabulary; the rest is padding. A
/// rank past validVocab owns none.
int64_t localValidColumns(int64_t localVocab, int64_t vocabStart,
                          int64_t validVocab) {
  return std::clamp<int64_t>(validVocab - vocabStart, 0, localVocab);
}

bool isF64(ConstTensorView view) { return view.dtype == DType::F64; }

template <typename Acc> Acc load(ConstTensorView view, int64_t index) {
  return static_cast<Acc>(loadElement(view, index));
}

template <typename Acc> void vocabMaxImpl(const VocabMaxArgs &args) {
  int64_t numLocal =
      localValidColumns(args.localVocab, args.vocabStart, args.validVocab);
  for (int64_t t = 0; t < args.numTokens; ++t) {
    Acc maxLogit = -std::numeric_limits<Acc>::infinity();
    for (int64_t j = 0; j < numLocal; ++j)
      maxLogit =
          std::max(maxLogit, load<Acc>(args.logits, t * args.localVocab + j));
    storeElement(args.vocabMax, t, maxLogit);
  }
}

template <typename Acc> void sumExpImpl(const SumExpArgs &args) {
  int64_t numLocal =
      localValidColumns(args.localVocab, args.vocabStart, args.validVocab);
  for (int64_t t = 0; t < args.numTokens; ++t) {
    Acc globalMax = load<Acc>(args.vocabMax, t);
    Acc sum = 0;
    for (int64_t j = 0; j < numLocal; ++j)
      sum +=
          std::exp(load<Acc>(args.logits, t * args.localVocab + j) - globalMax);
    storeElement(args.sumExp, t, sum);
  }
}

template <typename Acc>
void vocabParallelLossImpl(const VocabParallelLossArgs &args) {
  Acc total = 0;
  for (int64_t t = 0; t < args.numTokens; ++t) {
    if (!isCounted(args.labels[t], args.validVocab))
      continue;
    Acc lse = std::log(load<Acc>(args.sumExp, t)) + load<Acc>(args.vocabMax, t);
    total += lse - load<Acc>(args.targetLogit, t);
  }
  int64_t numValid = countValid(args.labels, args.numTokens, args.validVocab);
  *args.loss = static_cast<float>(
      total / static_cast<Acc>(std::max<int64_t>(1, numValid)));
}

template <typename Acc>
void vocabParallelLossGradImpl(const VocabParallelLossGradArgs &args) {
  int64_t numLocal =
      localValidColumns(args.localVocab, args.vocabStart, args.validVocab);
  int64_t numValid = countValid(args.labels, args.numTokens, args.validVocab);
  Acc rowScale = static_cast<Acc>(*args.dloss) /
                 static_cast<Acc>(std::max<int64_t>(1, numValid));
  for (int64_t t = 0; t < args.numTokens; ++t) {
    int32_t label = args.labels[t];
    int64_t base = t * args.localVocab;
    int64_t numWritten = 0;
    if (isCounted(label, args.validVocab)) {
      Acc globalMax = load<Acc>(args.vocabMax, t);
      Acc globalSum = load<Acc>(args.sumExp, t);
      for (int64_t j = 0; j < numLocal; ++j) {
        Acc target = args.vocabStart + j == label ? Acc(1) : Acc(0);
        Acc prob =
            std::exp(load<Acc>(args.logits, base + j) - globalMax) / globalSum;
        storeElement(args.dlogits, base + j, rowScale * (prob - target));
      }
      numWritten = numLocal;
    }
    for (int64_t j = numWritten; j < args.localVocab; ++j)
      storeElement(args.dlogits, base + j, 0.0);
  }
}

} // namespace

void vocabMax(const VocabMaxArgs &args) {
  if (isF64(args.logits))
    vocabMaxImpl<double>(args);
  else
    vocabMaxImpl<float>(args);
}

void targetLogit(const TargetLogitArgs &args) {
  // A copy, not a computation: loadElement is exact for every storage type,
  // so no accumulator type is needed.
  for (int64_t t = 0; t < args.numTokens; ++t) {
    int32_t label = args.labels[t];
    int64_t column = static_cast<int64_t>(label) - args.vocabStart;
    bool isLocal = column >= 0 && column < args.localVocab;
    double value = 0.0;
    if (isCounted(label, args.validVocab) && isLocal)
      value = loadElement(args.logits, t * args.localVocab + column);
    storeElement(args.targetLogit, t, value);
  }
}

void sumExp(const SumExpArgs &args) {
  if (isF64(args.logits))
    sumExpImpl<double>(args);
  else
    sumExpImpl<float>(args);
}

void vocabParallelLoss(const VocabParallelLossArgs &args) {
  // No logits here: the statistics' storage decides the precision.
  if (isF64(args.vocabMax) || isF64(args.targetLogit) || isF64(args.sumExp))
    vocabParallelLossImpl<double>(args);
  else
    vocabParallelLossImpl<float>(args);
}

void vocabParallelLossGrad(const VocabParallelLossGradArgs &args) {
  if (isF64(args.logits) || isF64(args.dlogits))
    vocabParallelLossGradImpl<double>(args);
  else
    vocabParallelLossGradImpl<float>(args);
}

} // namespace sharc::kernels::cpu
