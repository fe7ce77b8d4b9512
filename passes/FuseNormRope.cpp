//===- FuseNormRope.cpp - per-head norms and rope in one pass -------------===//
//
// q_norm and k_norm normalise each head, and rope rotates the result right
// after: two passes over q and k that each read and write the whole
// tensor, forward and backward. Fused, the normalised value never goes to
// memory and the backward's rotated gradient neither.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace sharc {
#define GEN_PASS_DEF_FUSENORMROPE
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// Whether `w` is one head's weights for a rope of `headDim`.
bool perHead(Value w, int64_t headDim) {
  auto type = cast<RankedTensorType>(w.getType());
  return type.getRank() == 1 && type.getShape()[0] == headDim;
}

/// rope's attributes onto `fused` (the position attributes a layout adds
/// come along with head_dim and theta), then the norm's eps.
void copyRopeAttrs(Operation *rope, Operation *fused, FloatAttr eps) {
  for (NamedAttribute attr : rope->getAttrs())
    fused->setAttr(attr.getName(), attr.getValue());
  fused->setAttr("eps", eps);
}

/// rope(rms_norm(x, w)) -> rms_norm_rope(x, w), where the norm's result
/// feeds the rope alone. The fused op takes the norm's place, where x and
/// w are what the norm read.
bool fuseForward(RopeOp rope) {
  auto norm = rope.getX().getDefiningOp<RmsNormOp>();
  if (!norm || !rope.getX().hasOneUse() ||
      !perHead(norm.getW(), rope.getHeadDim()))
    return false;
  OpBuilder builder(norm);
  auto fused = builder.create<RmsNormRopeOp>(
      FusedLoc::get(rope.getContext(), {norm.getLoc(), rope.getLoc()}),
      rope.getType(), norm.getX(), norm.getW(), norm.getEpsAttr(),
      rope.getHeadDimAttr(), rope.getThetaAttr(), rope.getPositionOffsetAttr());
  copyRopeAttrs(rope, fused, norm.getEpsAttr());
  rope.getY().replaceAllUsesWith(fused.getY());
  rope.erase();
  norm.erase();
  return true;
}

/// rms_norm_grad(x, w, rope_grad(dy)) -> rms_norm_rope_grad(x, w, dy),
/// where the rotated gradient feeds the norm's backward alone. The fused op
/// takes the norm's backward's place (dy is there before it).
bool fuseBackward(RmsNormGradOp normGrad) {
  auto ropeGrad = normGrad.getDy().getDefiningOp<RopeGradOp>();
  if (!ropeGrad || !normGrad.getDy().hasOneUse() ||
      !perHead(normGrad.getW(), ropeGrad.getHeadDim()))
    return false;
  OpBuilder builder(normGrad);
  auto fused = builder.create<RmsNormRopeGradOp>(
      FusedLoc::get(normGrad.getContext(),
                    {normGrad.getLoc(), ropeGrad.getLoc()}),
      normGrad.getDx().getType(), normGrad.getDw().getType(), normGrad.getX(),
      normGrad.getW(), ropeGrad.getDy(), normGrad.getEpsAttr(),
      ropeGrad.getHeadDimAttr(), ropeGrad.getThetaAttr(),
      ropeGrad.getPositionOffsetAttr());
  copyRopeAttrs(ropeGrad, fused, normGrad.getEpsAttr());
  normGrad.getDx().replaceAllUsesWith(fused.getDx());
  normGrad.getDw().replaceAllUsesWith(fused.getDw());
  normGrad.erase();
  ropeGrad.erase();
  return true;
}

struct FuseNormRopePass : sharc::impl::FuseNormRopeBase<FuseNormRopePass> {
  void runOnOperation() override {
    SmallVector<RopeOp> ropes;
    SmallVector<RmsNormGradOp> normGrads;
    getOperation().walk([&](Operation *op) {
      if (auto rope = dyn_cast<RopeOp>(op))
        ropes.push_back(rope);
      else if (auto normGrad = dyn_cast<RmsNormGradOp>(op))
        normGrads.push_back(normGrad);
    });
    for (RopeOp rope : ropes)
      fuseForward(rope);
    for (RmsNormGradOp normGrad : normGrads)
      fuseBackward(normGrad);
  }
};

} // namespace
