//===- SumSquares.cpp - the weighted sum of squares on the cpu ------------===//
//
// Implements the math stated in kernels/SumSquares.h: in tensor order,
// each tensor's squares summed in double, divided by its replica count.
//
//===----------------------------------------------------------------------===//

#include "kernels/SumSquares.h"

namespace sharc::kernels::cpu {

void sumSquares(const SumSquaresArgs &args) {
  double total = 0.0;
  for (size_t t = 0; t < args.xs.size(); ++t) {
    double tensorSum = 0.0;
    for (int64_t i = 0; i < args.numels[t]; ++i) {
      double value = loadElement(args.xs[t], i);
      tensorSum += value * value;
    }
    total += tensorSum / static_cast<double>(args.replicas[t]);
  }
  *args.sum = static_cast<float>(total);
}

} // namespace sharc::kernels::cpu
