//===- Recompute.cpp - rematerialise values in the backward ---------------===//

#include "ir/SharcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace sharc {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// Megatron SP: a column-parallel input gathered over the sequence is used
/// by the forward GEMMs and by the weight-gradient GEMMs of the backward.
/// Re-gathering it right before the first weight gradient lets the gathered
/// tensor die after the forward; only the local shard lives across.
void regatherForWeightGradients(func::FuncOp func) {
  SmallVector<AllGatherOp> gathers;
  func.walk([&](AllGatherOp gather) {
    if (getPlacement(gather.getY().getType()).getAxis(gather.getAxis()) ==
            PlacementAttr::kReplicated &&
        gather.getDim() == 0)
      gathers.push_back(gather);
  });
  for (AllGatherOp gather : gathers) {
    SmallVector<OpOperand *> backwardUses;
    for (OpOperand &use : gather.getY().getUses())
      if (isa<MatmulWgradOp>(use.getOwner()))
        backwardUses.push_back(&use);
    if (backwardUses.empty())
      continue;
    Operation *first = backwardUses.front()->getOwner();
    for (OpOperand *use : backwardUses)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    // Start the gather before the input-gradient GEMM of the same output
    // gradient, so that it runs while that GEMM does (Megatron's order).
    Value dy = cast<MatmulWgradOp>(first).getDy();
    for (Operation *user : dy.getUsers())
      if (isa<MatmulDgradOp>(user) && user->isBeforeInBlock(first))
        first = user;
    OpBuilder builder(first);
    Operation *regather = builder.clone(*gather.getOperation());
    for (OpOperand *use : backwardUses)
      use->set(regather->getResult(0));
  }
}

struct RecomputePass : sharc::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;
  void runOnOperation() override {
    if (policy == "none")
      return;
    if (policy != "sp-allgather") {
      getOperation().emitError("unknown recompute policy '")
          << policy << "' (expected sp-allgather or none)";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      regatherForWeightGradients(func);
  }
};

} // namespace
