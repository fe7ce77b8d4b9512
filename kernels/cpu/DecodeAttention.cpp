//===- DecodeAttention.cpp - a new position against the cache on the cpu ===//
//
// Implements the math stated in kernels/DecodeAttention.h, in the cpu
// attention's order: score = scale * (q' . k), probabilities
// exp(score - lse) with lse = max + log(sum exp(score - max)). The cache
// writes run first, in order; then every (row, query head) on its own, in
// shares on the kernel threads (KernelThreads.h), so a prefill's rows
// spread over the cores and the bits are those of one thread.
//
//===----------------------------------------------------------------------===//

#include "kernels/DecodeAttention.h"
#include "kernels/Rope.h"
#include "kernels/cpu/KernelThreads.h"
#include "planner/plan/HostThreads.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace sharc::kernels::cpu {
namespace {

/// `value` rounded to the storage type `dtype`, as a store then a load.
double roundedTo(DType dtype, double value) {
  alignas(8) unsigned char slot[8];
  storeElement(TensorView{slot, dtype}, 0, value);
  return loadElement(ConstTensorView{slot, dtype}, 0);
}

/// `count` elements of `view` from `offset` as Acc: a copy where they are
/// stored as Acc, else one conversion each (the same values either way).
template <typename Acc>
void loadRow(ConstTensorView view, int64_t offset, int64_t count, Acc *out) {
  if ((std::is_same_v<Acc, float> && view.dtype == DType::F32) ||
      (std::is_same_v<Acc, double> && view.dtype == DType::F64)) {
    const Acc *from = static_cast<const Acc *>(view.data) + offset;
    std::copy(from, from + count, out);
    return;
  }
  for (int64_t i = 0; i < count; ++i)
    out[i] = static_cast<Acc>(loadElement(view, offset + i));
}

/// cos and sin of position p times each of rope's inverse frequencies.
template <typename Acc>
void ropeAngles(const std::vector<Acc> &invFreq, int64_t p,
                std::vector<Acc> &cosines, std::vector<Acc> &sines) {
  Acc position = static_cast<Acc>(p);
  for (size_t i = 0; i < invFreq.size(); ++i) {
    Acc angle = position * invFreq[i];
    cosines[i] = std::cos(angle);
    sines[i] = std::sin(angle);
  }
}

/// The head at `base` of `x` rotated by the angles into `out`, each
/// element rounded to the storage type.
template <typename Acc>
void rotateHead(ConstTensorView x, int64_t base, int64_t headDim, DType storage,
                const std::vector<Acc> &cosines, const std::vector<Acc> &sines,
                std::vector<Acc> &out) {
  int64_t half = headDim / 2;
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
}

template <typename Acc>
void decodeImpl(const DecodeAttentionArgs &args, DType storage) {
  int64_t headDim = args.headDim, half = headDim / 2;
  int64_t batch = args.batch, group = args.numHeads / args.numKvHeads;
  int64_t kvWidth = args.numKvHeads * headDim, qWidth = args.numHeads * headDim;
  int64_t rowPitch = batch * kvWidth;
  std::vector<Acc> invFreq(half);
  for (int64_t i = 0; i < half; ++i)
    invFreq[i] = ropeInverseFrequency<Acc>(i, headDim, args.theta);
  Acc scale = Acc(1) / std::sqrt(static_cast<Acc>(headDim));
  // n = t * B + b: row t of sample b.
  int64_t count = args.rows * batch;
  // Every new position's keys (rotated) and values into the caches first,
  // so a chunk's rows see each other's.
  {
    std::vector<Acc> cosines(half), sines(half), row(headDim);
    for (int64_t n = 0; n < count; ++n) {
      int64_t b = n % batch, p = args.positions[n];
      ropeAngles(invFreq, p, cosines, sines);
      for (int64_t g = 0; g < args.numKvHeads; ++g) {
        int64_t from = n * kvWidth + g * headDim;
        int64_t to = (p * batch + b) * kvWidth + g * headDim;
        rotateHead(args.k, from, headDim, storage, cosines, sines, row);
        for (int64_t d = 0; d < headDim; ++d) {
          storeElement(args.kCache, to + d, row[d]);
          storeElement(args.vCache, to + d, loadElement(args.v, from + d));
        }
      }
    }
  }
  // Then each (row, query head) on its own: shares of them on the kernel
  // threads, each unit summed in one order whatever the count (the bits
  // do not depend on it). A cache row is read into Acc once per use, as a
  // copy where the cache is already Acc.
  int64_t units = count * args.numHeads;
  int64_t work = 0;
  for (int64_t n = 0; n < count; ++n)
    work += (args.positions[n] + 1) * headDim * 2 * args.numHeads;
  int64_t shares = std::min(units, shareCount(work, int64_t{1} << 20));
  runShares(shares, [&](int64_t share) {
    std::vector<Acc> cosines(half), sines(half), query(headDim);
    std::vector<Acc> cached(headDim), sums(headDim), scores;
    for (int64_t unit = units * share / shares;
         unit < units * (share + 1) / shares; ++unit) {
      int64_t n = unit / args.numHeads, h = unit % args.numHeads;
      int64_t b = n % batch, p = args.positions[n];
      int64_t qBase = n * qWidth + h * headDim;
      ropeAngles(invFreq, p, cosines, sines);
      rotateHead(args.q, qBase, headDim, storage, cosines, sines, query);
      int64_t kvBase = b * kvWidth + (h / group) * headDim;
      scores.resize(p + 1);
      Acc maxScore = -std::numeric_limits<Acc>::infinity();
      for (int64_t t = 0; t <= p; ++t) {
        loadRow(args.kCache, t * rowPitch + kvBase, headDim, cached.data());
        Acc dot = 0;
        for (int64_t d = 0; d < headDim; ++d)
          dot += query[d] * cached[d];
        scores[t] = scale * dot;
        maxScore = std::max(maxScore, scores[t]);
      }
      Acc sumExp = 0;
      for (int64_t t = 0; t <= p; ++t)
        sumExp += std::exp(scores[t] - maxScore);
      Acc lse = maxScore + std::log(sumExp);
      std::fill(sums.begin(), sums.end(), Acc(0));
      for (int64_t t = 0; t <= p; ++t) {
        Acc weight = std::exp(scores[t] - lse);
        loadRow(args.vCache, t * rowPitch + kvBase, headDim, cached.data());
        for (int64_t d = 0; d < headDim; ++d)
          sums[d] += weight * cached[d];
      }
      for (int64_t d = 0; d < headDim; ++d)
        storeElement(args.out, qBase + d, sums[d]);
    }
  });
}

} // namespace

void decodeAttention(const DecodeAttentionArgs &args) {
  if (args.q.dtype == DType::F64)
    decodeImpl<double>(args, args.q.dtype);
  else
    decodeImpl<float>(args, args.q.dtype);
}

} // namespace sharc::kernels::cpu
