//===- Embedding.h - embedding lookup and its gradient ----------*- C++ -*-===//
// defines: EmbeddingArgs, EmbeddingGradArgs, embedding, embeddingGrad
//          (cpu::, cuda::)
//
// Forward, for t in [0, numTokens), h in [0, hidden):
//   local = ids[t] - vocabStart
//   out[t,h] = table[local,h] if 0 <= local < numRows else 0
// The table holds rows [vocabStart, vocabStart + numRows) of the global
// vocabulary (the whole vocabulary when not vocab-parallel); ids outside it
// give zero rows, whose sum over ranks is the dense lookup.
// Backward: dtable[v,h] = sum over t with ids[t] - vocabStart == v of
// dout[t,h], accumulated in fp32 and written once (dtable is overwritten).
#pragma once

#include "kernels/TensorView.h"
#include "planner/plan/Status.h"

namespace sharc::kernels {

struct EmbeddingArgs {
  ConstTensorView table;        ///< [numRows, hidden]
  const int32_t *ids = nullptr; ///< [numTokens]
  TensorView out;               ///< [numTokens, hidden]
  int64_t numTokens = 0, numRows = 0, hidden = 0;
  int64_t vocabStart = 0;
};

struct EmbeddingGradArgs {
  ConstTensorView dout; ///< [numTokens, hidden]
  const int32_t *ids = nullptr;
  TensorView dtable; ///< [numRows, hidden]
  int64_t numTokens = 0, numRows = 0, hidden = 0;
  int64_t vocabStart = 0;
};

namespace cpu {
void embedding(const EmbeddingArgs &args);
void embeddingGrad(const EmbeddingGradArgs &args);
} // namespace cpu

namespace cuda {
Status embedding(const EmbeddingArgs &args, DeviceStream stream);
Status embeddingGrad(const EmbeddingGradArgs &args, DeviceStream stream);
} // namespace cuda

} // namespace sharc::kernels
