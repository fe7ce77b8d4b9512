//===- CrossEntropy.cpp - mean token cross entropy on the cpu -------------===//
//
// Implements the math stated in kernels/CrossEntropy.h. A label outside
// [0, validVocab) other than -100 is a bug upstream; it is treated as
// ignored here rather than read out of bounds.
//
//===----------------------------------------------------------------------===//

#include "kernels/CrossEntropy.h"

#include "kernels/LabelCount.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace sharc::kernels::cpu {
namespace {

/// Loads row t's first validVocab logits and returns their log-sum-exp.
template <typename Acc>
Acc loadRowLse(ConstTensorView logits, int64_t t, int64_t vocab,
               int64_t validVocab, std::vector<Acc> &row) {
  Acc maxLogit = -std::numeric_limits<Acc>::infinity();
  for (int64_t v = 0; v < validVocab; ++v) {
    row[v] = static_cast<Acc>(loadElement(logits, t * vocab + v));
    maxLogit = std::max(maxLogit, row[v]);
  }
  Acc sumExp = 0;
  for (int64_t v = 0; v < validVocab; ++v)
    sumExp += std::exp(row[v] - maxLogit);
  return maxLogit + std::log(sumExp);
}

template <typename Acc> void crossEntropyImpl(const CrossEntropyArgs &args) {
  std::vector<Acc> row(args.validVocab);
  Acc total = 0;
  for (int64_t t = 0; t < args.numTokens; ++t) {
    int32_t label = args.labels[t];
    if (!isCounted(label, args.validVocab))
      continue;
    Acc lse = loadRowLse(args.logits, t, args.vocab, args.validVocab, row);
    total += lse - row[label];
  }
  int64_t numValid = countValid(args.labels, args.numTokens, args.validVocab);
  *args.loss = static_cast<float>(
      total / static_cast<Acc>(std::max<int64_t>(1, numValid)));
}

template <typename Acc>
void crossEntropyGradImpl(const CrossEntropyGradArgs &args) {
  std::vector<Acc> row(args.validVocab);
  int64_t numValid = countValid(args.labels, args.numTokens, args.validVocab);
  Acc rowScale = static_cast<Acc>(*args.dloss) /
                 static_cast<Acc>(std::max<int64_t>(1, numValid));
  for (int64_t t = 0; t < args.numTokens; ++t) {
    int32_t label = args.labels[t];
    int64_t base = t * args.vocab;
    if (!isCounted(label, args.validVocab)) {
      for (int64_t v = 0; v < args.vocab; ++v)
        storeElement(args.dlogits, base + v, 0.0);
      continue;
    }
    Acc lse = loadRowLse(args.logits, t, args.vocab, args.validVocab, row);
    for (int64_t v = 0; v < args.validVocab; ++v) {
      Acc target = v == label ? Acc(1) : Acc(0);
      storeElement(args.dlogits, base + v,
                   rowScale * (std::exp(row[v] - lse) - target));
    }
    for (int64_t v = args.validVocab; v < args.vocab; ++v)
      storeElement(args.dlogits, base + v, 0.0);
  }
}

} // namespace

void crossEntropy(const CrossEntropyArgs &args) {
  if (args.logits.dtype == DType::F64)
    crossEntropyImpl<double>(args);
  else
    crossEntropyImpl<float>(args);
}

void crossEntropyGrad(const CrossEntropyGradArgs &args) {
  if (args.logits.dtype == DType::F64 || args.dlogits.dtype == DType::F64)
    crossEntropyGradImpl<double>(args);
  else
    crossEntropyGradImpl<float>(args);
}

} // namespace sharc::kernels::cpu
