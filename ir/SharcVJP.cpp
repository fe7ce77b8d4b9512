//===- SharcVJP.cpp - reverse-mode derivatives of the sharc ops -----------===//
//
// Each forward op's VJPOpInterface::buildVJP emits its gradient ops. The
// autodiff pass calls only this interface, so a new op brings its own rule.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

using Grads = FailureOr<SmallVector<Value>>;

Grads EmbeddingOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  Value dtable = builder.create<EmbeddingGradOp>(
      getLoc(), cotangentType(getTable().getType()), resultGrads[0], getIds(),
      getVocabStartAttr(), getVocabAxisAttr());
  return SmallVector<Value>{dtable, Value()};
}

Grads RmsNormOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  auto grad =
      builder.create<RmsNormGradOp>(getLoc(), cotangentType(getX().getType()),
                                    cotangentType(getW().getType()), getX(),
                                    getW(), resultGrads[0], getEpsAttr());
  return SmallVector<Value>{grad.getDx(), grad.getDw()};
}

Grads MatmulOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  Value dy = resultGrads[0];
  Value dx = builder.create<MatmulDgradOp>(
      getLoc(), cotangentType(getX().getType()), dy, getW());
  Value dw = builder.create<MatmulWgradOp>(
      getLoc(), cotangentType(getW().getType()), dy, getX());
  return SmallVector<Value>{dx, dw};
}

Grads RopeOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  Value dx = builder.create<RopeGradOp>(
      getLoc(), cotangentType(getX().getType()), resultGrads[0],
      getHeadDimAttr(), getThetaAttr(), getPositionOffsetAttr(),
      getPositionAxisAttr(), getPositionSplitAttr());
  return SmallVector<Value>{dx};
}

Grads AttentionOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  // lse is an auxiliary result kept for the backward; nothing differentiates
  // through it.
  if (resultGrads[1])
    return emitOpError("the lse result is not differentiable");
  auto grad = builder.create<AttentionGradOp>(
      getLoc(), cotangentType(getQ().getType()),
      cotangentType(getK().getType()), cotangentType(getV().getType()), getQ(),
      getK(), getV(), getOut(), getLse(), resultGrads[0], getHeadDimAttr(),
      getPositionAxisAttr(), getPositionSplitAttr());
  return SmallVector<Value>{grad.getDq(), grad.getDk(), grad.getDv()};
}

Grads PermuteBlocksOp::buildVJP(OpBuilder &builder,
                                ArrayRef<Value> resultGrads) {
  // The transpose of a permutation is its inverse.
  ArrayRef<int64_t> order = getOrder();
  SmallVector<int64_t> inverse(order.size());
  for (auto [i, block] : llvm::enumerate(order))
    inverse[block] = static_cast<int64_t>(i);
  Value dx = builder.create<PermuteBlocksOp>(
      getLoc(), resultGrads[0], builder.getDenseI64ArrayAttr(inverse));
  return SmallVector<Value>{dx};
}

Grads SwigluOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  auto grad = builder.create<SwigluGradOp>(
      getLoc(), cotangentType(getGate().getType()),
      cotangentType(getUp().getType()), getGate(), getUp(), resultGrads[0]);
  return SmallVector<Value>{grad.getDgate(), grad.getDup()};
}

Grads AddOp::buildVJP(OpBuilder &builder, ArrayRef<Value> resultGrads) {
  return SmallVector<Value>{resultGrads[0], resultGrads[0]};
}

Grads CrossEntropyOp::buildVJP(OpBuilder &builder,
                               ArrayRef<Value> resultGrads) {
  Value dlogits = builder.create<CrossEntropyGradOp>(
      getLoc(), cotangentType(getLogits().getType()), getLogits(), getLabels(),
      resultGrads[0], getValidVocabAttr());
  return SmallVector<Value>{dlogits, Value()};
}
