//===- SharcRingOps.cpp - ring attention: verifiers, VJPs, the ring -------===//
//
// The ops of SharcRingOps.td and buildRingAttention, which the attention
// op's buildSharded calls under `--cp-comm ring`. Each op has its own VJP,
// so the backward is what autodiff derives: the transposed shifts carry
// dK and dV back along the chain to the rank that owns the block.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

namespace {

/// [B, H, S] for an [S, B, H * D] output with H heads.
SmallVector<int64_t> lseShapeOf(Value out, int64_t numHeads) {
  auto shape = tensorOf(out).getShape();
  return {shape[1], numHeads, shape[0]};
}

/// `grad`, or zeros of `primal`'s cotangent type where no gradient flows
/// (a merged lse nothing reads): the gradient ops always take both.
Value orZeros(OpBuilder &builder, Location loc, Value grad, Value primal) {
  if (grad)
    return grad;
  return builder.create<FillOp>(loc, cotangentType(primal.getType()),
                                builder.getF64FloatAttr(0.0));
}

/// q, k, v of an attention block (or its gradient): rank 3, whole heads,
/// one batch, k and v alike, a KV head per group of query heads; the split
/// absent (contiguous) or balanced, whose two chunks need even blocks.
LogicalResult verifyBlock(Operation *op, Value q, Value k, Value v, Value lse,
                          int64_t headDim, StringRef axis, StringAttr split) {
  if (headDim <= 0)
    return op->emitOpError("head_dim must be positive, got ") << headDim;
  for (auto [value, name] : {std::pair{q, "q"}, std::pair{k, "k"}})
    if (tensorOf(value).getRank() != 3 ||
        tensorOf(value).getShape()[2] % headDim != 0)
      return op->emitOpError() << name << " must be [S, B, heads * " << headDim
                               << "], got " << value.getType();
  if (k.getType() != v.getType())
    return op->emitOpError("v type ")
           << v.getType() << " must equal k type " << k.getType();
  if (tensorOf(q).getShape()[1] != tensorOf(k).getShape()[1])
    return op->emitOpError("q and k must share B, got ")
           << q.getType() << " and " << k.getType();
  int64_t numHeads = tensorOf(q).getShape()[2] / headDim;
  int64_t numKvHeads = tensorOf(k).getShape()[2] / headDim;
  if (numKvHeads == 0 || numHeads % numKvHeads != 0)
    return op->emitOpError("query heads (")
           << numHeads << ") must be a multiple of KV heads (" << numKvHeads
           << ")";
  if (tensorOf(lse).getShape() != ArrayRef<int64_t>(lseShapeOf(q, numHeads)))
    return op->emitOpError("lse must be [B, Hq, S] for q ")
           << q.getType() << ", got " << lse.getType();
  if (!getMesh(op).hasAxis(axis))
    return op->emitOpError("position_axis '")
           << axis << "' is not an axis of the mesh";
  if (!split)
    return success();
  if (split.getValue() != "balanced")
    return op->emitOpError("position_split must be \"balanced\", got \"")
           << split.getValue() << "\"";
  for (Value value : {q, k})
    if (tensorOf(value).getShape()[0] % 2 != 0)
      return op->emitOpError("the balanced split needs blocks of two chunks, "
                             "got ")
             << value.getType();
  return success();
}

/// An [S, B, H * D] output and its [B, H, S] lse.
LogicalResult verifyPartial(Operation *op, Value out, Value lse) {
  auto o = tensorOf(out), l = tensorOf(lse);
  if (o.getRank() != 3 || l.getRank() != 3 || l.getShape()[1] <= 0 ||
      o.getShape()[2] % l.getShape()[1] != 0 ||
      l.getShape() != ArrayRef<int64_t>(lseShapeOf(out, l.getShape()[1])))
    return op->emitOpError("expects out [S, B, H * D] and lse [B, H, S], got ")
           << out.getType() << " and " << lse.getType();
  return success();
}

/// As AttentionOp::getFlops: QK^T and PV, halved by the mask on average.
int64_t blockFlops(Value q, Value k, int64_t products) {
  auto shape = tensorOf(q).getShape();
  return products * shape[0] * tensorOf(k).getShape()[0] * shape[1] * shape[2];
}

} // namespace

//===----------------------------------------------------------------------===//
// ring_shift
//===----------------------------------------------------------------------===//

LogicalResult RingShiftOp::verify() {
  if (getX().getType() != getY().getType())
    return emitOpError("must keep the type, got ")
           << getX().getType() << " and " << getY().getType();
  MeshAttr mesh = getMesh(*this);
  if (!mesh.hasAxis(getAxis()))
    return emitOpError("axis '") << getAxis() << "' is not an axis of the mesh";
  // I64Attr's getters are unsigned; the values are signed.
  auto offset = static_cast<int64_t>(getOffset());
  auto first = static_cast<int64_t>(getFirst());
  if (offset != 1 && offset != -1)
    return emitOpError("offset must be 1 or -1, got ") << offset;
  int64_t size = mesh.getSize(getAxis());
  if (first < 0 || first >= size)
    return emitOpError("first ")
           << first << " is not a rank of " << getAxis() << " (" << size << ")";
  if (getWrap() && first != 0)
    return emitOpError("wrap takes the whole ring, so first must be 0, got ")
           << first;
  return success();
}

int64_t RingShiftOp::getFlops() { return 0; }
int64_t RingShiftOp::getNumBytesSent(int64_t) { return tensorBytes(getX()); }

FailureOr<SmallVector<Value>>
RingShiftOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  // y[r] = x[r - offset] on the chain: x[r]'s cotangent is y[r + offset]'s.
  Value dy = resultGrads[0];
  Value dx = builder.create<RingShiftOp>(
      getLoc(), dy.getType(), dy, getAxisAttr(),
      builder.getI64IntegerAttr(-static_cast<int64_t>(getOffset())),
      getFirstAttr(), getWrapAttr());
  return SmallVector<Value>{dx};
}

//===----------------------------------------------------------------------===//
// attention_block
//===----------------------------------------------------------------------===//

LogicalResult AttentionBlockOp::verify() {
  if (failed(verifyBlock(*this, getQ(), getK(), getV(), getLse(), getHeadDim(),
                         getPositionAxis(), getPositionSplitAttr())))
    return failure();
  if (auto shift = static_cast<int64_t>(getKvShift()); shift < 0)
    return emitOpError("kv_shift must be non-negative, got ") << shift;
  return success();
}

LogicalResult AttentionBlockOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &types) {
  return attentionResultTypes(context, location, adaptor.getQ().getType(),
                              static_cast<int64_t>(adaptor.getHeadDim()),
                              types);
}

int64_t AttentionBlockOp::getFlops() { return blockFlops(getQ(), getK(), 2); }

FailureOr<SmallVector<Value>>
AttentionBlockOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  Location loc = getLoc();
  Value dout = orZeros(builder, loc, resultGrads[0], getOut());
  Value dlse = orZeros(builder, loc, resultGrads[1], getLse());
  auto grad = builder.create<AttentionBlockGradOp>(
      loc, cotangentType(getQ().getType()), cotangentType(getK().getType()),
      cotangentType(getV().getType()), getQ(), getK(), getV(), getOut(),
      getLse(), dout, dlse, getHeadDimAttr(), getPositionAxisAttr(),
      getKvShiftAttr(), getPositionSplitAttr());
  return SmallVector<Value>{grad.getDq(), grad.getDk(), grad.getDv()};
}

LogicalResult AttentionBlockGradOp::verify() {
  if (failed(verifyBlock(*this, getQ(), getK(), getV(), getLse(), getHeadDim(),
                         getPositionAxis(), getPositionSplitAttr())))
    return failure();
  for (auto [primal, grad, name] :
       {std::tuple{getQ(), getDq(), "dq"}, std::tuple{getK(), getDk(), "dk"},
        std::tuple{getV(), getDv(), "dv"}, std::tuple{getQ(), getOut(), "out"},
        std::tuple{getQ(), getDout(), "dout"},
        std::tuple{getLse(), getDlse() ? getDlse() : getLse(), "dlse"}})
    if (tensorOf(primal).getShape() != tensorOf(grad).getShape())
      return emitOpError() << name << " type " << grad.getType()
                           << " must have the shape of " << primal.getType();
  return success();
}

int64_t AttentionBlockGradOp::getFlops() {
  return blockFlops(getQ(), getK(), 5);
}

//===----------------------------------------------------------------------===//
// lse_merge
//===----------------------------------------------------------------------===//

LogicalResult LseMergeOp::verify() {
  return verifyPartial(*this, getOut(), getLse());
}

FailureOr<SmallVector<Value>>
LseMergeOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  Location loc = getLoc();
  Value dout = orZeros(builder, loc, resultGrads[0], getOut());
  Value dlse = orZeros(builder, loc, resultGrads[1], getLse());
  SmallVector<Value> grads;
  for (auto [part, lsePart] :
       {std::pair{getOutA(), getLseA()}, std::pair{getOutB(), getLseB()}}) {
    auto grad = builder.create<LseMergeGradOp>(
        loc, cotangentType(part.getType()), cotangentType(lsePart.getType()),
        part, lsePart, getOut(), getLse(), dout, dlse);
    grads.push_back(grad.getDpart());
    grads.push_back(grad.getDlsePart());
  }
  return grads;
}

LogicalResult LseMergeGradOp::verify() {
  if (failed(verifyPartial(*this, getOut(), getLse())))
    return failure();
  for (auto [primal, other, name] :
       {std::tuple{getOut(), getPart(), "part"},
        std::tuple{getOut(), getDout(), "dout"},
        std::tuple{getOut(), getDpart(), "dpart"},
        std::tuple{getLse(), getLsePart(), "lse_part"},
        std::tuple{getLse(), getDlse(), "dlse"},
        std::tuple{getLse(), getDlsePart(), "dlse_part"}})
    if (tensorOf(primal).getShape() != tensorOf(other).getShape())
      return emitOpError() << name << " type " << other.getType()
                           << " must have the shape of " << primal.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// The ring
//===----------------------------------------------------------------------===//

SmallVector<Value> sharc::buildRingAttention(OpBuilder &builder, Location loc,
                                             Value q, Value k, Value v,
                                             int64_t headDim, StringAttr axis,
                                             int64_t numBlocks, bool balanced) {
  IntegerAttr headDimAttr = builder.getI64IntegerAttr(headDim);
  StringAttr split = balanced ? builder.getStringAttr("balanced") : nullptr;
  UnitAttr wrap = balanced ? builder.getUnitAttr() : nullptr;
  auto block = builder.create<AttentionBlockOp>(
      loc, q, k, v, headDimAttr, axis, builder.getI64IntegerAttr(0), split);
  Value out = block.getOut(), lse = block.getLse();
  // Step s brings block coord - s; the K/V shift for step s + 1 depends
  // only on step s's blocks, so the planner can run it on the
  // communication stream beside step s's attention.
  for (int64_t step = 1; step < numBlocks; ++step) {
    // Contiguous: ranks below step - 1 hold no block any later rank needs.
    // Balanced: every block is needed by every rank (each late chunk sees
    // all earlier chunks), so the whole ring, wrap-around link included.
    IntegerAttr first = builder.getI64IntegerAttr(balanced ? 0 : step - 1);
    IntegerAttr next = builder.getI64IntegerAttr(1);
    k = builder.create<RingShiftOp>(loc, k.getType(), k, axis, next, first,
                                    wrap);
    v = builder.create<RingShiftOp>(loc, v.getType(), v, axis, next, first,
                                    wrap);
    block = builder.create<AttentionBlockOp>(loc, q, k, v, headDimAttr, axis,
                                             builder.getI64IntegerAttr(step),
                                             split);
    auto merged =
        builder.create<LseMergeOp>(loc, out.getType(), lse.getType(), out, lse,
                                   block.getOut(), block.getLse());
    out = merged.getOut();
    lse = merged.getLse();
  }
  return {out, lse};
}
