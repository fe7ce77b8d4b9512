//===- ShardOptimizer.cpp - the optimizer state sharded over dp (ZeRO-1) --===//

#include "passes/OptimizerShards.h"

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "passes/ParameterStages.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace sharc {
#define GEN_PASS_DEF_SHARDOPTIMIZER
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;
using namespace sharc::placement;

int64_t sharc::optimizerShardDim(Type type, MeshAttr mesh) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!mesh || !tensor || !mesh.hasAxis(kOptimizerShardAxis))
    return -1;
  int64_t size = mesh.getSize(kOptimizerShardAxis);
  PlacementAttr placement = getPlacement(type);
  if (size < 2 || placement.getAxis(kOptimizerShardAxis) != kR)
    return -1;
  for (int64_t dim = 0; dim < tensor.getRank(); ++dim)
    if (axesSplitting(placement, dim, mesh).empty() &&
        tensor.getDimSize(dim) >= size && tensor.getDimSize(dim) % size == 0)
      return dim;
  return -1;
}

RankedTensorType sharc::optimizerShardType(Type type, int64_t dim,
                                           MeshAttr mesh) {
  auto tensor = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[dim] /= mesh.getSize(kOptimizerShardAxis);
  PlacementAttr placement =
      getPlacement(type).withAxis(kOptimizerShardAxis, dim);
  placement = withSplitOrder(placement, dim, placement.splitOrder(dim), mesh);
  return withPlacement(RankedTensorType::get(shape, tensor.getElementType()),
                       placement);
}

SmallVector<Value> sharc::syncedGradients(AllReduceOp sync) {
  Value synced = sync.getY();
  if (synced.hasOneUse())
    if (auto split = dyn_cast<SplitOp>(*synced.getUsers().begin());
        split && split.isView())
      return SmallVector<Value>(split.getYs());
  return {synced};
}

bool sharc::hasShardableUpdate(AllReduceOp sync, MeshAttr mesh) {
  if (sync.getAxis() != kOptimizerShardAxis || sync.getReduce() != "sum")
    return false;
  return llvm::all_of(syncedGradients(sync), [&](Value grad) {
    return optimizerShardDim(grad.getType(), mesh) >= 0;
  });
}

namespace {

/// One gradient a dp sync makes and the updates and norm that read it.
struct ShardedGradient {
  Value whole;   ///< the synced gradient (R on dp)
  Value partial; ///< this rank's share before the sync (P on dp)
  int64_t dim = -1;
};

class OptimizerSharder {
public:
  OptimizerSharder(func::FuncOp func) : func(func), mesh(getMesh(func)) {}

  LogicalResult run();

private:
  /// True when every reader of `grad` is an update of its parameter
  /// (whose moments are arguments read by nothing else) or the global
  /// norm: then the update may read a block instead.
  bool onlyUpdatesRead(Value grad) const;
  /// Replaces `sync` (and the split of its result) by one reduce_scatter
  /// per gradient and shards the updates that read them.
  void shard(AllReduceOp sync);
  void shardUpdate(AdamWOp update, Value block, int64_t dim);

  func::FuncOp func;
  MeshAttr mesh;
};

bool OptimizerSharder::onlyUpdatesRead(Value grad) const {
  return llvm::all_of(grad.getUses(), [&](OpOperand &use) {
    if (isa<SumSquaresOp>(use.getOwner()))
      return true;
    auto update = dyn_cast<AdamWOp>(use.getOwner());
    if (!update || use.get() != update.getGrad() ||
        update.getGrad() == update.getParam())
      return false;
    SmallVector<Value> state{update.getM(), update.getV()};
    if (update.getMaster())
      state.push_back(update.getMaster());
    return llvm::all_of(state, [](Value value) {
      return isa<BlockArgument>(value) && value.hasOneUse();
    });
  });
}

LogicalResult OptimizerSharder::run() {
  if (!parameterStages(func).empty())
    return func.emitOpError("sharc-shard-optimizer does not shard the "
                            "optimizer of pipeline stages");
  SmallVector<AllReduceOp> syncs;
  func.walk([&](AllReduceOp sync) {
    if (hasShardableUpdate(sync, mesh) &&
        llvm::all_of(syncedGradients(sync),
                     [&](Value grad) { return onlyUpdatesRead(grad); }))
      syncs.push_back(sync);
  });
  for (AllReduceOp sync : syncs)
    shard(sync);
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  func.setType(FunctionType::get(func.getContext(),
                                 func.getBody().getArgumentTypes(),
                                 returnOp.getOperandTypes()));
  return success();
}

void OptimizerSharder::shard(AllReduceOp sync) {
  // The syncs sharc-bucket-gradients leaves out still sit where autodiff
  // put them, after the whole backward: each reduce_scatter goes where its
  // gradient is ready instead, so that it runs beside the backward.
  OpBuilder builder(sync);
  if (Operation *producer = sync.getX().getDefiningOp())
    builder.setInsertionPointAfter(producer);
  else
    builder.setInsertionPointToStart(sync->getBlock());
  Location loc = sync.getLoc();
  SmallVector<Value> wholes = syncedGradients(sync);
  SmallVector<Value> partials{sync.getX()};
  SplitOp oldSplit;
  if (wholes.front() != sync.getY()) {
    // A fused weight's gradient: its pieces are split before the sync, so
    // that each parameter's block is cut from its own rows.
    oldSplit = cast<SplitOp>(wholes.front().getDefiningOp());
    PlacementAttr partial = getPlacement(sync.getX().getType());
    SmallVector<Type> types;
    for (Value piece : wholes)
      types.push_back(withPlacement(piece.getType(), partial));
    auto split = builder.create<SplitOp>(oldSplit.getLoc(), types, sync.getX(),
                                         oldSplit.getDimAttr());
    split->setDiscardableAttrs(oldSplit->getDiscardableAttrDictionary());
    partials.assign(split.getYs().begin(), split.getYs().end());
  }
  StringAttr axis = builder.getStringAttr(kOptimizerShardAxis);
  int64_t numRanks = mesh.getSize(kOptimizerShardAxis);
  for (auto [whole, partial] : llvm::zip(wholes, partials)) {
    int64_t dim = optimizerShardDim(whole.getType(), mesh);
    auto scatter = builder.create<ReduceScatterOp>(
        loc, optimizerShardType(whole.getType(), dim, mesh), partial, axis,
        builder.getI64IntegerAttr(dim));
    scatter->setDiscardableAttrs(sync->getDiscardableAttrDictionary());
    Value block = scatter.getY();
    for (OpOperand &use : llvm::make_early_inc_range(whole.getUses())) {
      Operation *reader = use.getOwner();
      if (auto norm = dyn_cast<SumSquaresOp>(reader)) {
        // The block is this rank's alone: it counts once, where the whole
        // counted once per dp rank holding it.
        SmallVector<int64_t> replicas(norm.getReplicas());
        replicas[use.getOperandNumber()] /= numRanks;
        norm.setReplicas(replicas);
        use.set(block);
      } else {
        shardUpdate(cast<AdamWOp>(reader), block, dim);
      }
    }
  }
  if (oldSplit)
    oldSplit.erase();
  sync.erase();
}

void OptimizerSharder::shardUpdate(AdamWOp update, Value block, int64_t dim) {
  OpBuilder builder(update);
  Location loc = update.getLoc();
  StringAttr axis = builder.getStringAttr(kOptimizerShardAxis);
  Value param = update.getParam();
  auto blockType = optimizerShardType(param.getType(), dim, mesh);
  auto slice = builder.create<SliceToRankOp>(loc, blockType, param, axis,
                                             builder.getI64IntegerAttr(dim));
  slice->setDiscardableAttrs(update->getDiscardableAttrDictionary());
  update.getParamMutable().assign(slice.getY());
  update.getGradMutable().assign(block);
  update.getNewParam().setType(blockType);
  // The moments (and master) are arguments the update alone reads: their
  // block is all a rank keeps from one step to the next.
  SmallVector<std::pair<Value, Value>> state{{update.getM(), update.getNewM()},
                                             {update.getV(), update.getNewV()}};
  if (update.getMaster())
    state.emplace_back(update.getMaster(), update.getNewMaster());
  for (auto [argument, updated] : state) {
    RankedTensorType type = optimizerShardType(argument.getType(), dim, mesh);
    argument.setType(type);
    updated.setType(type);
  }
  builder.setInsertionPointAfter(update);
  auto gather =
      builder.create<AllGatherOp>(loc, param.getType(), update.getNewParam(),
                                  axis, builder.getI64IntegerAttr(dim));
  gather->setDiscardableAttrs(update->getDiscardableAttrDictionary());
  update.getNewParam().replaceAllUsesExcept(gather.getY(), gather);
  // sharc-adamw placed the update after the sync, at the end of the
  // backward; without clipping (which waits for the global norm) it moves
  // up to where its block is ready and nothing else reads the parameter,
  // so that the block and the gradient die early.
  if (update.getGradNormSq())
    return;
  Operation *last = block.getDefiningOp();
  SmallVector<Value> readers{param};
  while (!readers.empty())
    for (Operation *user : readers.pop_back_val().getUsers()) {
      if (user == slice || isa<func::ReturnOp>(user))
        continue;
      if (last->isBeforeInBlock(user))
        last = user;
      if (auto concat = dyn_cast<ConcatOp>(user); concat && concat.isView())
        readers.push_back(concat.getY());
    }
  slice->moveAfter(last);
  update->moveAfter(slice);
  gather->moveAfter(update);
}

struct ShardOptimizerPass
    : sharc::impl::ShardOptimizerBase<ShardOptimizerPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(OptimizerSharder(func).run()))
        return signalPassFailure();
  }
};

} // namespace
