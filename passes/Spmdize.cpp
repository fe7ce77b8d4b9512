//===- Spmdize.cpp - a layout as a per-rank program -----------------------===//
//
// Walks the dense forward once, in order. Arguments get their local types
// from the placements the layout passes requested; for each op and each
// mesh axis, the op's sharding rule (ShardingRuleOpInterface) says which
// placements its operands need, the generic reshard brings them there, and
// the op builds itself on the local operands. Nothing here knows an op
// type. Reshards are cached per (value, placement), so a value feeding
// several consumers is gathered or replicated once.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/Layout.h"
#include "passes/Passes.h"
#include "passes/Reshard.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace sharc {
#define GEN_PASS_DEF_SPMDIZE
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

using namespace sharc::placement;

namespace {

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

class Spmdizer {
public:
  Spmdizer(func::FuncOp func, const Layout &layout, const ModelSizes &sizes)
      : func(func), layout(layout), sizes(sizes), builder(func.getContext()) {}
  LogicalResult run();

private:
  LogicalResult retypeArguments();
  /// The code activations take on `axis` between layers (AxisQuery).
  int64_t activationCode(StringRef axis) const;
  /// `target` (a rule's codes) with an order for each dimension several
  /// axes split: that of an operand already split over those axes (so
  /// addends agree), else the splits `current` keeps, outermost and in
  /// their order, with the new ones inside them. A value split over heads
  /// by tp and brought to heads over cp too is so exchanged within each tp
  /// group (one all_to_all), not gathered over tp and sliced again.
  PlacementAttr orderSplits(PlacementAttr target, PlacementAttr current,
                            ArrayRef<Value> operands) const;
  FailureOr<Value> convert(Value value, PlacementAttr target, Location loc);
  /// The local value standing for a dense one.
  Value local(Value dense) { return localOf.lookup(dense); }
  LogicalResult rewrite(Operation *op);

  func::FuncOp func;
  const Layout &layout;
  const ModelSizes &sizes;
  OpBuilder builder;
  llvm::DenseMap<Value, Value> localOf;
  llvm::DenseMap<std::pair<Value, Attribute>, Value> conversions;
  /// The token inputs' placement: their splits are the activations'.
  PlacementAttr tokenPlacement;
};

LogicalResult Spmdizer::retypeArguments() {
  tokenPlacement = PlacementAttr::getInvariant(func.getContext());
  for (BlockArgument arg : func.getArguments())
    if (!getArgString(func, arg.getArgNumber(), kInputAttr).empty())
      tokenPlacement = getParamPlacement(func, arg.getArgNumber());
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    SmallVector<int64_t> shape(shapeOf(arg));
    // What the layout passes requested (invariant where they said nothing).
    PlacementAttr placement = getParamPlacement(func, index);
    if (!getArgString(func, index, kParamAttr).empty()) {
      StringRef role = getArgString(func, index, kRoleAttr);
      // Megatron pads the vocabulary to a multiple of its split; the padded
      // rows are never looked up and their logits are masked out of the
      // loss.
      int64_t split = splitFactor(placement, 0, layout.mesh);
      if ((role == kRoleEmbedding || role == kRoleLmHead) && split > 1 &&
          shape[0] % split != 0)
        shape[0] = (shape[0] / split + 1) * split;
    }
    for (StringAttr axisName : layout.mesh.getAxes()) {
      StringRef axis = axisName.getValue();
      int64_t code = placement.getAxis(axis), size = layout.size(axis);
      if (code < 0)
        continue;
      if (shape[code] % size != 0)
        return emitError(arg.getLoc())
               << axis << " (" << size << ") must divide dimension " << code
               << " (" << shape[code] << ") of argument " << index;
      shape[code] /= size;
    }
    arg.setType(withPlacement(
        RankedTensorType::get(shape, getElementTypeOrSelf(arg.getType())),
        placement));
    localOf[arg] = arg;
  }
  return success();
}

int64_t Spmdizer::activationCode(StringRef axis) const {
  if (int64_t token = tokenPlacement.getAxis(axis); token >= 0)
    return token;
  return axis == layout.sequenceParallelAxis ? 0 : kI;
}

PlacementAttr Spmdizer::orderSplits(PlacementAttr target, PlacementAttr current,
                                    ArrayRef<Value> operands) const {
  SmallVector<int64_t> dims;
  for (int64_t code : target.getCodes())
    if (code >= 0 && !llvm::is_contained(dims, code))
      dims.push_back(code);
  for (int64_t dim : dims) {
    SmallVector<StringRef> wanted = axesSplitting(target, dim, layout.mesh);
    if (wanted.size() < 2)
      continue;
    auto sameAxes = [&](ArrayRef<StringRef> axes) {
      return axes.size() == wanted.size() &&
             llvm::all_of(axes, [&](StringRef axis) {
               return llvm::is_contained(wanted, axis);
             });
    };
    // An operand already split so (an addend) gives its order.
    SmallVector<StringRef> order;
    for (Value operand : operands)
      if (SmallVector<StringRef> axes =
              axesSplitting(getPlacement(operand.getType()), dim, layout.mesh);
          sameAxes(axes)) {
        order = axes;
        break;
      }
    if (order.empty()) {
      for (StringRef axis : axesSplitting(current, dim, layout.mesh))
        if (llvm::is_contained(wanted, axis))
          order.push_back(axis);
      for (StringRef axis : wanted)
        if (!llvm::is_contained(order, axis))
          order.push_back(axis);
    }
    target = withSplitOrder(target, dim, order, layout.mesh);
  }
  return target;
}

FailureOr<Value> Spmdizer::convert(Value value, PlacementAttr target,
                                   Location loc) {
  if (getPlacement(value.getType()) == target)
    return value;
  auto key = std::make_pair(value, Attribute(target));
  if (Value cached = conversions.lookup(key))
    return cached;
  FailureOr<Value> result = reshard(builder, loc, value, target, layout.mesh);
  if (succeeded(result))
    conversions[key] = *result;
  return result;
}

LogicalResult Spmdizer::rewrite(Operation *op) {
  builder.setInsertionPoint(op);
  auto rules = dyn_cast<ShardingRuleOpInterface>(op);
  if (!rules)
    return op->emitOpError("has no sharding rule");
  SmallVector<Value> operands;
  for (Value dense : op->getOperands())
    operands.push_back(local(dense));
  // Ask the rule axis by axis, collecting each operand's target placement.
  size_t numOperands = operands.size();
  SmallVector<SmallVector<std::pair<StringRef, int64_t>>> targets(numOperands);
  SmallVector<SmallVector<std::pair<StringRef, int64_t>>> expected(
      op->getNumResults());
  for (StringAttr axisName : layout.mesh.getAxes()) {
    AxisQuery query;
    query.axis = axisName.getValue();
    query.size = layout.size(query.axis);
    query.activation = activationCode(query.axis);
    for (Value operand : operands)
      query.operands.push_back(
          getPlacement(operand.getType()).getAxis(query.axis));
    AxisRule rule;
    if (failed(rules.getAxisRule(query, rule))) {
      InFlightDiagnostic diag = op->emitOpError("has no sharding rule on ")
                                << query.axis << " for operands";
      for (int64_t code : query.operands)
        diag << " " << name(code);
      return diag;
    }
    for (size_t i = 0; i < numOperands; ++i)
      targets[i].push_back({query.axis, rule.operands[i]});
    for (auto [i, code] : llvm::enumerate(rule.results))
      expected[i].push_back({query.axis, code});
  }
  for (size_t i = 0; i < numOperands; ++i) {
    // A value brought to where activations live (a row-parallel sum, the
    // embedding's output) is its producer's doing, so it carries the
    // producer's location; a placement only this op needs carries the op's.
    PlacementAttr current = getPlacement(operands[i].getType());
    PlacementAttr target = orderSplits(
        PlacementAttr::make(op->getContext(), targets[i]), current, operands);
    bool toActivation = llvm::all_of(layout.mesh.getAxes(), [&](StringAttr a) {
      return current.getAxis(a) == target.getAxis(a) ||
             target.getAxis(a) == activationCode(a);
    });
    FailureOr<Value> converted =
        convert(operands[i], target,
                toActivation ? operands[i].getLoc() : op->getLoc());
    if (failed(converted))
      return op->emitOpError("operand ")
             << i << " cannot be brought to the placement its rule needs";
    operands[i] = *converted;
  }
  FailureOr<SmallVector<Value>> results = rules.buildSharded(builder, operands);
  if (failed(results))
    return failure();
  for (auto [index, pair] :
       llvm::enumerate(llvm::zip(op->getResults(), *results))) {
    auto [dense, rebuilt] = pair;
    // The rule gives the codes; the order of a dimension's splits is the
    // op's, inferred from its operands.
    SmallVector<StringRef> order;
    for (StringAttr axis : getPlacement(rebuilt.getType()).getOrder())
      order.push_back(axis.getValue());
    PlacementAttr want =
        PlacementAttr::make(op->getContext(), expected[index], order);
    if (getPlacement(rebuilt.getType()) != want)
      return op->emitOpError("result ")
             << index << " was built " << getPlacement(rebuilt.getType())
             << " but its rule says " << want;
    localOf[dense] = rebuilt;
  }
  return success();
}

LogicalResult Spmdizer::run() {
  if (failed(retypeArguments()))
    return failure();
  SmallVector<Operation *> denseOps;
  for (Operation &op : func.getBody().front().without_terminator())
    denseOps.push_back(&op);
  for (Operation *op : denseOps)
    if (failed(rewrite(op)))
      return failure();
  // A partial result (the loss of a batch split) is summed before it is
  // returned; every other result keeps its placement for the plan.
  Operation *returnOp = func.getBody().front().getTerminator();
  builder.setInsertionPoint(returnOp);
  SmallVector<Value> results;
  for (Value dense : returnOp->getOperands()) {
    Value value = local(dense);
    PlacementAttr placement = getPlacement(value.getType());
    for (auto [axis, code] :
         llvm::zip(placement.getAxes(), placement.getCodes()))
      if (code == kP)
        placement = placement.withAxis(axis, kI);
    FailureOr<Value> returned = convert(value, placement, value.getLoc());
    if (failed(returned))
      return failure();
    results.push_back(*returned);
  }
  SmallVector<DictionaryAttr> resultAttrs;
  func.getAllResultAttrs(resultAttrs);
  setResults(func, results, resultAttrs);
  for (Operation *op : llvm::reverse(denseOps))
    op->erase();
  return success();
}

struct SpmdizePass : sharc::impl::SpmdizeBase<SpmdizePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Layout layout = readLayout(module);
    if (layout.mesh.getNumRanks() == 1)
      return; // dense: nothing to do
    ModelSizes sizes(module);
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(Spmdizer(func, layout, sizes).run()))
        return signalPassFailure();
  }
};

} // namespace
