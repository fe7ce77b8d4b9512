//===- LseMerge.cpp - attention partials merged by log-sum-exp, cpu -------===//
//
// Implements the math stated in kernels/LseMerge.h, one row (s, b, h) of
// headDim elements at a time.
//
//===----------------------------------------------------------------------===//

#include "kernels/LseMerge.h"

#include <algorithm>
#include <cmath>

namespace sharc::kernels::cpu {
namespace {

/// Calls body(row of o, index into lse) for every (s, b, h).
template <typename Body>
void forEachRow(int64_t seqLen, int64_t batch, int64_t numHeads, Body body) {
  for (int64_t s = 0; s < seqLen; ++s)
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < numHeads; ++h)
        body((s * batch + b) * numHeads + h, (b * numHeads + h) * seqLen + s);
}

} // namespace

void lseMerge(const LseMergeArgs &args) {
  const int64_t headDim = args.headDim;
  forEachRow(
      args.seqLen, args.batch, args.numHeads, [&](int64_t row, int64_t at) {
        double lseA = args.lseA[at], lseB = args.lseB[at];
        double shift = std::max(lseA, lseB);
        double lse =
            shift + std::log(std::exp(lseA - shift) + std::exp(lseB - shift));
        double weightA = std::exp(lseA - lse), weightB = std::exp(lseB - lse);
        for (int64_t d = row * headDim; d < (row + 1) * headDim; ++d)
          storeElement(args.out, d,
                       static_cast<float>(weightA * loadElement(args.outA, d) +
                                          weightB * loadElement(args.outB, d)));
        args.lse[at] = static_cast<float>(lse);
      });
}

void lseMergeGrad(const LseMergeGradArgs &args) {
  const int64_t headDim = args.headDim;
  forEachRow(
      args.seqLen, args.batch, args.numHeads, [&](int64_t row, int64_t at) {
        double weight = std::exp(double(args.lsePart[at]) - args.lse[at]);
        double dot = 0;
        for (int64_t d = row * headDim; d < (row + 1) * headDim; ++d)
          dot += loadElement(args.dout, d) *
                 (loadElement(args.part, d) - loadElement(args.out, d));
        for (int64_t d = row * headDim; d < (row + 1) * headDim; ++d)
          storeElement(args.dpart, d, weight * loadElement(args.dout, d));
        double dlse = args.dlse ? args.dlse[at] : 0.0;
        args.dlsePart[at] = static_cast<float>(weight * (dlse + dot));
      });
}

} // namespace sharc::kernels::cpu
