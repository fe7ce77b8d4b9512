//===- Rope.cpp - rotary position embedding on the cpu --------------------===//
//
// Implements the math stated in kernels/Rope.h. Each (i, i + D/2) pair is
// loaded before either half is stored, so y may alias x. An odd headDim
// leaves its last element unrotated (models always use even head dims).
//
//===----------------------------------------------------------------------===//

#include "kernels/Rope.h"

#include <cmath>
#include <vector>

namespace sharc::kernels::cpu {
namespace {

template <typename Acc> void ropeImpl(const RopeArgs &args) {
  int64_t headDim = args.headDim;
  int64_t half = headDim / 2;
  // The tables are built in Acc precision, as the original builds its fp32
  // cos/sin tables: exponent, power, reciprocal and angle each rounded.
  std::vector<Acc> invFreq(half);
  for (int64_t i = 0; i < half; ++i)
    invFreq[i] = ropeInverseFrequency<Acc>(i, headDim, args.theta);
  std::vector<Acc> cosines(half), sines(half);
  int64_t rowsPerPosition = args.batch * args.numHeads;
  RowPositions positions = args.positions();
  for (int64_t s = 0; s < args.seqLen; ++s) {
    Acc position = static_cast<Acc>(positions.at(s));
    for (int64_t i = 0; i < half; ++i) {
      Acc angle = position * invFreq[i];
      cosines[i] = std::cos(angle);
      sines[i] = args.inverse ? -std::sin(angle) : std::sin(angle);
    }
    for (int64_t row = 0; row < rowsPerPosition; ++row) {
      int64_t base = (s * rowsPerPosition + row) * headDim;
      for (int64_t i = 0; i < half; ++i) {
        Acc first = static_cast<Acc>(loadElement(args.x, base + i));
        Acc second = static_cast<Acc>(loadElement(args.x, base + i + half));
        storeElement(args.y, base + i, first * cosines[i] - second * sines[i]);
        storeElement(args.y, base + i + half,
                     second * cosines[i] + first * sines[i]);
      }
      if (headDim % 2 != 0)
        storeElement(args.y, base + headDim - 1,
                     loadElement(args.x, base + headDim - 1));
    }
  }
}

} // namespace

void rope(const RopeArgs &args) {
  if (args.x.dtype == DType::F64 || args.y.dtype == DType::F64)
    ropeImpl<double>(args);
  else
    ropeImpl<float>(args);
}

} // namespace sharc::kernels::cpu
