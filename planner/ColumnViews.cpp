//===- ColumnViews.cpp - last-dimension splits and joins without copies ---===//

#include "planner/ColumnViews.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace sharc {
namespace {

/// Operand slots whose kernels read a column view (a row stride).
bool readsColumns(Operation *user, unsigned operand) {
  if (isa<RmsNormRopeOp, RmsNormRopeGradOp>(user))
    return operand == 0; // x
  if (isa<AttentionOp, AttentionGradOp>(user))
    return operand == 2; // v
  return false;
}

/// Result slots whose kernels write a column view.
bool writesColumns(OpResult result) {
  Operation *producer = result.getOwner();
  if (isa<RmsNormRopeGradOp>(producer))
    return result.getResultNumber() == 0; // dx
  if (isa<AttentionGradOp>(producer))
    return result.getResultNumber() == 2; // dv
  return false;
}

bool alongLastDim(Value whole, uint64_t dim) {
  return dim + 1 == static_cast<uint64_t>(
                        cast<RankedTensorType>(whole.getType()).getRank());
}

} // namespace

bool isColumnViewSplit(SplitOp split) {
  if (!alongLastDim(split.getX(), split.getDim()) ||
      !split.getX().getDefiningOp())
    return false;
  for (Value piece : split.getYs())
    for (OpOperand &use : piece.getUses())
      if (!readsColumns(use.getOwner(), use.getOperandNumber()))
        return false;
  return true;
}

bool isColumnViewConcat(ConcatOp concat) {
  if (!alongLastDim(concat.getY(), concat.getDim()))
    return false;
  for (Operation *user : concat.getY().getUsers())
    if (isa<func::ReturnOp>(user))
      return false;
  for (Value piece : concat.getXs()) {
    auto result = dyn_cast<OpResult>(piece);
    if (!result || !writesColumns(result) || !piece.hasOneUse())
      return false;
  }
  return true;
}

} // namespace sharc
