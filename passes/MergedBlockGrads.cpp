//===- MergedBlockGrads.cpp - ring block gradients from the merge ---------===//
//
// Ring attention merges its blocks' partial outputs by log-sum-exp
// (lse_merge), and autodiff differentiates each merge and each block on
// its own: a block's backward reads its partial (out_b, lse_b) and the
// cotangents (w dout, w (dlse + rowsum(dout (out_b - out)))) its merge
// gradient computes, w = exp(lse_b - lse). Substituted into the block's
// rule ds = p_b (dp_b - delta_b + dlse_b), with p_b w = exp(s - lse) the
// probabilities over the merged lse, every term in out_b cancels:
//   ds = p (dout . v - rowsum(dout out) + dlse),  dv = p^T dout,
// the gradient of the merged (out, lse) with their cotangents, over the
// block's keys. The same holds one merge further up, so a chain of merges
// collapses to its last. The rewrite is worth it twice: the backward keeps
// one output per layer instead of every partial and intermediate merge,
// and with the merged lse unused (its cotangent a zero fill) the block's
// backward takes no dlse, which is what a fused attention library runs.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace sharc {
#define GEN_PASS_DEF_MERGEDBLOCKGRADS
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// A partial output, its lse and their cotangents.
struct Partial {
  Value out, lse, dout, dlse;
};

/// The merge gradient that made `p`'s cotangents from the merge that
/// consumed (p.out, p.lse), if one did.
LseMergeGradOp mergeGradOf(const Partial &p) {
  auto grad = p.dout.getDefiningOp<LseMergeGradOp>();
  if (!grad || grad.getDpart() != p.dout || grad.getDlsePart() != p.dlse ||
      grad.getPart() != p.out || grad.getLsePart() != p.lse)
    return {};
  return grad;
}

/// Whether `value` is a fill with zero.
bool isZeroFill(Value value) {
  auto fill = value.getDefiningOp<FillOp>();
  return fill && fill.getValue().convertToDouble() == 0.0;
}

/// Rewrites `grad` to read the last merge of its chain; whether it changed.
bool readMerged(AttentionBlockGradOp grad) {
  Partial p{grad.getOut(), grad.getLse(), grad.getDout(), grad.getDlse()};
  if (!p.dlse)
    return false;
  bool merged = false;
  for (LseMergeGradOp m = mergeGradOf(p); m; m = mergeGradOf(p)) {
    p = {m.getOut(), m.getLse(), m.getDout(), m.getDlse()};
    merged = true;
  }
  bool dropDlse = isZeroFill(p.dlse);
  if (!merged && !dropDlse)
    return false;
  // Every value of p is there before the merge gradients that read it, and
  // those are before `grad`: the new op can take its place.
  OpBuilder builder(grad);
  auto rewritten = builder.create<AttentionBlockGradOp>(
      grad.getLoc(), grad.getDq().getType(), grad.getDk().getType(),
      grad.getDv().getType(), grad.getQ(), grad.getK(), grad.getV(), p.out,
      p.lse, p.dout, dropDlse ? Value() : p.dlse, grad.getHeadDimAttr(),
      grad.getPositionAxisAttr(), grad.getKvShiftAttr(),
      grad.getPositionSplitAttr());
  grad.replaceAllUsesWith(rewritten.getResults());
  grad.erase();
  return true;
}

struct MergedBlockGradsPass
    : public sharc::impl::MergedBlockGradsBase<MergedBlockGradsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      SmallVector<AttentionBlockGradOp> grads;
      func.walk([&](AttentionBlockGradOp grad) { grads.push_back(grad); });
      bool changed = false;
      for (AttentionBlockGradOp grad : grads)
        changed |= readMerged(grad);
      if (!changed)
        return;
      // The merge gradients and zero fills nothing reads any more, last
      // first so a fill's readers are gone before it is looked at.
      SmallVector<Operation *> dead;
      func.walk([&](Operation *op) {
        if (isa<LseMergeGradOp, FillOp>(op))
          dead.push_back(op);
      });
      for (Operation *op : llvm::reverse(dead))
        if (op->use_empty())
          op->erase();
    });
  }
};

} // namespace
