//===- LabelCount.h - valid labels and the loss over a step -----*- C++ -*-===//
// defines: ValidCountArgs, CountScaleArgs, validCount, countScale
//          (cpu::, cuda::), cpu::isCounted, cpu::countValid
//
// The loss of a step is the mean over every valid label of the global
// batch, whichever rank or microbatch holds it. A label counts when it is
// in [0, validVocab) (-100, ignored, never does), as in CrossEntropy.h.
// With n(labels) the number of labels [numTokens] int32 that count:
//   validCount: count = n(labels)                            (fp32 scalar)
//   countScale: y = x * n(labels) / max(1, total)            (fp32 scalars)
// A piece's mean loss x times countScale is its share of the mean over the
// step, whose count `total` is the sum of validCount over the pieces; the
// same op scales the gradient of that mean (y is linear in x). Counts are
// exact in fp32 up to 2^24 labels a step.
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct ValidCountArgs {
  const int32_t *labels = nullptr;
  float *count = nullptr;
  int64_t numTokens = 0, validVocab = 0;
};

struct CountScaleArgs {
  const float *x = nullptr;
  const int32_t *labels = nullptr;
  const float *total = nullptr;
  float *y = nullptr;
  int64_t numTokens = 0, validVocab = 0;
};

namespace cpu {
/// Whether `label` counts toward the loss: in [0, validVocab).
inline bool isCounted(int32_t label, int64_t validVocab) {
  return label >= 0 && label < validVocab;
}
/// n(labels): how many of the numTokens labels count (the cpu loss kernels
/// divide by it).
int64_t countValid(const int32_t *labels, int64_t numTokens,
                   int64_t validVocab);
void validCount(const ValidCountArgs &args);
void countScale(const CountScaleArgs &args);
} // namespace cpu

namespace cuda {
Status validCount(const ValidCountArgs &args, DeviceStream stream);
Status countScale(const CountScaleArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
