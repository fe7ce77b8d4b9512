//===- PipelinePartition.cpp - forward ops onto pipeline stages -----------===//
//
// Each forward op belongs to a unit: the embedding (-1), a layer 0..L-1 or
// the head (L), as passes/LayerUnits.h finds them. Units map to stages by a
// contiguous split of the layers.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/LayerUnits.h"
#include "passes/Layout.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "llvm/ADT/DenseMap.h"
#include <map>

namespace sharc {
#define GEN_PASS_DEF_PIPELINEPARTITION
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

class Partitioner {
public:
  Partitioner(func::FuncOp func, StringRef axis, int64_t numStages,
              int64_t numChunks, int64_t numLayers)
      : func(func), axis(axis), numStages(numStages), numChunks(numChunks),
        numVirtual(numStages * numChunks), numLayers(numLayers),
        builder(func.getContext()) {}
  LogicalResult run(StringRef balance);

private:
  void findUnits();
  int64_t stageOfUnit(int64_t unit) const;
  LogicalResult routeSharedParams();
  LogicalResult insertTransfers();
  /// Virtual stage v is chunk v / P of stage v % P (no chunks: v = stage).
  int64_t virtualStage(Operation *op) const {
    auto chunk = op->getAttrOfType<IntegerAttr>(kChunkAttr);
    return op->getAttrOfType<IntegerAttr>(kStageAttr).getInt() +
           (chunk ? chunk.getInt() * numStages : 0);
  }
  void setStage(Operation *op, int64_t virtualStage);
  FailureOr<Value> transfer(Value value, int64_t from, int64_t to);

  func::FuncOp func;
  StringRef axis;
  int64_t numStages, numChunks, numVirtual, numLayers;
  OpBuilder builder;
  llvm::DenseMap<Operation *, int64_t> unitOf;
  /// Virtual stage v: layers [bounds[v], bounds[v+1]).
  std::vector<int64_t> bounds;
};

void Partitioner::setStage(Operation *op, int64_t virtualStage) {
  op->setAttr(kStageAttr, builder.getI64IntegerAttr(virtualStage % numStages));
  if (numChunks > 1)
    op->setAttr(kChunkAttr,
                builder.getI64IntegerAttr(virtualStage / numStages));
}

/// `value` from virtual stage `from` to `to`, at the builder's place.
FailureOr<Value> Partitioner::transfer(Value value, int64_t from, int64_t to) {
  if (from % numStages == to % numStages)
    return emitError(value.getLoc())
           << "a value of virtual stage " << from << " is read on virtual "
           << "stage " << to << ", on the same " << axis << " rank";
  auto moved = builder.create<TransferOp>(
      value.getLoc(), value.getType(), value, builder.getStringAttr(axis),
      builder.getI64IntegerAttr(from % numStages),
      builder.getI64IntegerAttr(to % numStages));
  moved->setAttr(kForwardAttr, builder.getUnitAttr());
  if (numChunks > 1) {
    moved->setAttr(kFromChunkAttr, builder.getI64IntegerAttr(from / numStages));
    moved->setAttr(kToChunkAttr, builder.getI64IntegerAttr(to / numStages));
  }
  return moved.getY();
}

void Partitioner::findUnits() {
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front().without_terminator())
    ops.push_back(&op);
  unitOf = forwardUnits(func, ops, numLayers);
}

int64_t Partitioner::stageOfUnit(int64_t unit) const {
  if (unit < 0)
    return 0;
  if (unit >= numLayers)
    return numVirtual - 1;
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
LogicalResult Partitioner::routeSharedParams() {
  builder.setInsertionPointToStart(&func.getBody().front());
  for (BlockArgument arg : func.getArguments()) {
    if (getArgString(func, arg.getArgNumber(), kParamAttr).empty())
      continue;
    std::map<int64_t, SmallVector<OpOperand *>> usesOnStage;
    for (OpOperand &use : arg.getUses())
      if (use.getOwner()->hasAttr(kStageAttr))
        usesOnStage[virtualStage(use.getOwner())].push_back(&use);
    if (usesOnStage.size() < 2)
      continue;
    int64_t home = usesOnStage.begin()->first;
    for (auto &[stage, uses] : llvm::drop_begin(usesOnStage)) {
      FailureOr<Value> moved = transfer(arg, home, stage);
      if (failed(moved))
        return failure();
      for (OpOperand *use : uses)
        use->set(*moved);
    }
  }
  return success();
}

LogicalResult Partitioner::insertTransfers() {
  Block &body = func.getBody().front();
  // One transfer per value and destination stage, right after the value.
  llvm::DenseMap<std::pair<Value, int64_t>, Value> transferred;
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    int64_t to = virtualStage(op);
    for (OpOperand &operand : op->getOpOperands()) {
      Operation *producer = operand.get().getDefiningOp();
      if (!producer)
        continue;
      int64_t from = virtualStage(producer);
      if (from == to)
        continue;
      Value &moved = transferred[{operand.get(), to}];
      if (!moved) {
        builder.setInsertionPointAfter(producer);
        FailureOr<Value> made = transfer(operand.get(), from, to);
        if (failed(made))
          return failure();
        moved = *made;
      }
      operand.set(moved);
    }
  }
  return success();
}

LogicalResult Partitioner::run(StringRef balance) {
  findUnits();
  if (balance == "layers") {
    bounds = splitLayers(numLayers, numVirtual);
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
    bounds = balanceLayers(layerCost, firstCost, lastCost, numVirtual);
  }
  for (Operation &op : func.getBody().front().without_terminator()) {
    setStage(&op, stageOfUnit(unitOf.lookup(&op)));
    op.setAttr(kForwardAttr, builder.getUnitAttr());
  }
  if (failed(insertTransfers()))
    return failure();
  return routeSharedParams();
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
    if (chunks < 1) {
      emitError(module.getLoc(), "pipeline chunks must be positive, got ")
          << static_cast<int64_t>(chunks);
      return signalPassFailure();
    }
    // A second run would stage the transfers and add more: refused.
    WalkResult staged = module.walk([](Operation *op) {
      return op->hasAttr(kStageAttr) ? WalkResult::interrupt()
                                     : WalkResult::advance();
    });
    if (staged.wasInterrupted()) {
      emitError(module.getLoc(),
                "the program is already partitioned into pipeline stages "
                "(its ops carry ")
          << kStageAttr << ")";
      return signalPassFailure();
    }
    ModelSizes sizes(module);
    int64_t numLayers = sizes.get("num_hidden_layers");
    if (numLayers < numStages * chunks) {
      InFlightDiagnostic diag = emitError(sizes.loc("num_hidden_layers"))
                                << axis << " (" << numStages << ")";
      if (chunks > 1)
        diag << " x " << static_cast<int64_t>(chunks) << " chunks";
      diag << " needs at least one layer per "
           << (chunks > 1 ? "chunk" : "stage") << ", got num_hidden_layers ("
           << numLayers << ")";
      return signalPassFailure();
    }
    // Interleaving cycles P microbatches through each chunk in turn.
    int64_t numMicrobatches =
        std::max<int64_t>(sizes.get("num_microbatches"), 1);
    if (chunks > 1 && numMicrobatches % numStages != 0) {
      emitError(sizes.loc("num_microbatches"))
          << axis << " (" << numStages << ") must divide num_microbatches ("
          << numMicrobatches << ") for an interleaved schedule";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(Partitioner(func, axis, numStages, chunks, numLayers)
                     .run(balance)))
        return signalPassFailure();
  }
};

} // namespace
