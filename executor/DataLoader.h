//===- DataLoader.h - token batches, synthetic or read ----------*- C++ -*-===//
// defines: DataLoader
//
// A batch is B*S token ids, batch-first [B, S] row-major, as
// Runtime::setBatch takes it. Both sources are a function of the step number
// alone, so a run is reproducible and can resume at any step.
//   synthetic: ids uniform in [0, vocab), from (seed, step, index).
//   token file: raw little-endian int32 ids, nothing else (no header); the
//     file is cut into windows of S tokens, window w = (step-1)*B + b is
//     sample b of that step, wrapping around the end of the file. Every id
//     must be in [0, vocab), checked when the file is opened.
#pragma once

#include "planner/plan/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sharc::exec {

class DataLoader {
public:
  static DataLoader synthetic(int64_t vocab, int64_t batch, int64_t seqLen,
                              uint64_t seed);
  /// An unreadable, empty, ragged or out-of-vocabulary file is invalid
  /// input naming the path.
  static Result<DataLoader> fromFile(const std::string &path, int64_t vocab,
                                     int64_t batch, int64_t seqLen);

  /// The batch of 1-based step `step`.
  std::vector<int32_t> batch(int64_t step) const;
  int64_t tokensPerBatch() const { return batch_ * seqLen_; }

private:
  DataLoader(int64_t vocab, int64_t batch, int64_t seqLen)
      : vocab_(vocab), batch_(batch), seqLen_(seqLen) {}
  int64_t vocab_, batch_, seqLen_;
  uint64_t seed_ = 0;
  std::vector<int32_t> fileTokens_; ///< empty: synthetic
};

} // namespace sharc::exec
