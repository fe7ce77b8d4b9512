//===- DataLoader.h - token batches, synthetic or read ----------*- C++ -*-===//
// defines: DataLoader, DataOrder, TokenFileHeader, kTokenFileMagic,
//          kTokenFileVersion, readTokenFileHeader
//
// A batch is B*S token ids, batch-first [B, S] row-major, as
// Runtime::setBatch takes it. Both sources are a function of a window index
// alone, so a run is reproducible and can resume anywhere: batchAt(w) holds
// windows w .. w+B-1, and batch(step) = batchAt((step-1)*B) for a run that
// started at step 1 (a resumed run passes its data position instead).
//   synthetic: ids uniform in [0, vocab), from (seed, step, index).
//   token file: the file is cut into windows of S tokens; window w starts
//     at token (w * S) mod count and wraps around the end of the file. Every
//     id must be in [0, vocab), checked when the file is opened. Two
//     layouts (docs/data.md):
//     - sharc token file: a 32-byte header (TokenFileHeader, little-endian)
//       then `count` ids of 2 (uint16) or 4 (uint32) bytes; the header's
//       vocabulary must fit the plan's, so a file made with another
//       tokenizer is refused instead of silently training on wrong ids;
//     - raw: little-endian int32 ids, nothing else (what scripts made
//       before the header existed).
#pragma once

#include "planner/plan/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sharc::exec {

inline constexpr std::string_view kTokenFileMagic = "SHARCTOK";
inline constexpr uint32_t kTokenFileVersion = 1;

/// The header of a sharc token file: magic (8 bytes), version (u32),
/// bytes per id (u32: 2 or 4), vocabulary size (u64), id count (u64).
struct TokenFileHeader {
  uint32_t version = kTokenFileVersion;
  uint32_t tokenBytes = 2;
  uint64_t vocabSize = 0;
  uint64_t count = 0;
  static constexpr int64_t kBytes = 32;
};

/// Parses and checks the header at the start of `bytes` (which begins with
/// the magic) against the file's size; invalid input naming `path`.
Result<TokenFileHeader> readTokenFileHeader(const std::string &path,
                                            std::string_view bytes);

/// The order a file's windows are read in: stride 0, file order; else
/// position w reads window (w * stride) mod numWindows (setShuffle). A
/// checkpoint stores it, so a resumed run reads on in the same order.
struct DataOrder {
  int64_t stride = 0;
  int64_t numWindows = 0;
};

class DataLoader {
public:
  static DataLoader synthetic(int64_t vocab, int64_t batch, int64_t seqLen,
                              uint64_t seed);
  /// An unreadable, empty, ragged or out-of-vocabulary file, one holding
  /// fewer tokens than one sequence (its windows would wrap around it), a
  /// directory, FIFO or device, or a header that does not fit the plan
  /// (version, id width, vocabulary, count), is invalid input naming the
  /// path.
  static Result<DataLoader> fromFile(const std::string &path, int64_t vocab,
                                     int64_t batch, int64_t seqLen);

  /// The batch of 1-based step `step` of a run that started at step 1.
  std::vector<int32_t> batch(int64_t step) const;
  /// Windows firstWindow .. firstWindow + B - 1 (the data position).
  std::vector<int32_t> batchAt(int64_t firstWindow) const;
  int64_t tokensPerBatch() const { return batch_ * seqLen_; }
  int64_t batchSize() const { return batch_; }
  /// Windows of S tokens the file holds whole (at least 1); 0 when
  /// synthetic, whose stream never repeats.
  int64_t numWindows() const;
  /// Reads the file's whole windows in a fixed scattered order instead of
  /// in file order, so that a step's neighbours come from far apart in the
  /// text: data position w reads window (w * a) mod N of N, a the integer
  /// nearest 0.618 N that is coprime to N (a permutation of each pass over
  /// the file). A function of w alone, so resuming stays exact.
  void setShuffle(bool shuffle);
  /// The order in force ({0, 0} in file order or when synthetic).
  DataOrder order() const;
  /// Reads in `order` (a checkpoint's): invalid input when it shuffles
  /// another number of windows than this file holds, or its stride is not
  /// in [1, N) and coprime to N (not a permutation).
  Status setOrder(const DataOrder &order);

private:
  DataLoader(int64_t vocab, int64_t batch, int64_t seqLen)
      : vocab_(vocab), batch_(batch), seqLen_(seqLen) {}
  int64_t vocab_, batch_, seqLen_;
  uint64_t seed_ = 0;
  std::vector<int32_t> fileTokens_; ///< empty: synthetic
  int64_t stride_ = 0;              ///< setShuffle's a; 0: file order
};

} // namespace sharc::exec
