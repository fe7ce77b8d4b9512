//===- Reshard.cpp - one value from one placement to another --------------===//

#include "passes/Reshard.h"
#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;
using namespace sharc::placement;

namespace {

/// The collectives of one reshard. Blocks of an inner axis lie inside
/// those of an outer one, so a collective moves only the innermost axis of
/// a dimension and a new split goes innermost: the reshard first takes off
/// every split not where the target wants it (innermost first), then adds
/// the target's missing splits outermost first.
class Resharder {
public:
  Resharder(OpBuilder &builder, Location loc, Value value, PlacementAttr target,
            MeshAttr mesh)
      : builder(builder), loc(loc), value(value), target(target), mesh(mesh) {}

  /// Ends `axis`'s sum or replication change when neither side splits.
  LogicalResult changeKind(StringRef axis);
  /// Takes `axis` off the dimension it splits unless it already sits
  /// where the target wants it.
  void release(StringRef axis);
  /// Adds the target's splits of `dim` that `value` lacks.
  LogicalResult addSplits(int64_t dim);
  Value result() const { return value; }

private:
  PlacementAttr current() const { return getPlacement(value.getType()); }
  SmallVector<StringRef> orderOf(PlacementAttr placement, int64_t dim) const {
    return axesSplitting(placement, dim, mesh);
  }
  /// True when the axes outside `axis` on its dimension, and `axis`, are
  /// those of the target in the same order.
  bool settled(StringRef axis) const;
  /// value's type with `axis` set to `code` (a split innermost) and
  /// dimension `dim` scaled.
  RankedTensorType typeWith(StringRef axis, int64_t code, int64_t dim,
                            int64_t multiply, int64_t divide) const;

  OpBuilder &builder;
  Location loc;
  Value value;
  PlacementAttr target;
  MeshAttr mesh;
};

bool Resharder::settled(StringRef axis) const {
  int64_t dim = current().getAxis(axis);
  if (dim < 0 || target.getAxis(axis) != dim)
    return false;
  SmallVector<StringRef> have = orderOf(current(), dim);
  SmallVector<StringRef> want = orderOf(target, dim);
  size_t end = llvm::find(have, axis) - have.begin() + 1;
  return end <= want.size() && llvm::equal(ArrayRef(have).take_front(end),
                                           ArrayRef(want).take_front(end));
}

RankedTensorType Resharder::typeWith(StringRef axis, int64_t code, int64_t dim,
                                     int64_t multiply, int64_t divide) const {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  if (dim >= 0)
    shape[dim] = shape[dim] * multiply / divide;
  PlacementAttr placement = current().withAxis(axis, code);
  if (code >= 0) {
    // withAxis put the axis innermost; state it against the mesh's nesting.
    placement =
        withSplitOrder(placement, code, placement.splitOrder(code), mesh);
  }
  return withPlacement(RankedTensorType::get(shape, type.getElementType()),
                       placement);
}

LogicalResult Resharder::changeKind(StringRef axis) {
  int64_t from = current().getAxis(axis), to = target.getAxis(axis);
  if (from == to || from >= 0 || to >= 0)
    return success(); // a split's change belongs to release or addSplits
  StringAttr axisAttr = builder.getStringAttr(axis);
  if ((from == kP && (to == kI || to == kR)) || (from == kPMax && to == kI)) {
    value = builder.create<AllReduceOp>(
        loc, typeWith(axis, to, -1, 1, 1), value, axisAttr,
        builder.getStringAttr(from == kPMax ? "max" : "sum"));
    return success();
  }
  if (from == kI && to == kR) {
    value = builder.create<ReplicateOp>(loc, typeWith(axis, kR, -1, 1, 1),
                                        value, axisAttr);
    return success();
  }
  return emitError(loc) << "no collective brings a value from " << name(from)
                        << " to " << name(to) << " on " << axis;
}

void Resharder::release(StringRef axis) {
  int64_t from = current().getAxis(axis);
  if (from < 0 || settled(axis))
    return;
  // The axes inside it go first (each unsettled, as this one is).
  while (orderOf(current(), from).back() != axis)
    release(orderOf(current(), from).back());
  int64_t to = target.getAxis(axis), size = mesh.getSize(axis);
  StringAttr axisAttr = builder.getStringAttr(axis);
  if (to >= 0 && to != from) {
    // One exchange when the axis lands in its target place: the splits
    // outside it on `to` are already the target's.
    SmallVector<StringRef> have = orderOf(current(), to);
    SmallVector<StringRef> want = orderOf(target, to);
    size_t at = llvm::find(want, axis) - want.begin();
    if (ArrayRef(want).take_front(at) == ArrayRef(have)) {
      RankedTensorType type = typeWith(axis, to, from, size, 1);
      SmallVector<int64_t> shape(type.getShape());
      shape[to] /= size;
      value = builder.create<AllToAllOp>(
          loc,
          RankedTensorType::get(shape, type.getElementType(),
                                type.getEncoding()),
          value, axisAttr, builder.getI64IntegerAttr(to),
          builder.getI64IntegerAttr(from));
      return;
    }
  }
  // Gathered whole: replicated where the target says so, else invariant
  // and split again by addSplits.
  int64_t whole = to == kR ? kR : kI;
  value = builder.create<AllGatherOp>(loc, typeWith(axis, whole, from, size, 1),
                                      value, axisAttr,
                                      builder.getI64IntegerAttr(from));
}

LogicalResult Resharder::addSplits(int64_t dim) {
  SmallVector<StringRef> want = orderOf(target, dim);
  for (size_t i = orderOf(current(), dim).size(); i < want.size(); ++i) {
    StringRef axis = want[i];
    int64_t from = current().getAxis(axis), size = mesh.getSize(axis);
    StringAttr axisAttr = builder.getStringAttr(axis);
    if (from == kP) {
      value = builder.create<ReduceScatterOp>(
          loc, typeWith(axis, dim, dim, 1, size), value, axisAttr,
          builder.getI64IntegerAttr(dim));
    } else if (from == kI) {
      value = builder.create<SliceToRankOp>(
          loc, typeWith(axis, dim, dim, 1, size), value, axisAttr,
          builder.getI64IntegerAttr(dim));
    } else {
      return emitError(loc)
             << "no collective brings a value from " << name(from) << " to "
             << name(dim) << " on " << axis;
    }
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
  Resharder resharder(builder, loc, value, target, mesh);
  for (StringRef axis : llvm::reverse(axes)) {
    if (failed(resharder.changeKind(axis)))
      return failure();
    resharder.release(axis);
  }
  // Dimensions in the order the mesh's axes first split them.
  SmallVector<int64_t> dims;
  for (StringRef axis : axes)
    if (int64_t dim = target.getAxis(axis);
        dim >= 0 && !llvm::is_contained(dims, dim))
      dims.push_back(dim);
  for (int64_t dim : dims)
    if (failed(resharder.addSplits(dim)))
      return failure();
  if (getPlacement(resharder.result().getType()) != target)
    return emitError(loc) << "no collectives bring a value from "
                          << getPlacement(value.getType()) << " to " << target;
  return resharder.result();
}
