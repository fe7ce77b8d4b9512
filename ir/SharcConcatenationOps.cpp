//===- SharcConcatenationOps.cpp - concat and split: their one rule -------===//
//
// sharc.concat and sharc.split (the fused projections' weights, outputs and
// gradients; a microbatch's ids) share one verifier: the pieces, joined
// along `dim`, are the whole. Apart from SharcOps.cpp, which holds the
// other ops' verifiers.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

namespace {

/// Checks that `pieces` concatenated along `dim` give `whole`: one rank,
/// element type and placement, equal extents but along `dim`, and there the
/// sum.
LogicalResult verifyConcatenation(Operation *op, ValueRange pieces, Value whole,
                                  int64_t dim) {
  auto wholeType = tensorOf(whole);
  if (pieces.empty())
    return op->emitOpError("expects at least one piece");
  if (dim < 0 || dim >= wholeType.getRank())
    return op->emitOpError("dim ")
           << dim << " out of range for rank " << wholeType.getRank();
  int64_t extent = 0;
  for (auto [index, piece] : llvm::enumerate(pieces)) {
    auto type = tensorOf(piece);
    SmallVector<int64_t> expected(type.getShape());
    bool sameRank = type.getRank() == wholeType.getRank();
    if (sameRank)
      expected[dim] = wholeType.getShape()[dim];
    if (!sameRank || ArrayRef<int64_t>(expected) != wholeType.getShape() ||
        type.getElementType() != wholeType.getElementType() ||
        type.getEncoding() != wholeType.getEncoding())
      return op->emitOpError("piece ")
             << index << " type " << type << " must match " << wholeType
             << " but in dim " << dim;
    extent += type.getShape()[dim];
  }
  if (extent != wholeType.getShape()[dim])
    return op->emitOpError("pieces sum to ")
           << extent << " along dim " << dim << ", the whole has "
           << wholeType.getShape()[dim];
  return success();
}

} // namespace

LogicalResult ConcatOp::verify() {
  return verifyConcatenation(*this, getXs(), getY(), getDim());
}

LogicalResult SplitOp::verify() {
  return verifyConcatenation(*this, getYs(), getX(), getDim());
}
