//===- ParameterStages.cpp - the pipeline stage of each parameter ---------===//

#include "passes/ParameterStages.h"

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

llvm::StringMap<int64_t> sharc::parameterStages(func::FuncOp func) {
  llvm::StringMap<int64_t> stages;
  for (BlockArgument arg : func.getArguments()) {
    StringRef name = getArgString(func, arg.getArgNumber(), kParamAttr);
    if (name.empty())
      continue;
    // A fused weight is a view of its parameters: its readers are theirs.
    SmallVector<Value> readers{arg};
    bool found = false;
    while (!readers.empty() && !found)
      for (Operation *user : readers.pop_back_val().getUsers()) {
        if (auto stage = user->getAttrOfType<IntegerAttr>(kStageAttr)) {
          stages.try_emplace(name, stage.getInt());
          found = true;
          break;
        }
        if (auto concat = dyn_cast<ConcatOp>(user); concat && concat.isView())
          readers.push_back(concat.getY());
      }
  }
  return stages;
}

StringRef sharc::pipelineAxis(func::FuncOp func) {
  StringRef axis;
  func.walk([&](TransferOp transfer) {
    axis = transfer.getAxis();
    return WalkResult::interrupt();
  });
  return axis;
}
