//===- BucketGradients.cpp - data-parallel gradient buckets ---------------===//

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "passes/OptimizerShards.h"
#include "passes/ParameterStages.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <tuple>

namespace sharc {
#define GEN_PASS_DEF_BUCKETGRADIENTS
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// The op after which `value` is ready (a block argument: the block start).
Operation *readyAfter(Value value) { return value.getDefiningOp(); }

/// The parameters whose gradients `sync`'s result leaves the step as
/// ("grad:NAME" outputs): directly, or through the split of a fused
/// gradient into its parameters' (sharc-fuse-projections).
SmallVector<StringRef> gradientsReturned(func::FuncOp func, AllReduceOp sync) {
  SmallVector<StringRef> names;
  auto collect = [&](Value value) {
    for (OpOperand &use : value.getUses()) {
      if (!isa<func::ReturnOp>(use.getOwner()))
        continue;
      StringRef output =
          getResultString(func, use.getOperandNumber(), kOutputAttr);
      if (output.consume_front("grad:"))
        names.push_back(output);
    }
  };
  collect(sync.getY());
  for (Operation *user : sync.getY().getUsers())
    if (auto split = dyn_cast<SplitOp>(user))
      for (Value piece : split->getResults())
        collect(piece);
  return names;
}

/// A gradient sync over dp (or over a group of axes with dp, "dp,cp" when
/// context parallelism also splits the tokens), or over cp alone, that can
/// join a bucket. The planner reduces a bucket in place, in one slab, so
/// the sync must be the gradient's only reader: another one would see the
/// sum instead of this rank's partial.
bool isBucketable(func::FuncOp func, AllReduceOp op) {
  SmallVector<StringRef> axes = splitAxes(op.getAxis());
  PlacementAttr synced = getPlacement(op.getY().getType());
  bool gradientSync =
      llvm::is_contained(axes, "dp") ||
      (llvm::is_contained(axes, "cp") && !gradientsReturned(func, op).empty());
  return gradientSync &&
         llvm::all_of(axes,
                      [&](StringRef axis) {
                        return synced.getAxis(axis) ==
                               PlacementAttr::kReplicated;
                      }) &&
         op.getReduce() == "sum" && readyAfter(op.getX()) &&
         op.getX().hasOneUse();
}

/// `stages`' entry (a stage or a chunk) for the first of a sync's returned
/// gradients it knows (each piece of a fused one is on the same), or -1.
int64_t stageOfGradient(ArrayRef<StringRef> gradients,
                        const llvm::StringMap<int64_t> &stages) {
  for (StringRef name : gradients)
    if (auto it = stages.find(name); it != stages.end())
      return it->second;
  return -1;
}

void bucket(func::FuncOp func, int64_t bucketBytes, bool leaveShardable) {
  SmallVector<AllReduceOp> syncs;
  MeshAttr mesh = getMesh(func);
  func.walk([&](AllReduceOp op) {
    // sharc-shard-optimizer reduce-scatters these one by one instead.
    if (leaveShardable && hasShardableUpdate(op, mesh))
      return;
    if (isBucketable(func, op))
      syncs.push_back(op);
  });
  // In the order the backward makes the gradients ready.
  llvm::stable_sort(syncs, [](AllReduceOp a, AllReduceOp b) {
    return readyAfter(a.getX())->isBeforeInBlock(readyAfter(b.getX()));
  });
  // One open bucket per element type, group of axes and pipeline stage,
  // as DDP's: a bucket becomes one slab that one collective call
  // reduces, a call takes one type over one group, and each stage runs
  // on its own ranks. Interleaved, per model chunk of the stage too: the
  // chunks are apart virtual stages, whose gradients are ready at
  // different steps and which no op may join.
  SmallVector<SmallVector<AllReduceOp>> buckets;
  struct OpenBucket {
    size_t index;
    int64_t numBytes;
  };
  using BucketKey = std::tuple<Type, Attribute, int64_t, int64_t>;
  llvm::DenseMap<BucketKey, OpenBucket> open;
  llvm::StringMap<int64_t> stages = parameterStages(func);
  llvm::StringMap<int64_t> chunks = parameterChunks(func);
  for (AllReduceOp sync : syncs) {
    SmallVector<StringRef> gradients = gradientsReturned(func, sync);
    BucketKey element{
        cast<RankedTensorType>(sync.getX().getType()).getElementType(),
        sync.getAxisAttr(), stageOfGradient(gradients, stages),
        stageOfGradient(gradients, chunks)};
    int64_t bytes = tensorBytes(sync.getX());
    auto it = open.find(element);
    if (it == open.end() || (it->second.numBytes + bytes > bucketBytes &&
                             it->second.numBytes > 0)) {
      buckets.emplace_back();
      it = open.insert_or_assign(element, OpenBucket{buckets.size() - 1, 0})
               .first;
    }
    buckets[it->second.index].push_back(sync);
    it->second.numBytes += bytes;
  }
  for (auto &members : buckets) {
    SmallVector<Value> operands;
    SmallVector<Type> types;
    for (AllReduceOp sync : members) {
      operands.push_back(sync.getX());
      types.push_back(sync.getY().getType());
    }
    OpBuilder builder(func.getContext());
    builder.setInsertionPointAfter(readyAfter(members.back().getX()));
    auto coalesced = builder.create<AllReduceCoalescedOp>(
        members.back().getLoc(), types, operands, members.back().getAxisAttr());
    for (auto [sync, result] : llvm::zip(members, coalesced.getYs())) {
      sync.getY().replaceAllUsesWith(result);
      sync.erase();
    }
    // A fused gradient's split into its parameters' gradients
    // (sharc-fuse-projections) follows the bucket that now syncs it.
    Operation *last = coalesced;
    for (Value result : coalesced.getYs())
      for (Operation *user : llvm::make_early_inc_range(result.getUsers()))
        if (isa<SplitOp>(user) && user->isBeforeInBlock(coalesced)) {
          user->moveAfter(last);
          last = user;
        }
  }
}

struct BucketGradientsPass
    : sharc::impl::BucketGradientsBase<BucketGradientsPass> {
  using BucketGradientsBase::BucketGradientsBase;
  void runOnOperation() override {
    if (bucketBytes < 1) {
      getOperation().emitError("bucket-bytes must be positive, got ")
          << bucketBytes;
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      bucket(func, bucketBytes, leaveShardable);
  }
};

} // namespace
