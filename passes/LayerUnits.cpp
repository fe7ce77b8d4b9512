//===- LayerUnits.cpp - the model unit each forward op belongs to ---------===//

#include "passes/LayerUnits.h"
#include "ir/ArgumentRoles.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace sharc;

namespace {

/// What reads neither a parameter nor a unit op has no unit of its own.
constexpr int64_t kNoUnit = std::numeric_limits<int64_t>::min();

int64_t paramUnit(func::FuncOp func, unsigned index, int64_t numLayers) {
  StringRef name = getArgString(func, index, kParamAttr);
  if (getArgString(func, index, kRoleAttr) == kRoleEmbedding)
    return -1;
  int64_t layer = 0;
  if (name.consume_front("layers.") &&
      !name.split('.').first.getAsInteger(10, layer))
    return layer;
  return numLayers; // the final norm and the LM head
}

} // namespace

llvm::DenseMap<Operation *, int64_t>
sharc::forwardUnits(func::FuncOp func, ArrayRef<Operation *> forwardOps,
                    int64_t numLayers) {
  llvm::DenseMap<Operation *, int64_t> unitOf;
  auto unitOfValue = [&](Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return getArgString(func, arg.getArgNumber(), kParamAttr).empty()
                 ? kNoUnit
                 : paramUnit(func, arg.getArgNumber(), numLayers);
    auto it = unitOf.find(value.getDefiningOp());
    return it == unitOf.end() ? kNoUnit : it->second;
  };
  for (Operation *op : forwardOps) {
    int64_t unit = kNoUnit;
    for (Value operand : op->getOperands())
      unit = std::max(unit, unitOfValue(operand));
    if (unit != kNoUnit)
      unitOf[op] = unit;
  }
  // What reads neither a parameter nor an op (the tokens' ops, constants)
  // runs where it is first needed.
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (unitOf.count(op))
      continue;
    int64_t unit = std::numeric_limits<int64_t>::max();
    for (Operation *user : op->getUsers())
      if (auto it = unitOf.find(user); it != unitOf.end())
        unit = std::min(unit, it->second);
    unitOf[op] = unit == std::numeric_limits<int64_t>::max() ? -1 : unit;
  }
  return unitOf;
}
