//===- FuseAdds.cpp - sums into the ops that produce them -----------------===//
//
// An add whose operand only it reads, made by a GEMM (matmul, matmul_dgrad)
// or by rms_norm_grad's dx, becomes that op with the other operand as its
// addend (matmul_add, matmul_dgrad_add, rms_norm_grad_add): the sum is
// formed before the one rounding to storage, and the product is never
// stored alone.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace sharc {
#define GEN_PASS_DEF_FUSEADDS
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// The op producing `value` when the add is its only reader and the op can
/// take an addend for it (a GEMM's product, a norm backward's dx).
Operation *fusableProducer(Value value) {
  Operation *producer = value.getDefiningOp();
  if (!producer || !value.hasOneUse())
    return nullptr;
  if (isa<MatmulOp, MatmulDgradOp>(producer))
    return producer;
  if (auto normGrad = dyn_cast<RmsNormGradOp>(producer);
      normGrad && value == normGrad.getDx())
    return producer;
  return nullptr;
}

/// Whether `value` is available where `producer` runs: it can take it as
/// its addend without moving.
bool availableAt(Value value, Operation *producer) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return cast<BlockArgument>(value).getOwner() == producer->getBlock();
  return def->getBlock() == producer->getBlock() &&
         def->isBeforeInBlock(producer);
}

/// Replaces `add` by the producer of one operand with the other as its
/// addend. The fused op stays where the producer was, because what runs
/// between it and the add may update its operands in place (an AdamW step
/// on its weight); so the addend must already be there. False when neither
/// operand qualifies.
bool fuse(AddOp add) {
  Operation *producer = nullptr;
  Value addend;
  for (auto [product, other] :
       {std::pair{add.getA(), add.getB()}, {add.getB(), add.getA()}}) {
    Operation *candidate = fusableProducer(product);
    if (candidate && availableAt(other, candidate)) {
      producer = candidate;
      addend = other;
      break;
    }
  }
  if (!producer)
    return false;
  OpBuilder builder(producer);
  Value fused;
  if (auto normGrad = dyn_cast<RmsNormGradOp>(producer)) {
    auto made = builder.create<RmsNormGradAddOp>(
        add.getLoc(), add.getType(), normGrad.getDw().getType(),
        normGrad.getX(), normGrad.getW(), normGrad.getDy(), addend,
        normGrad.getEpsAttr());
    normGrad.getDw().replaceAllUsesWith(made.getDw());
    fused = made.getDx();
  } else if (auto matmul = dyn_cast<MatmulOp>(producer))
    fused = builder
                .create<MatmulAddOp>(add.getLoc(), add.getType(), matmul.getX(),
                                     matmul.getW(), addend)
                .getY();
  else {
    auto dgrad = cast<MatmulDgradOp>(producer);
    fused = builder
                .create<MatmulDgradAddOp>(add.getLoc(), add.getType(),
                                          dgrad.getDy(), dgrad.getW(), addend)
                .getDx();
  }
  add.getY().replaceAllUsesWith(fused);
  add.erase();
  producer->erase();
  return true;
}

struct FuseAddsPass : sharc::impl::FuseAddsBase<FuseAddsPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    // In program order: a fused result may be the operand of a later add,
    // whose GEMM is then another one.
    for (AddOp add : adds)
      fuse(add);
  }
};

} // namespace
