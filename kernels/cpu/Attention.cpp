//===- Attention.cpp - causal grouped-query attention on the cpu ----------===//
//
// Implements the math stated in kernels/Attention.h. q, k, v (and out, dout
// for the backward) are converted to contiguous Acc arrays once per call, in
// their [seqLen, batch, heads*headDim] layout, so every row used below is a
// contiguous headDim vector. The vector helpers work in fixed blocks of 8:
// GCC vectorises those at -O2, where a plain loop with a runtime trip count
// (or a single-accumulator reduction) stays scalar.
//
//===----------------------------------------------------------------------===//

#include "kernels/Attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace sharc::kernels::cpu {
namespace {

constexpr int64_t kLanes = 8;

template <typename Acc>
Acc dot(const Acc *__restrict a, const Acc *__restrict b, int64_t n) {
  Acc partial[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t lane = 0; lane < kLanes; ++lane)
      partial[lane] += a[i + lane] * b[i + lane];
  Acc tail = 0;
  for (; i < n; ++i)
    tail += a[i] * b[i];
  Acc sum = tail;
  for (int64_t lane = 0; lane < kLanes; ++lane)
    sum += partial[lane];
  return sum;
}

/// y += alpha * x.
template <typename Acc>
void axpy(Acc alpha, const Acc *__restrict x, Acc *__restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t lane = 0; lane < kLanes; ++lane)
      y[i + lane] += alpha * x[i + lane];
  for (; i < n; ++i)
    y[i] += alpha * x[i];
}

template <typename Acc>
std::vector<Acc> loadAll(ConstTensorView view, int64_t numel) {
  std::vector<Acc> values(numel);
  for (int64_t i = 0; i < numel; ++i)
    values[i] = static_cast<Acc>(loadElement(view, i));
  return values;
}

template <typename Acc>
void storeAll(TensorView view, const std::vector<Acc> &values, Acc scale) {
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i)
    storeElement(view, i, values[i] * scale);
}

/// Rows of `width` elements, `pitch` apart in `view` (0: packed), as one
/// packed vector of numel elements.
template <typename Acc>
std::vector<Acc> loadRows(ConstTensorView view, int64_t numel, int64_t width,
                          int64_t pitch) {
  if (pitch <= 0 || pitch == width)
    return loadAll<Acc>(view, numel);
  std::vector<Acc> values(numel);
  for (int64_t i = 0; i < numel; ++i)
    values[i] =
        static_cast<Acc>(loadElement(view, i / width * pitch + i % width));
  return values;
}

template <typename Acc>
void storeRows(TensorView view, const std::vector<Acc> &values, int64_t width,
               int64_t pitch) {
  if (pitch <= 0 || pitch == width)
    return storeAll(view, values, Acc(1));
  for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i)
    storeElement(view, i / width * pitch + i % width, values[i]);
}

/// Offsets of one head's row in the sequence-first layouts.
struct RowIndex {
  int64_t batch, numHeads, numKvHeads, headDim;
  int64_t q(int64_t s, int64_t b, int64_t h) const {
    return ((s * batch + b) * numHeads + h) * headDim;
  }
  int64_t kv(int64_t s, int64_t b, int64_t h) const {
    return ((s * batch + b) * numKvHeads + h) * headDim;
  }
};

/// The last key query i sees (positions grow with the row, so it sees the
/// keys before the first one past its position); -1 when it sees none.
template <typename Args> int64_t lastKey(const Args &args, int64_t i) {
  int64_t seen = args.keyPositions().firstRowFrom(args.queries().at(i) + 1);
  return std::min(seen, args.keys()) - 1;
}

template <typename Acc> void attentionImpl(const AttentionArgs &args) {
  int64_t seqLen = args.seqLen, headDim = args.headDim;
  RowIndex index{args.batch, args.numHeads, args.numKvHeads, headDim};
  auto q = loadAll<Acc>(args.q, seqLen * args.batch * args.numHeads * headDim);
  int64_t kvNumel = args.keys() * args.batch * args.numKvHeads * headDim;
  auto k = loadAll<Acc>(args.k, kvNumel);
  auto v =
      loadRows<Acc>(args.v, kvNumel, args.numKvHeads * headDim, args.vPitch);
  std::vector<Acc> out(q.size(), Acc(0));
  std::vector<Acc> scores(args.keys());
  Acc scale = Acc(1) / std::sqrt(static_cast<Acc>(headDim));
  int64_t groupSize = args.numHeads / args.numKvHeads;
  for (int64_t b = 0; b < args.batch; ++b)
    for (int64_t h = 0; h < args.numHeads; ++h) {
      int64_t kvHead = h / groupSize;
      for (int64_t i = 0; i < seqLen; ++i) {
        const Acc *qRow = q.data() + index.q(i, b, h);
        Acc maxScore = -std::numeric_limits<Acc>::infinity();
        int64_t last = lastKey(args, i);
        float *lseOut = &args.lse[(b * args.numHeads + h) * seqLen + i];
        if (last < 0) { // out's row stays 0
          *lseOut = kEmptyRowLse;
          continue;
        }
        for (int64_t j = 0; j <= last; ++j) {
          scores[j] =
              scale * dot(qRow, k.data() + index.kv(j, b, kvHead), headDim);
          maxScore = std::max(maxScore, scores[j]);
        }
        Acc sumExp = 0;
        for (int64_t j = 0; j <= last; ++j)
          sumExp += std::exp(scores[j] - maxScore);
        Acc lse = maxScore + std::log(sumExp);
        Acc *outRow = out.data() + index.q(i, b, h);
        for (int64_t j = 0; j <= last; ++j)
          axpy(std::exp(scores[j] - lse), v.data() + index.kv(j, b, kvHead),
               outRow, headDim);
        *lseOut = static_cast<float>(lse);
      }
    }
  storeAll(args.out, out, Acc(1));
}

template <typename Acc> void attentionGradImpl(const AttentionGradArgs &args) {
  int64_t seqLen = args.seqLen, headDim = args.headDim;
  RowIndex index{args.batch, args.numHeads, args.numKvHeads, headDim};
  int64_t qNumel = seqLen * args.batch * args.numHeads * headDim;
  int64_t kvNumel = args.keys() * args.batch * args.numKvHeads * headDim;
  auto q = loadAll<Acc>(args.q, qNumel);
  auto k = loadAll<Acc>(args.k, kvNumel);
  auto v =
      loadRows<Acc>(args.v, kvNumel, args.numKvHeads * headDim, args.vPitch);
  auto out = loadAll<Acc>(args.out, qNumel);
  auto dout = loadAll<Acc>(args.dout, qNumel);
  // dq and dk gather sum(ds * .) and take the common factor scale on store.
  std::vector<Acc> dq(qNumel, Acc(0)), dk(kvNumel, Acc(0)), dv(kvNumel, Acc(0));
  Acc scale = Acc(1) / std::sqrt(static_cast<Acc>(headDim));
  int64_t groupSize = args.numHeads / args.numKvHeads;
  for (int64_t b = 0; b < args.batch; ++b)
    for (int64_t h = 0; h < args.numHeads; ++h) {
      int64_t kvHead = h / groupSize;
      for (int64_t i = 0; i < seqLen; ++i) {
        int64_t qOffset = index.q(i, b, h);
        const Acc *qRow = q.data() + qOffset;
        const Acc *doutRow = dout.data() + qOffset;
        int64_t row = (b * args.numHeads + h) * seqLen + i;
        Acc lse = args.lse[row];
        Acc delta = dot(doutRow, out.data() + qOffset, headDim);
        if (args.dlse)
          delta -= args.dlse[row];
        int64_t last = lastKey(args, i);
        for (int64_t j = 0; j <= last; ++j) {
          int64_t kvOffset = index.kv(j, b, kvHead);
          const Acc *kRow = k.data() + kvOffset;
          Acc p = std::exp(scale * dot(qRow, kRow, headDim) - lse);
          Acc dp = dot(doutRow, v.data() + kvOffset, headDim);
          Acc ds = p * (dp - delta);
          axpy(ds, kRow, dq.data() + qOffset, headDim);
          axpy(ds, qRow, dk.data() + kvOffset, headDim);
          axpy(p, doutRow, dv.data() + kvOffset, headDim);
        }
      }
    }
  storeAll(args.dq, dq, scale);
  storeAll(args.dk, dk, scale);
  storeRows(args.dv, dv, args.numKvHeads * headDim, args.dvPitch);
}

} // namespace

// A head count that does not split into KV groups is rejected by the
// planner; the guard only keeps the kernel from dividing by zero.
void attention(const AttentionArgs &args) {
  if (args.numKvHeads <= 0 || args.numHeads % args.numKvHeads != 0)
    return;
  if (args.q.dtype == DType::F64 || args.out.dtype == DType::F64)
    attentionImpl<double>(args);
  else
    attentionImpl<float>(args);
}

void attentionGrad(const AttentionGradArgs &args) {
  if (args.numKvHeads <= 0 || args.numHeads % args.numKvHeads != 0)
    return;
  if (args.q.dtype == DType::F64 || args.dq.dtype == DType::F64)
    attentionGradImpl<double>(args);
  else
    attentionGradImpl<float>(args);
}

} // namespace sharc::kernels::cpu
