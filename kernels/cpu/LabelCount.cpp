//===- LabelCount.cpp - valid labels and the step's loss on the cpu -------===//
//
// Implements the math stated in kernels/LabelCount.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/LabelCount.h"

#include <algorithm>

namespace sharc::kernels::cpu {

int64_t countValid(const int32_t *labels, int64_t numTokens,
                   int64_t validVocab) {
  int64_t numValid = 0;
  for (int64_t t = 0; t < numTokens; ++t)
    numValid += isCounted(labels[t], validVocab) ? 1 : 0;
  return numValid;
}

void validCount(const ValidCountArgs &args) {
  *args.count = static_cast<float>(
      countValid(args.labels, args.numTokens, args.validVocab));
}

void countScale(const CountScaleArgs &args) {
  float numValid = static_cast<float>(
      countValid(args.labels, args.numTokens, args.validVocab));
  *args.y = *args.x * numValid / std::max(1.0f, *args.total);
}

} // namespace sharc::kernels::cpu
