//===- VerifyPlacements.cpp - check placement rules and gradients ---------===//

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "passes/Passes.h"

#include "llvm/ADT/StringMap.h"

namespace sharc {
#define GEN_PASS_DEF_VERIFYPLACEMENTS
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

using namespace sharc::placement;

namespace {

LogicalResult checkMatmul(MatmulOp op) {
  int64_t lastDim = cast<RankedTensorType>(op.getX().getType()).getRank() - 1;
  PlacementAttr x = getPlacement(op.getX().getType());
  PlacementAttr w = getPlacement(op.getW().getType());
  PlacementAttr y = getPlacement(op.getY().getType());
  for (StringRef axis : {"dp", "tp"}) {
    std::optional<int64_t> expected =
        matmulRule(x.getAxis(axis), w.getAxis(axis), lastDim);
    if (!expected)
      return op.emitOpError("has no placement rule for input ")
             << name(x.getAxis(axis)) << " and weight " << name(w.getAxis(axis))
             << " on " << axis;
    if (*expected != y.getAxis(axis))
      return op.emitOpError("result placement on ")
             << axis << " must be " << name(*expected) << ", got "
             << name(y.getAxis(axis));
  }
  return success();
}

/// Every parameter's gradient (or update) must have its placement.
LogicalResult checkGradients(func::FuncOp func) {
  llvm::StringMap<unsigned> paramIndex;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (StringRef param = getArgString(func, i, kParamAttr); !param.empty())
      paramIndex[param] = i;
  Operation *returnOp = func.getBody().front().getTerminator();
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    StringRef output = getResultString(func, i, kOutputAttr);
    auto [kind, param] = output.split(':');
    if ((kind != "grad" && kind != "param") || param.empty())
      continue;
    auto it = paramIndex.find(param);
    if (it == paramIndex.end())
      continue;
    PlacementAttr want = getPlacement(func.getArgument(it->second).getType());
    PlacementAttr have = getPlacement(returnOp->getOperand(i).getType());
    for (StringRef axis : {"dp", "tp"})
      if (want.getAxis(axis) != have.getAxis(axis))
        return returnOp->emitError("'")
               << output << "' has placement " << name(have.getAxis(axis))
               << " on " << axis << " but parameter '" << param << "' is "
               << name(want.getAxis(axis));
  }
  return success();
}

struct VerifyPlacementsPass
    : sharc::impl::VerifyPlacementsBase<VerifyPlacementsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      WalkResult result = func.walk([](MatmulOp op) {
        return failed(checkMatmul(op)) ? WalkResult::interrupt()
                                       : WalkResult::advance();
      });
      if (result.wasInterrupted() || failed(checkGradients(func)))
        return signalPassFailure();
    }
  }
};

} // namespace
