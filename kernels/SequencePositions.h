//===- SequencePositions.h - global positions of a rank's rows --*- C++ -*-===//
// defines: SequenceSplit, RowPositions, rowPositions, balancedChunk,
//          ringKeyBlock
//
// Context parallelism splits the sequence (dimension 0 of the sequence-first
// activations) over the n ranks of an axis; a rank holds L = S / n rows.
//   contiguous: rank r holds positions [r L, (r+1) L) (the original's split).
//   balanced:   the sequence is cut into 2n chunks of c = L / 2 positions and
//               rank r holds chunk r, then chunk 2n-1-r. Under a causal mask
//               chunk k's queries meet (k + 1/2) c^2 key pairs, so every
//               rank does (r + 1/2 + 2n-1-r + 1/2) c^2 = 2n c^2; the
//               contiguous split gives rank r (r + 1/2) L^2, the last rank
//               2n-1 times the first's work.
// A rank's rows are therefore at most two runs of consecutive positions,
// the second starting past the first's end, so positions increase with the
// row (the tile bounds of kernels/cuda/Attention.cu rely on it).
#pragma once

#include "kernels/HostDevice.h"

#include <cstdint>
#include <optional>

namespace sharc::kernels {

enum class SequenceSplit { Contiguous, Balanced };

/// Global position of local row i: start + i, or from secondRow on (when
/// secondRow > 0) secondStart + (i - secondRow).
struct RowPositions {
  int64_t start = 0;
  int64_t secondRow = 0; ///< first row of the second run; 0: one run
  int64_t secondStart = 0;

  SHARC_HOST_DEVICE int64_t at(int64_t row) const {
    return secondRow > 0 && row >= secondRow ? secondStart + (row - secondRow)
                                             : start + row;
  }
  /// The first row at or after global position `position` (may be past the
  /// last row).
  SHARC_HOST_DEVICE int64_t firstRowFrom(int64_t position) const {
    if (secondRow > 0 && position >= start + secondRow)
      return secondRow +
             (position > secondStart ? position - secondStart : int64_t{0});
    return position > start ? position - start : int64_t{0};
  }
  SHARC_HOST_DEVICE bool isOneRun() const { return secondRow == 0; }
};

/// The chunk (of 2 * size) that half `half` (0 or 1) of rank `coord`'s rows
/// holds under the balanced split.
inline int64_t balancedChunk(int64_t coord, int64_t size, int64_t half) {
  return half == 0 ? coord : 2 * size - 1 - coord;
}

/// The positions of the `localRows` rows that rank `coord` of `size` holds,
/// shifted by `offset`.
inline RowPositions rowPositions(SequenceSplit split, int64_t coord,
                                 int64_t size, int64_t localRows,
                                 int64_t offset = 0) {
  if (split == SequenceSplit::Contiguous || size <= 1)
    return {offset + coord * localRows, 0, 0};
  int64_t chunk = localRows / 2;
  return {offset + balancedChunk(coord, size, 0) * chunk, chunk,
          offset + balancedChunk(coord, size, 1) * chunk};
}

/// The rank whose K/V block ring attention's step `kvShift` brings to rank
/// `coord` of `size`: coord - kvShift, around the ring under the balanced
/// split; none on the contiguous split's chain before it starts.
inline std::optional<int64_t> ringKeyBlock(SequenceSplit split, int64_t coord,
                                           int64_t size, int64_t kvShift) {
  int64_t block = coord - kvShift;
  if (split == SequenceSplit::Balanced)
    return (block % size + size) % size;
  if (block < 0)
    return std::nullopt;
  return block;
}

} // namespace sharc::kernels
