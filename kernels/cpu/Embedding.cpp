//===- Embedding.cpp - embedding lookup and its gradient on the cpu -------===//
//
// Implements the math stated in kernels/Embedding.h.
//
//===----------------------------------------------------------------------===//

#include "kernels/Embedding.h"

#include <vector>

namespace sharc::kernels::cpu {
namespace {

/// Local row of a global token id, or -1 when the id is outside the rows
/// this table holds.
int64_t localRow(int32_t id, int64_t vocabStart, int64_t numRows) {
  int64_t local = static_cast<int64_t>(id) - vocabStart;
  return local >= 0 && local < numRows ? local : -1;
}

template <typename Acc> void embeddingGradImpl(const EmbeddingGradArgs &args) {
  std::vector<Acc> sums(args.numRows * args.hidden, Acc(0));
  for (int64_t t = 0; t < args.numTokens; ++t) {
    int64_t row = localRow(args.ids[t], args.vocabStart, args.numRows);
    if (row < 0)
      continue;
    Acc *sumRow = sums.data() + row * args.hidden;
    for (int64_t h = 0; h < args.hidden; ++h)
      sumRow[h] +=
          static_cast<Acc>(loadElement(args.dout, t * args.hidden + h));
  }
  for (int64_t i = 0; i < args.numRows * args.hidden; ++i)
    storeElement(args.dtable, i, sums[i]);
}

} // namespace

void embedding(const EmbeddingArgs &args) {
  for (int64_t t = 0; t < args.numTokens; ++t) {
    int64_t row = localRow(args.ids[t], args.vocabStart, args.numRows);
    for (int64_t h = 0; h < args.hidden; ++h) {
      double value =
          row < 0 ? 0.0 : loadElement(args.table, row * args.hidden + h);
      storeElement(args.out, t * args.hidden + h, value);
    }
  }
}

void embeddingGrad(const EmbeddingGradArgs &args) {
  if (args.dout.dtype == DType::F64 || args.dtable.dtype == DType::F64)
    embeddingGradImpl<double>(args);
  else
    embeddingGradImpl<float>(args);
}

} // namespace sharc::kernels::cpu
