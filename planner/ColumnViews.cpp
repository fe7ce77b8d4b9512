//===- ColumnViews.cpp - last-dimension splits and joins without copies ---===//

#include "planner/ColumnViews.h"
#include "planner/plan/ColumnSlots.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;

namespace sharc {
namespace {

/// Whether bit `slot` of the op's column slots (plan/ColumnSlots.h) is set.
bool takesColumns(Operation *op, unsigned slot, bool result) {
  auto slots = plan::columnSlotsOf(op->getName().stripDialect());
  uint32_t bits = !slots ? 0 : result ? slots->results : slots->operands;
  return slot < 32 && (bits >> slot & 1u);
}

/// Operand slots whose kernels read a column view (a row stride).
bool readsColumns(Operation *user, unsigned operand) {
  return takesColumns(user, operand, /*result=*/false);
}

/// Result slots whose kernels write a column view.
bool writesColumns(OpResult result) {
  return takesColumns(result.getOwner(), result.getResultNumber(),
                      /*result=*/true);
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
