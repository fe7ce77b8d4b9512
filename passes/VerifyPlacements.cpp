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
    SmallVector<StringAttr> axes(want.getAxes());
    axes.append(have.getAxes().begin(), have.getAxes().end());
    for (StringAttr axis : axes)
      if (want.getAxis(axis) != have.getAxis(axis))
        return returnOp->emitError("'")
               << output << "' has placement " << name(have.getAxis(axis))
               << " on " << axis.getValue() << " but parameter '" << param
               << "' is " << name(want.getAxis(axis));
  }
  return success();
}

/// Every placement names axes of the mesh, and splits each dimension into
/// whole blocks only over axes the mesh has: the error names the value
/// (argument or an op's result) and the axis.
LogicalResult checkAxes(func::FuncOp func) {
  MeshAttr mesh = getMesh(func);
  auto check = [&](Value value, auto emit) -> LogicalResult {
    auto tensor = dyn_cast<RankedTensorType>(value.getType());
    if (!tensor)
      return success();
    for (StringAttr axis : getPlacement(tensor).getAxes())
      if (!mesh.hasAxis(axis.getValue()))
        return emit() << "is placed over axis '" << axis.getValue()
                      << "', which the mesh lacks";
    return success();
  };
  for (BlockArgument arg : func.getArguments())
    if (failed(check(arg, [&] {
          return emitError(arg.getLoc())
                 << "argument " << arg.getArgNumber() << " ";
        })))
      return failure();
  WalkResult walk = func.walk([&](Operation *op) {
    for (OpResult result : op->getResults())
      if (failed(check(result, [&] {
            return op->emitOpError("result ")
                   << result.getResultNumber() << " ";
          })))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

struct VerifyPlacementsPass
    : sharc::impl::VerifyPlacementsBase<VerifyPlacementsPass> {
  void runOnOperation() override {
    // Each op's own placement rule is checked when it is verified (type
    // inference, the collectives' verifiers); what only the module knows
    // is its mesh, and only the function whether every gradient matches
    // its parameter.
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(checkAxes(func)) || failed(checkGradients(func)))
        return signalPassFailure();
  }
};

} // namespace
