//===- Reshard.cpp - one value from one placement to another --------------===//

#include "passes/Reshard.h"
#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;
using namespace sharc::placement;

namespace {

/// The collectives of one reshard, applied one axis at a time.
class Resharder {
public:
  Resharder(OpBuilder &builder, Location loc, Value value, MeshAttr mesh)
      : builder(builder), loc(loc), value(value), mesh(mesh) {}

  /// Moves `axis` from its current code to `to` if one collective can.
  /// `splitting` selects the phase: false for changes that end a split or
  /// a sum, true for those that start a split.
  LogicalResult step(StringRef axis, int64_t to, bool splitting);
  Value result() const { return value; }

private:
  /// value's type with `axis` set to `code` and dimension `dim` scaled.
  RankedTensorType typeWith(StringRef axis, int64_t code, int64_t dim,
                            int64_t multiply, int64_t divide) {
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> shape(type.getShape());
    if (dim >= 0)
      shape[dim] = shape[dim] * multiply / divide;
    return withPlacement(RankedTensorType::get(shape, type.getElementType()),
                         getPlacement(type).withAxis(axis, code));
  }

  /// Gathers (to I) the axes inside `axis` that split `dim`, innermost
  /// first, so that `axis` becomes the innermost; the later steps of the
  /// reshard slice them again where the target splits them.
  void uncoverInnermost(StringRef axis, int64_t dim);

  OpBuilder &builder;
  Location loc;
  Value value;
  MeshAttr mesh;
};

void Resharder::uncoverInnermost(StringRef axis, int64_t dim) {
  SmallVector<StringRef> inner;
  for (StringAttr other : mesh.getAxes())
    if (mesh.indexOf(other.getValue()) > mesh.indexOf(axis) &&
        getPlacement(value.getType()).getAxis(other.getValue()) == dim)
      inner.push_back(other.getValue());
  for (StringRef other : llvm::reverse(inner))
    value = builder.create<AllGatherOp>(
        loc, typeWith(other, kI, dim, mesh.getSize(other), 1), value,
        builder.getStringAttr(other), builder.getI64IntegerAttr(dim));
}

LogicalResult Resharder::step(StringRef axis, int64_t to, bool splitting) {
  int64_t from = getPlacement(value.getType()).getAxis(axis);
  int64_t size = mesh.getSize(axis);
  StringAttr axisAttr = builder.getStringAttr(axis);
  if (from == to)
    return success();
  bool startsSplit = to >= 0 && (from == kI || from == kP);
  if (startsSplit != splitting)
    return success(); // the other phase's change
  // Blocks of an inner axis lie inside those of an outer one: to move the
  // outer axis's split, the inner ones must not split that dimension.
  if (from >= 0)
    uncoverInnermost(axis, from);
  if (to >= 0)
    uncoverInnermost(axis, to);
  if (from >= 0 && (to == kR || to == kI)) {
    value = builder.create<AllGatherOp>(loc, typeWith(axis, to, from, size, 1),
                                        value, axisAttr,
                                        builder.getI64IntegerAttr(from));
  } else if ((from == kP && (to == kI || to == kR)) ||
             (from == kPMax && to == kI)) {
    value = builder.create<AllReduceOp>(
        loc, typeWith(axis, to, -1, 1, 1), value, axisAttr,
        builder.getStringAttr(from == kPMax ? "max" : "sum"));
  } else if (from == kI && to == kR) {
    value = builder.create<ReplicateOp>(loc, typeWith(axis, kR, -1, 1, 1),
                                        value, axisAttr);
  } else if (from == kP && to >= 0) {
    value = builder.create<ReduceScatterOp>(
        loc, typeWith(axis, to, to, 1, size), value, axisAttr,
        builder.getI64IntegerAttr(to));
  } else if (from >= 0 && to >= 0) {
    // One exchange moves the split from dimension `from` to `to`.
    RankedTensorType type = typeWith(axis, to, from, size, 1);
    SmallVector<int64_t> shape(type.getShape());
    shape[to] /= size;
    value = builder.create<AllToAllOp>(
        loc,
        RankedTensorType::get(shape, type.getElementType(), type.getEncoding()),
        value, axisAttr, builder.getI64IntegerAttr(to),
        builder.getI64IntegerAttr(from));
  } else if (from == kI && to >= 0) {
    value = builder.create<SliceToRankOp>(loc, typeWith(axis, to, to, 1, size),
                                          value, axisAttr,
                                          builder.getI64IntegerAttr(to));
  } else {
    return emitError(loc) << "no collective brings a value from " << name(from)
                          << " to " << name(to) << " on " << axis;
  }
  return success();
}

} // namespace

FailureOr<Value> sharc::reshard(OpBuilder &builder, Location loc, Value value,
                                PlacementAttr target, MeshAttr mesh) {
  if (getPlacement(value.getType()) == target)
    return value;
  SmallVector<StringRef> axes;
  for (StringAttr axis : mesh.getAxes())
    axes.push_back(axis.getValue());
  for (PlacementAttr side : {getPlacement(value.getType()), target})
    for (StringAttr axis : side.getAxes())
      if (!mesh.hasAxis(axis.getValue()))
        return emitError(loc) << "placement names axis '" << axis.getValue()
                              << "', which the mesh lacks";
  // Sums over several axes at once are one all_reduce over all of them
  // (a group spanning their product), not one per axis.
  PlacementAttr current = getPlacement(value.getType());
  for (int64_t kind : {kP, kPMax}) {
    SmallVector<StringRef> summed;
    PlacementAttr reduced = current;
    for (StringRef axis : axes) {
      int64_t to = target.getAxis(axis);
      if (current.getAxis(axis) == kind &&
          (to == kI || (to == kR && kind == kP))) {
        summed.push_back(axis);
        reduced = reduced.withAxis(axis, to);
      }
    }
    if (summed.size() < 2)
      continue;
    value = builder.create<AllReduceOp>(
        loc, withPlacement(value.getType(), reduced), value,
        builder.getStringAttr(joinAxes(summed)),
        builder.getStringAttr(kind == kPMax ? "max" : "sum"));
    current = reduced;
  }
  Resharder resharder(builder, loc, value, mesh);
  for (StringRef axis : llvm::reverse(axes))
    if (failed(resharder.step(axis, target.getAxis(axis), false)))
      return failure();
  for (StringRef axis : axes)
    if (failed(resharder.step(axis, target.getAxis(axis), true)))
      return failure();
  if (getPlacement(resharder.result().getType()) != target)
    return emitError(loc) << "no collectives bring a value from "
                          << getPlacement(value.getType()) << " to " << target;
  return resharder.result();
}
