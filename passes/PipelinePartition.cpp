//===- PipelinePartition.cpp - forward ops onto pipeline stages -----------===//
//
// Each forward op belongs to a unit: the embedding (-1), a layer 0..L-1 or
// the head (L: final norm, LM head, loss). A parameter's unit comes from its
// name and role; an op's is the latest unit of what it reads, so the
// residual stream moves to a layer's unit where the layer starts; an op
// that reads no parameter nor op (a constant) takes its first user's.
// Units map to stages by a contiguous split of the layers.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/Layout.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "llvm/ADT/DenseMap.h"
#include <limits>
#include <map>

namespace sharc {
#define GEN_PASS_DEF_PIPELINEPARTITION
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

constexpr int64_t kNoUnit = std::numeric_limits<int64_t>::min();

class Partitioner {
public:
  Partitioner(func::FuncOp func, StringRef axis, int64_t numStages,
              int64_t numLayers)
      : func(func), axis(axis), numStages(numStages), numLayers(numLayers) {}
  LogicalResult run(StringRef balance);

private:
  int64_t paramUnit(unsigned index) const;
  void findUnits();
  int64_t stageOfUnit(int64_t unit) const;
  void routeSharedParams();
  void insertTransfers();

  func::FuncOp func;
  StringRef axis;
  int64_t numStages, numLayers;
  llvm::DenseMap<Operation *, int64_t> unitOf;
  std::vector<int64_t> bounds; ///< stage r: layers [bounds[r], bounds[r+1])
};

int64_t Partitioner::paramUnit(unsigned index) const {
  StringRef name = getArgString(func, index, kParamAttr);
  if (getArgString(func, index, kRoleAttr) == kRoleEmbedding)
    return -1;
  int64_t layer = 0;
  if (name.consume_front("layers.") &&
      !name.split('.').first.getAsInteger(10, layer))
    return layer;
  return numLayers; // the final norm and the LM head
}

void Partitioner::findUnits() {
  Block &body = func.getBody().front();
  auto unitOfValue = [&](Value value) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return getArgString(func, arg.getArgNumber(), kParamAttr).empty()
                 ? kNoUnit
                 : paramUnit(arg.getArgNumber());
    auto it = unitOf.find(value.getDefiningOp());
    return it == unitOf.end() ? kNoUnit : it->second;
  };
  for (Operation &op : body.without_terminator()) {
    int64_t unit = kNoUnit;
    for (Value operand : op.getOperands())
      unit = std::max(unit, unitOfValue(operand));
    if (unit != kNoUnit)
      unitOf[&op] = unit;
  }
  // What reads neither a parameter nor an op (the tokens' ops, constants)
  // runs where it is first needed.
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (unitOf.count(&op))
      continue;
    int64_t unit = std::numeric_limits<int64_t>::max();
    for (Operation *user : op.getUsers())
      if (auto it = unitOf.find(user); it != unitOf.end())
        unit = std::min(unit, it->second);
    unitOf[&op] = unit == std::numeric_limits<int64_t>::max() ? -1 : unit;
  }
}

int64_t Partitioner::stageOfUnit(int64_t unit) const {
  if (unit < 0)
    return 0;
  if (unit >= numLayers)
    return numStages - 1;
  int64_t stage = 0;
  while (unit >= bounds[stage + 1])
    ++stage;
  return stage;
}

/// A parameter read on several stages (tied embeddings: the embedding on
/// the first, the LM head on the last) lives on the first: the others
/// receive it through a transfer once a step, whose transpose returns
/// their gradient to be summed there, so one AdamW update on the first
/// stage sees the whole gradient (the original all-reduces it over the
/// embedding group instead).
void Partitioner::routeSharedParams() {
  OpBuilder builder(func.getContext());
  builder.setInsertionPointToStart(&func.getBody().front());
  for (BlockArgument arg : func.getArguments()) {
    if (getArgString(func, arg.getArgNumber(), kParamAttr).empty())
      continue;
    std::map<int64_t, SmallVector<OpOperand *>> usesOnStage;
    for (OpOperand &use : arg.getUses())
      if (auto stage = use.getOwner()->getAttrOfType<IntegerAttr>(kStageAttr))
        usesOnStage[stage.getInt()].push_back(&use);
    if (usesOnStage.size() < 2)
      continue;
    int64_t home = usesOnStage.begin()->first;
    for (auto &[stage, uses] : llvm::drop_begin(usesOnStage)) {
      auto transfer = builder.create<TransferOp>(
          arg.getLoc(), arg.getType(), arg, builder.getStringAttr(axis),
          builder.getI64IntegerAttr(home), builder.getI64IntegerAttr(stage));
      transfer->setAttr(kForwardAttr, builder.getUnitAttr());
      for (OpOperand *use : uses)
        use->set(transfer.getY());
    }
  }
}

void Partitioner::insertTransfers() {
  OpBuilder builder(func.getContext());
  Block &body = func.getBody().front();
  // One transfer per value and destination stage, right after the value.
  llvm::DenseMap<std::pair<Value, int64_t>, Value> transferred;
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    int64_t to = op->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
    for (OpOperand &operand : op->getOpOperands()) {
      Operation *producer = operand.get().getDefiningOp();
      if (!producer)
        continue;
      int64_t from = producer->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
      if (from == to)
        continue;
      Value &moved = transferred[{operand.get(), to}];
      if (!moved) {
        builder.setInsertionPointAfter(producer);
        auto transfer = builder.create<TransferOp>(
            operand.get().getLoc(), operand.get().getType(), operand.get(),
            builder.getStringAttr(axis), builder.getI64IntegerAttr(from),
            builder.getI64IntegerAttr(to));
        transfer->setAttr(kForwardAttr, builder.getUnitAttr());
        moved = transfer.getY();
      }
      operand.set(moved);
    }
  }
}

LogicalResult Partitioner::run(StringRef balance) {
  findUnits();
  if (balance == "layers") {
    bounds = splitLayers(numLayers, numStages);
  } else {
    // Forward flops per unit; the backward is about twice the forward
    // for every unit alike, so the forward alone picks the same split.
    std::vector<double> layerCost(numLayers, 0.0);
    double firstCost = 0.0, lastCost = 0.0;
    for (auto [op, unit] : unitOf) {
      auto cost = dyn_cast<CostOpInterface>(op);
      double flops = cost ? static_cast<double>(cost.getFlops()) : 0.0;
      if (unit < 0)
        firstCost += flops;
      else if (unit >= numLayers)
        lastCost += flops;
      else
        layerCost[unit] += flops;
    }
    bounds = balanceLayers(layerCost, firstCost, lastCost, numStages);
  }
  OpBuilder builder(func.getContext());
  for (Operation &op : func.getBody().front().without_terminator()) {
    op.setAttr(kStageAttr,
               builder.getI64IntegerAttr(stageOfUnit(unitOf.lookup(&op))));
    op.setAttr(kForwardAttr, builder.getUnitAttr());
  }
  insertTransfers();
  routeSharedParams();
  return success();
}

struct PipelinePartitionPass
    : sharc::impl::PipelinePartitionBase<PipelinePartitionPass> {
  using PipelinePartitionBase::PipelinePartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t numStages = getMesh(module).getSize(axis);
    if (numStages <= 1)
      return;
    if (balance != "layers" && balance != "cost") {
      emitError(module.getLoc(),
                "pipeline balance must be layers or cost, got '")
          << balance << "'";
      return signalPassFailure();
    }
    // Each stage would clip by its own gradients' norm: the global norm
    // needs a sum over the stages first.
    if (auto optimizer = module->getAttrOfType<DictionaryAttr>(kOptimizerAttr))
      if (auto clip = optimizer.getAs<FloatAttr>("grad_clip");
          clip && clip.getValueAsDouble() > 0) {
        emitError(module.getLoc(), "grad_clip with ")
            << axis << " (" << numStages
            << ") is not supported yet: the global gradient norm would need "
               "a sum over the stages";
        return signalPassFailure();
      }
    ModelSizes sizes(module);
    int64_t numLayers = sizes.get("num_hidden_layers");
    if (numLayers < numStages) {
      emitError(sizes.loc("num_hidden_layers"))
          << axis << " (" << numStages
          << ") needs at least one layer per stage, got num_hidden_layers ("
          << numLayers << ")";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(Partitioner(func, axis, numStages, numLayers).run(balance)))
        return signalPassFailure();
  }
};

} // namespace
