//===- CollectiveLayout.h - where a collective's bytes go -------*- C++ -*-===//
// defines: DimSplit, splitAt, AllToAllLayout, allToAllLayout
//
// The byte layouts the GPU communicators share (NCCL's, and the copies of
// ranks sharing GPUs): a gather or scatter along an inner dimension moves
// strided rows, and an all_to_all moves pieces of strided rows into blocks
// of strided rows. Row-major throughout.
//
//   DimSplit split = splitAt({s, b, h}, /*dim=*/1, /*elementBytes=*/2);
//   auto layout = allToAllLayout({s, b, h}, 2, 0, members, 2, "cp");
//   copy2d(layout->packPiece(send, j, staging + j * layout->pieceBytes));
#pragma once

#include "kernels/Copy.h"
#include "planner/plan/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sharc::exec {

/// A shape seen as [outer, extent, inner] around `dim`, inner in bytes.
struct DimSplit {
  int64_t outer = 1, extent = 1, innerBytes = 1;
};

inline DimSplit splitAt(const std::vector<int64_t> &shape, int64_t dim,
                        int64_t elementBytes) {
  DimSplit split;
  split.innerBytes = elementBytes;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim)
      split.outer *= shape[d];
    else if (d == dim)
      split.extent = shape[d];
    else
      split.innerBytes *= shape[d];
  }
  return split;
}

/// An all_to_all's pieces: piece j of a member's input (along the split
/// dimension) goes to member j, where the piece of member m lands as block
/// m along the concatenated dimension. A piece is strided rows unless the
/// split dimension is the outermost; a block, unless the concatenated one
/// is.
struct AllToAllLayout {
  int64_t members = 1, sendBytes = 0, pieceBytes = 0;
  DimSplit in;    ///< the input around the split dimension
  DimSplit block; ///< a piece around the concatenated dimension

  bool piecesStrided() const { return in.outer > 1; }
  bool blocksStrided() const { return block.outer > 1; }
  /// Piece j of the input at `send`, packed whole at `packed`.
  kernels::Copy2dArgs packPiece(const void *send, int64_t j,
                                void *packed) const {
    int64_t chunkBytes = in.extent / members * in.innerBytes;
    return {.src = static_cast<const std::byte *>(send) + j * chunkBytes,
            .dst = packed,
            .rows = in.outer,
            .rowBytes = chunkBytes,
            .srcPitch = in.extent * in.innerBytes,
            .dstPitch = chunkBytes};
  }
  /// Member m's packed piece at `piece` into its block of the output.
  kernels::Copy2dArgs placeBlock(const void *piece, int64_t m,
                                 void *recv) const {
    int64_t rowBytes = block.extent * block.innerBytes;
    return {.src = piece,
            .dst = static_cast<std::byte *>(recv) + m * rowBytes,
            .rows = block.outer,
            .rowBytes = rowBytes,
            .srcPitch = rowBytes,
            .dstPitch = rowBytes * members};
  }
};

/// The layout, or an error naming `axis` where the dimensions do not exist,
/// are one, or the split dimension does not divide over the members.
inline Result<AllToAllLayout>
allToAllLayout(const std::vector<int64_t> &sendShape, int64_t splitDim,
               int64_t concatDim, int64_t members, int64_t elementBytes,
               const std::string &axis) {
  auto rank = static_cast<int64_t>(sendShape.size());
  if (splitDim < 0 || splitDim >= rank || concatDim < 0 || concatDim >= rank ||
      splitDim == concatDim || sendShape[splitDim] % members != 0)
    return Status::runtimeError(
        "all_to_all over " + axis + ": dims " + std::to_string(splitDim) +
        " and " + std::to_string(concatDim) + " of a rank-" +
        std::to_string(rank) + " input do not split over " +
        std::to_string(members) + " ranks");
  AllToAllLayout layout;
  layout.members = members;
  layout.sendBytes = elementBytes;
  for (int64_t extent : sendShape)
    layout.sendBytes *= extent;
  layout.pieceBytes = layout.sendBytes / members;
  std::vector<int64_t> pieceShape = sendShape;
  pieceShape[splitDim] /= members;
  layout.in = splitAt(sendShape, splitDim, elementBytes);
  layout.block = splitAt(pieceShape, concatDim, elementBytes);
  return layout;
}

} // namespace sharc::exec
