//===- Autodiff.cpp - reverse-mode differentiation of a train step --------===//

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace sharc {
#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// Cotangents of the values of one function, summed as they arrive.
class GradientMap {
public:
  explicit GradientMap(OpBuilder &builder) : builder(builder) {}

  Value lookup(Value value) const { return grads.lookup(value); }

  /// Adds `grad` to the cotangent of `value`: a value used twice (the
  /// residual stream, a tied embedding) receives the sum of both uses.
  void accumulate(Value value, Value grad, Location loc) {
    Value &slot = grads[value];
    slot =
        slot
            ? builder.create<AddOp>(loc, slot.getType(), slot, grad).getResult()
            : grad;
  }

private:
  OpBuilder &builder;
  llvm::DenseMap<Value, Value> grads;
};

/// Gradient synchronisation falls out of the placements: a parameter that
/// every rank holds but uses differently (R on an axis) receives a partial
/// gradient there, which is summed so the gradient matches the parameter.
/// Any other mismatch is left for verify-placements to report.
Value synchronize(OpBuilder &builder, Value grad, Value param) {
  PlacementAttr want = getPlacement(param.getType());
  PlacementAttr have = getPlacement(grad.getType());
  // One all_reduce over every such axis at once (q_norm's gradient under
  // dp x tp is partial on both), the axes in mesh order.
  SmallVector<StringRef> axes;
  for (StringAttr axisName :
       getMesh(param.getParentBlock()->getParentOp()).getAxes()) {
    StringRef axis = axisName.getValue();
    if (want.getAxis(axis) != PlacementAttr::kReplicated ||
        have.getAxis(axis) != PlacementAttr::kPartial)
      continue;
    axes.push_back(axis);
    have = have.withAxis(axis, PlacementAttr::kReplicated);
  }
  if (axes.empty())
    return grad;
  return builder.create<AllReduceOp>(
      param.getLoc(), withPlacement(grad.getType(), have), grad,
      builder.getStringAttr(joinAxes(axes)), builder.getStringAttr("sum"));
}

LogicalResult differentiate(func::FuncOp func) {
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  std::optional<unsigned> lossIndex;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (getResultString(func, i, kOutputAttr) == "loss")
      lossIndex = i;
  if (!lossIndex)
    return success(); // not a training function
  // A second run would differentiate the backward as well and return every
  // gradient twice; sharc-opt lets a user ask for that, so refuse it here.
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (getResultString(func, i, kOutputAttr).starts_with("grad:"))
      return func.emitOpError("is already differentiated: result ")
             << i << " is '" << getResultString(func, i, kOutputAttr)
             << "'; run sharc-autodiff once";

  OpBuilder builder(returnOp);
  GradientMap grads(builder);
  Value loss = returnOp.getOperand(*lossIndex);
  Value seed = builder.create<FillOp>(loss.getLoc(), loss.getType(),
                                      builder.getF64FloatAttr(1.0));
  grads.accumulate(loss, seed, loss.getLoc());

  // The forward ops, newest first; gradient ops are appended before the
  // return and are never visited themselves.
  SmallVector<Operation *> forwardOps;
  for (Operation &op : func.getBody().front().without_terminator())
    forwardOps.push_back(&op);
  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultGrads;
    bool anyGrad = false;
    for (Value result : op->getResults()) {
      resultGrads.push_back(grads.lookup(result));
      anyGrad |= static_cast<bool>(resultGrads.back());
    }
    if (!anyGrad)
      continue;
    auto vjp = dyn_cast<VJPOpInterface>(op);
    if (!vjp)
      return op->emitOpError("has no VJP rule but a gradient flows into it");
    FailureOr<SmallVector<Value>> operandGrads =
        vjp.buildVJP(builder, resultGrads);
    if (failed(operandGrads))
      return failure();
    for (auto [operand, grad] : llvm::zip(op->getOperands(), *operandGrads))
      if (grad)
        grads.accumulate(operand, grad, op->getLoc());
  }

  SmallVector<Value> results(returnOp.getOperands());
  SmallVector<DictionaryAttr> resultAttrs;
  func.getAllResultAttrs(resultAttrs);
  for (BlockArgument arg : func.getArguments()) {
    StringRef name = getArgString(func, arg.getArgNumber(), kParamAttr);
    if (name.empty())
      continue;
    Value grad = grads.lookup(arg);
    if (!grad) // a parameter the loss does not depend on: its gradient is 0
      grad = builder.create<FillOp>(arg.getLoc(), cotangentType(arg.getType()),
                                    builder.getF64FloatAttr(0.0));
    grad = synchronize(builder, grad, arg);
    results.push_back(grad);
    resultAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        kOutputAttr, builder.getStringAttr("grad:" + name.str()))));
  }
  setResults(func, results, resultAttrs);
  return success();
}

struct AutodiffPass : sharc::impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(differentiate(func)))
        return signalPassFailure();
  }
};

} // namespace
