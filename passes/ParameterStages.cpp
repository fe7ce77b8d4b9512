//===- ParameterStages.cpp - the pipeline stage of each parameter ---------===//

#include "passes/ParameterStages.h"

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

namespace {

/// Each parameter's first staged reader, through the views of a fused
/// weight.
template <typename Visit>
void forEachFirstStagedReader(func::FuncOp func, Visit visit) {
  for (BlockArgument arg : func.getArguments()) {
    StringRef name = getArgString(func, arg.getArgNumber(), kParamAttr);
    if (name.empty())
      continue;
    // A fused weight is a view of its parameters: its readers are theirs.
    SmallVector<Value> readers{arg};
    bool found = false;
    while (!readers.empty() && !found)
      for (Operation *user : readers.pop_back_val().getUsers()) {
        if (user->hasAttr(kStageAttr)) {
          visit(name, user);
          found = true;
          break;
        }
        if (auto concat = dyn_cast<ConcatOp>(user); concat && concat.isView())
          readers.push_back(concat.getY());
      }
  }
}

} // namespace

llvm::StringMap<int64_t> sharc::parameterStages(func::FuncOp func) {
  llvm::StringMap<int64_t> stages;
  forEachFirstStagedReader(func, [&](StringRef name, Operation *reader) {
    stages.try_emplace(name,
                       reader->getAttrOfType<IntegerAttr>(kStageAttr).getInt());
  });
  return stages;
}

llvm::StringMap<int64_t> sharc::parameterChunks(func::FuncOp func) {
  llvm::StringMap<int64_t> chunks;
  forEachFirstStagedReader(func, [&](StringRef name, Operation *reader) {
    auto chunk = reader->getAttrOfType<IntegerAttr>(kChunkAttr);
    chunks.try_emplace(name, chunk ? chunk.getInt() : 0);
  });
  return chunks;
}

StringRef sharc::pipelineAxis(func::FuncOp func) {
  StringRef axis;
  func.walk([&](TransferOp transfer) {
    axis = transfer.getAxis();
    return WalkResult::interrupt();
  });
  return axis;
}
