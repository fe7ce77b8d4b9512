//===- DecodeAttention.cpp - a new position against the cache on the cpu ===//
//
// Implements the math stated in kernels/DecodeAttention.h, in the cpu
// attention's order: score = scale * (q' . k), probabilities
// exp(score - lse) with lse = max + log(sum exp(score - max)).
//
//===----------------------------------------------------------------------===//

#include "kernels/DecodeAttention.h"
#include "kernels/Rope.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace sharc::kernels::cpu {
namespace {

/// `value` rounded to the storage type `dtype`, as a store then a load.
double roundedTo(DType dtype, double value) {
  alignas(8) unsigned char slot[8];
  storeElement(TensorView{slot, dtype}, 0, value);
  return loadElement(ConstTensorView{slot, dtype}, 0);
}

template <typename Acc>
void decodeImpl(const DecodeAttentionArgs &args, DType storage) {
  int64_t headDim = args.headDim, half = headDim / 2;
  int64_t batch = args.batch, group = args.numHeads / args.numKvHeads;
  int64_t kvWidth = args.numKvHeads * headDim, qWidth = args.numHeads * headDim;
  std::vector<Acc> invFreq(half), cosines(half), sines(half);
  for (int64_t i = 0; i < half; ++i)
    invFreq[i] = ropeInverseFrequency<Acc>(i, headDim, args.theta);
  // Rotates the head at `base` of `x` by position p into `out`, each
  // element rounded to the storage type.
  auto rotate = [&](ConstTensorView x, int64_t base, std::vector<Acc> &out) {
    for (int64_t i = 0; i < half; ++i) {
      Acc first = static_cast<Acc>(loadElement(x, base + i));
      Acc second = static_cast<Acc>(loadElement(x, base + i + half));
      out[i] = static_cast<Acc>(
          roundedTo(storage, first * cosines[i] - second * sines[i]));
      out[i + half] = static_cast<Acc>(
          roundedTo(storage, second * cosines[i] + first * sines[i]));
    }
    if (headDim % 2 != 0)
      out[headDim - 1] = static_cast<Acc>(loadElement(x, base + headDim - 1));
  };
  Acc scale = Acc(1) / std::sqrt(static_cast<Acc>(headDim));
  std::vector<Acc> row(headDim), acc(headDim);
  // n = t * B + b: row t of sample b.
  int64_t count = args.rows * batch;
  auto angles = [&](int64_t p) {
    Acc position = static_cast<Acc>(p);
    for (int64_t i = 0; i < half; ++i) {
      Acc angle = position * invFreq[i];
      cosines[i] = std::cos(angle);
      sines[i] = std::sin(angle);
    }
  };
  // Every new position's keys (rotated) and values into the caches first,
  // so a chunk's rows see each other's.
  for (int64_t n = 0; n < count; ++n) {
    int64_t b = n % batch, p = args.positions[n];
    angles(p);
    for (int64_t g = 0; g < args.numKvHeads; ++g) {
      int64_t from = n * kvWidth + g * headDim;
      int64_t to = (p * batch + b) * kvWidth + g * headDim;
      rotate(args.k, from, row);
      for (int64_t d = 0; d < headDim; ++d) {
        storeElement(args.kCache, to + d, row[d]);
        storeElement(args.vCache, to + d, loadElement(args.v, from + d));
      }
    }
  }
  for (int64_t n = 0; n < count; ++n) {
    int64_t b = n % batch, p = args.positions[n];
    angles(p);
    std::vector<Acc> scores(p + 1);
    for (int64_t h = 0; h < args.numHeads; ++h) {
      rotate(args.q, n * qWidth + h * headDim, row);
      int64_t kvBase = b * kvWidth + (h / group) * headDim;
      Acc maxScore = -std::numeric_limits<Acc>::infinity();
      for (int64_t t = 0; t <= p; ++t) {
        Acc dot = 0;
        for (int64_t d = 0; d < headDim; ++d)
          dot += row[d] * static_cast<Acc>(loadElement(
                              args.kCache, t * batch * kvWidth + kvBase + d));
        scores[t] = scale * dot;
        maxScore = std::max(maxScore, scores[t]);
      }
      Acc sumExp = 0;
      for (int64_t t = 0; t <= p; ++t)
        sumExp += std::exp(scores[t] - maxScore);
      Acc lse = maxScore + std::log(sumExp);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t t = 0; t <= p; ++t) {
        Acc weight = std::exp(scores[t] - lse);
        for (int64_t d = 0; d < headDim; ++d)
          acc[d] +=
              weight * static_cast<Acc>(loadElement(
                           args.vCache, t * batch * kvWidth + kvBase + d));
      }
      for (int64_t d = 0; d < headDim; ++d)
        storeElement(args.out, n * qWidth + h * headDim + d, acc[d]);
    }
  }
}

} // namespace

void decodeAttention(const DecodeAttentionArgs &args) {
  if (args.q.dtype == DType::F64)
    decodeImpl<double>(args, args.q.dtype);
  else
    decodeImpl<float>(args, args.q.dtype);
}

} // namespace sharc::kernels::cpu
