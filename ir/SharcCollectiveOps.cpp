//===- SharcCollectiveOps.cpp - collectives and the sharded loss ----------===//
//
// Verifiers check each collective's placement change on its axis (the
// other axis must pass through unchanged); VJPs emit the transposes.
//
//===----------------------------------------------------------------------===//

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

using namespace sharc::placement;

namespace {

/// The mesh axes as "dp, tp", for messages.
std::string meshAxisNames(MeshAttr mesh) {
  std::string names;
  for (StringAttr axis : mesh.getAxes())
    names += (names.empty() ? "" : ", ") + axis.getValue().str();
  return names;
}

/// Checks the placement change `from` -> one of `to` on each axis of
/// `axisList` (one mesh axis, or for a reduction over several at once,
/// "dp,tp": distinct axes in mesh order), every other axis unchanged, and
/// the element type kept.
LogicalResult verifyPlacementChange(Operation *op, StringRef axisList, Value x,
                                    Value y, int64_t from, ArrayRef<int64_t> to,
                                    bool allowSeveral = false) {
  MeshAttr mesh = getMesh(op);
  SmallVector<StringRef> axes = splitAxes(axisList);
  if (axes.size() > 1 && !allowSeveral)
    return op->emitOpError("axis must name one mesh axis, got '")
           << axisList << "'";
  int64_t previous = -1;
  for (StringRef axis : axes) {
    if (!mesh.hasAxis(axis))
      return op->emitOpError("axis '")
             << axis << "' is not an axis of the mesh (" << meshAxisNames(mesh)
             << ")";
    if (mesh.indexOf(axis) <= previous)
      return op->emitOpError("axes '")
             << axisList << "' must be distinct and in the mesh's order";
    previous = mesh.indexOf(axis);
  }
  PlacementAttr in = getPlacement(x.getType());
  PlacementAttr out = getPlacement(y.getType());
  for (PlacementAttr side : {in, out})
    for (StringAttr other : side.getAxes())
      if (!llvm::is_contained(axes, other.getValue()) &&
          in.getAxis(other) != out.getAxis(other))
        return op->emitOpError("must keep the placement on ")
               << other.getValue() << ", got " << name(in.getAxis(other))
               << " -> " << name(out.getAxis(other));
  for (StringRef axis : axes)
    if (in.getAxis(axis) != from ||
        !llvm::is_contained(to, out.getAxis(axis))) {
      std::string expected;
      for (int64_t code : to)
        expected += (expected.empty() ? "" : " or ") + name(code);
      return op->emitOpError("expects ")
             << name(from) << " -> " << expected << " on " << axis << ", got "
             << name(in.getAxis(axis)) << " -> " << name(out.getAxis(axis));
    }
  if (tensorOf(x).getElementType() != tensorOf(y).getElementType())
    return op->emitOpError("must keep the element type");
  return success();
}

/// Checks that `axis` is the innermost of the axes splitting `dim` of the
/// sharded side: blocks of an inner axis are contiguous within the blocks
/// of an outer one, so only the innermost can be gathered or scattered.
LogicalResult verifyInnermost(Operation *op, StringRef axis, Value sharded,
                              int64_t dim) {
  if (axis.contains(','))
    return success(); // verifyPlacementChange refuses several axes here
  SmallVector<StringRef> axes =
      axesSplitting(getPlacement(sharded.getType()), dim, getMesh(op));
  if (!axes.empty() && axes.back() != axis)
    return op->emitOpError("dim ")
           << dim << " is split over " << axis << " and, inside it, over "
           << axes.back() << "; only the innermost axis can move";
  return success();
}

/// Checks that y's shape is x's with dimension `dim` scaled by a whole
/// factor (gather: y larger; scatter or slice: y smaller).
LogicalResult verifySplitShape(Operation *op, Value whole, Value block,
                               int64_t dim) {
  auto wholeShape = tensorOf(whole).getShape();
  auto blockShape = tensorOf(block).getShape();
  if (dim < 0 || dim >= static_cast<int64_t>(wholeShape.size()) ||
      wholeShape.size() != blockShape.size())
    return op->emitOpError("dim ") << dim << " out of range";
  for (size_t d = 0; d < wholeShape.size(); ++d) {
    bool ok = static_cast<int64_t>(d) == dim
                  ? blockShape[d] > 0 && wholeShape[d] % blockShape[d] == 0
                  : wholeShape[d] == blockShape[d];
    if (!ok)
      return op->emitOpError("shapes ")
             << tensorOf(whole) << " and " << tensorOf(block)
             << " differ other than by a whole factor on dim " << dim;
  }
  return success();
}

/// `like`'s shape and element type with placement `code` on `axis`.
RankedTensorType retyped(Type like, StringRef axis, int64_t code,
                         ArrayRef<int64_t> shape) {
  PlacementAttr placement = getPlacement(like).withAxis(axis, code);
  auto tensor = cast<RankedTensorType>(like);
  return withPlacement(RankedTensorType::get(shape, tensor.getElementType()),
                       placement);
}

} // namespace

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() {
  if (getReduce() != "sum" && getReduce() != "max")
    return emitOpError("reduce must be sum or max, got '")
           << getReduce() << "'";
  if (tensorOf(getX()).getShape() != tensorOf(getY()).getShape())
    return emitOpError("must keep the shape");
  int64_t from = getReduce() == "max" ? kPMax : kP;
  return verifyPlacementChange(*this, getAxis(), getX(), getY(), from, {kI, kR},
                               /*allowSeveral=*/true);
}

LogicalResult AllReduceCoalescedOp::verify() {
  if (getXs().size() != getYs().size() || getXs().empty())
    return emitOpError("needs as many results as operands, at least one");
  for (auto [x, y] : llvm::zip(getXs(), getYs())) {
    if (tensorOf(x).getShape() != tensorOf(y).getShape())
      return emitOpError("must keep every shape");
    if (failed(verifyPlacementChange(*this, getAxis(), x, y, kP, {kI, kR},
                                     /*allowSeveral=*/true)))
      return failure();
  }
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifySplitShape(*this, getY(), getX(), getDim())) ||
      failed(verifyInnermost(*this, getAxis(), getX(), getDim())))
    return failure();
  return verifyPlacementChange(*this, getAxis(), getX(), getY(), getDim(),
                               {kI, kR});
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifySplitShape(*this, getX(), getY(), getDim())) ||
      failed(verifyInnermost(*this, getAxis(), getY(), getDim())))
    return failure();
  return verifyPlacementChange(*this, getAxis(), getX(), getY(), kP,
                               {static_cast<int64_t>(getDim())});
}

LogicalResult SliceToRankOp::verify() {
  if (failed(verifySplitShape(*this, getX(), getY(), getDim())) ||
      failed(verifyInnermost(*this, getAxis(), getY(), getDim())))
    return failure();
  // An R value's block is as well defined as an I value's (the same bytes
  // on every rank): the optimizer shard of a replicated parameter
  // (sharc-shard-optimizer), taken after autodiff.
  int64_t from =
      getPlacement(getX().getType()).getAxis(getAxis()) == kR ? kR : kI;
  return verifyPlacementChange(*this, getAxis(), getX(), getY(), from,
                               {static_cast<int64_t>(getDim())});
}

LogicalResult AllToAllOp::verify() {
  auto in = tensorOf(getX()).getShape(), out = tensorOf(getY()).getShape();
  int64_t split = getSplitDim(), concat = getConcatDim();
  int64_t rank = static_cast<int64_t>(in.size());
  if (split < 0 || split >= rank || concat < 0 || concat >= rank ||
      split == concat)
    return emitOpError("split_dim ")
           << split << " and concat_dim " << concat
           << " must be two dimensions of a rank-" << rank << " tensor";
  int64_t size = getMesh(*this).getSize(getAxis());
  SmallVector<int64_t> expected(in);
  expected[concat] *= size;
  if (expected[split] % size != 0 || out.size() != in.size())
    return emitOpError("dim ")
           << split << " of extent " << in[split] << " does not split over "
           << getAxis() << " (" << size << ")";
  expected[split] /= size;
  if (out != ArrayRef<int64_t>(expected))
    return emitOpError("result shape must be the input's with dim ")
           << concat << " times and dim " << split << " divided by "
           << getAxis() << " (" << size << "), got " << getY().getType();
  if (failed(verifyInnermost(*this, getAxis(), getX(), concat)) ||
      failed(verifyInnermost(*this, getAxis(), getY(), split)))
    return failure();
  return verifyPlacementChange(*this, getAxis(), getX(), getY(), concat,
                               {split});
}

LogicalResult ReplicateOp::verify() {
  if (tensorOf(getX()).getShape() != tensorOf(getY()).getShape())
    return emitOpError("must keep the shape");
  return verifyPlacementChange(*this, getAxis(), getX(), getY(), kI, {kR});
}

/// A pipeline stage of `axis`: in [0, size) and, for a transfer, two.
static LogicalResult verifyStage(Operation *op, StringRef axis, int64_t stage,
                                 StringRef what) {
  int64_t size = getMesh(op).getSize(axis);
  if (stage < 0 || stage >= size)
    return op->emitOpError(what) << " " << stage << " is not a stage of "
                                 << axis << " (" << size << ")";
  return success();
}

LogicalResult TransferOp::verify() {
  if (getX().getType() != getY().getType())
    return emitOpError("must keep the type, got ")
           << getX().getType() << " and " << getY().getType();
  if (getFrom() == getTo())
    return emitOpError("from and to must differ, both are ") << getFrom();
  if (failed(verifyStage(*this, getAxis(), getFrom(), "from")))
    return failure();
  return verifyStage(*this, getAxis(), getTo(), "to");
}

LogicalResult SendOp::verify() {
  return verifyStage(*this, getAxis(), getPeer(), "peer");
}

LogicalResult RecvOp::verify() {
  return verifyStage(*this, getAxis(), getPeer(), "peer");
}

LogicalResult ScaleOp::verify() { return success(); }

LogicalResult VocabMaxOp::verify() { return success(); }
LogicalResult TargetLogitOp::verify() { return success(); }
LogicalResult SumExpOp::verify() { return success(); }
LogicalResult VocabParallelLossOp::verify() { return success(); }
LogicalResult ValidCountOp::verify() { return success(); }
LogicalResult CountScaleOp::verify() { return success(); }
LogicalResult VocabParallelLossGradOp::verify() {
  if (tensorOf(getLogits()).getShape() != tensorOf(getDlogits()).getShape())
    return emitOpError("dlogits must have the logits' shape");
  return success();
}

/// A coalesced bucket along dim 0: as many results as operands, each pair
/// as the single op's (`scatter`: P to S(0); else S(0) to R or I).
template <typename CoalescedOp>
LogicalResult verifyCoalescedAlongDim0(CoalescedOp op, bool scatter) {
  if (op.getXs().size() != op.getYs().size() || op.getXs().empty())
    return op.emitOpError("needs as many results as operands, at least one");
  for (auto [x, y] : llvm::zip(op.getXs(), op.getYs())) {
    Value whole = scatter ? x : y, block = scatter ? y : x;
    if (failed(verifySplitShape(op, whole, block, 0)) ||
        failed(verifyInnermost(op, op.getAxis(), block, 0)))
      return failure();
    LogicalResult changed =
        scatter ? verifyPlacementChange(op, op.getAxis(), x, y, kP, {0})
                : verifyPlacementChange(op, op.getAxis(), x, y, 0, {kI, kR});
    if (failed(changed))
      return failure();
  }
  return success();
}

LogicalResult ReduceScatterCoalescedOp::verify() {
  return verifyCoalescedAlongDim0(*this, /*scatter=*/true);
}

LogicalResult AllGatherCoalescedOp::verify() {
  return verifyCoalescedAlongDim0(*this, /*scatter=*/false);
}

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

int64_t AllReduceOp::getFlops() { return 0; }
int64_t AllGatherOp::getFlops() { return 0; }
int64_t ReduceScatterOp::getFlops() { return 0; }
int64_t AllToAllOp::getFlops() { return 0; }
int64_t SliceToRankOp::getFlops() { return 0; }
int64_t ReplicateOp::getFlops() { return 0; }
int64_t TransferOp::getFlops() { return 0; }

int64_t AllReduceOp::getNumBytesSent(int64_t n) {
  return 2 * (n - 1) * tensorBytes(getX()) / n;
}
int64_t AllGatherOp::getNumBytesSent(int64_t n) {
  return (n - 1) * tensorBytes(getX());
}
int64_t ReduceScatterOp::getNumBytesSent(int64_t n) {
  return (n - 1) * tensorBytes(getY());
}
int64_t AllToAllOp::getNumBytesSent(int64_t n) {
  return (n - 1) * tensorBytes(getX()) / n; // keeps one of its n pieces
}
int64_t SliceToRankOp::getNumBytesSent(int64_t) { return 0; }
int64_t ReplicateOp::getNumBytesSent(int64_t) { return 0; }
int64_t TransferOp::getNumBytesSent(int64_t) { return tensorBytes(getX()); }

//===----------------------------------------------------------------------===//
// VJPs: each collective's transpose
//===----------------------------------------------------------------------===//

using Grads = FailureOr<SmallVector<Value>>;

Grads AllReduceOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  if (getReduce() != "sum")
    return emitOpError("an all_reduce max is not differentiable");
  // d(sum_r x_r)/d x_r = 1: every rank's summand gets the whole cotangent,
  // which is invariant (an I result's cotangent is I already).
  Value dy = resultGrads[0];
  for (StringRef axis : splitAxes(getAxis()))
    if (getPlacement(dy.getType()).getAxis(axis) != kI)
      return emitOpError("expects an invariant cotangent on ") << axis;
  return SmallVector<Value>{dy};
}

Grads AllGatherOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  Value dy = resultGrads[0];
  int64_t code = getPlacement(getY().getType()).getAxis(getAxis());
  Type dxType =
      retyped(dy.getType(), getAxis(), getDim(), tensorOf(getX()).getShape());
  if (code == kR) // per-rank uses: partial cotangents, summed per block
    return SmallVector<Value>{builder.create<ReduceScatterOp>(
        getLoc(), dxType, dy, getAxisAttr(), getDimAttr())};
  // Identical uses: each rank keeps its block of the identical cotangent.
  return SmallVector<Value>{builder.create<SliceToRankOp>(
      getLoc(), dxType, dy, getAxisAttr(), getDimAttr())};
}

Grads ReduceScatterOp::buildVJP(OpBuilder &builder,
                                ArrayRef<Value> resultGrads) {
  Value dy = resultGrads[0];
  Type dxType =
      retyped(dy.getType(), getAxis(), kI, tensorOf(getX()).getShape());
  return SmallVector<Value>{builder.create<AllGatherOp>(
      getLoc(), dxType, dy, getAxisAttr(), getDimAttr())};
}

Grads AllToAllOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  // A permutation of blocks: its transpose sends every block back.
  Value dy = resultGrads[0];
  Type dxType = retyped(dy.getType(), getAxis(), getConcatDim(),
                        tensorOf(getX()).getShape());
  return SmallVector<Value>{
      builder.create<AllToAllOp>(getLoc(), dxType, dy, getAxisAttr(),
                                 getConcatDimAttr(), getSplitDimAttr())};
}

Grads SliceToRankOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  // An R operand's cotangent would be partial sums, which all_gather does
  // not make; only sharc-shard-optimizer slices R values, after autodiff.
  if (getPlacement(getX().getType()).getAxis(getAxis()) == kR)
    return emitOpError("has no transpose for an R operand on ") << getAxis();
  Value dy = resultGrads[0];
  Type dxType =
      retyped(dy.getType(), getAxis(), kI, tensorOf(getX()).getShape());
  return SmallVector<Value>{builder.create<AllGatherOp>(
      getLoc(), dxType, dy, getAxisAttr(), getDimAttr())};
}

Grads ReplicateOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  Value dy = resultGrads[0]; // partial: each rank's use contributed a part
  Type dxType =
      retyped(dy.getType(), getAxis(), kI, tensorOf(getX()).getShape());
  return SmallVector<Value>{builder.create<AllReduceOp>(
      getLoc(), dxType, dy, getAxisAttr(), builder.getStringAttr("sum"))};
}

Grads TransferOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  // The cotangent is computed where the value was used and goes back.
  auto back = builder.create<TransferOp>(getLoc(), resultGrads[0].getType(),
                                         resultGrads[0], getAxisAttr(),
                                         getToAttr(), getFromAttr());
  if (Attribute chunk = (*this)->getAttr(kToChunkAttr))
    back->setAttr(kFromChunkAttr, chunk);
  if (Attribute chunk = (*this)->getAttr(kFromChunkAttr))
    back->setAttr(kToChunkAttr, chunk);
  return SmallVector<Value>{back};
}

Grads ScaleOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  return SmallVector<Value>{builder.create<ScaleOp>(
      getLoc(), resultGrads[0].getType(), resultGrads[0], getFactorAttr())};
}

/// The labels and the count take no gradient: they come from integers.
Grads CountScaleOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  Value dx = builder.create<CountScaleOp>(getLoc(), resultGrads[0].getType(),
                                          resultGrads[0], getLabels(),
                                          getTotal(), getValidVocabAttr());
  return SmallVector<Value>{dx, Value(), Value()};
}

Grads VocabParallelLossOp::buildVJP(OpBuilder &builder,
                                    ArrayRef<Value> resultGrads) {
  Value dlogits = builder.create<VocabParallelLossGradOp>(
      getLoc(), cotangentType(getLogits().getType()), getLogits(), getLabels(),
      getMax(), getSumExp(), resultGrads[0], getValidVocabAttr(),
      getVocabAxisAttr());
  return SmallVector<Value>{dlogits, Value(), Value(), Value(), Value()};
}
