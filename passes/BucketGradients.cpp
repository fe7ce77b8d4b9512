//===- BucketGradients.cpp - data-parallel gradient buckets ---------------===//

#include "ir/SharcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

namespace sharc {
#define GEN_PASS_DEF_BUCKETGRADIENTS
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

int64_t numBytes(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return type.getNumElements() * type.getElementTypeBitWidth() / 8;
}

/// The op after which `value` is ready (a block argument: the block start).
Operation *readyAfter(Value value) { return value.getDefiningOp(); }

void bucket(func::FuncOp func, int64_t bucketBytes) {
  SmallVector<AllReduceOp> syncs;
  func.walk([&](AllReduceOp op) {
    if (op.getAxis() == "dp" && op.getReduce() == "sum" &&
        getPlacement(op.getY().getType()).getDp() ==
            PlacementAttr::kReplicated &&
        readyAfter(op.getX()))
      syncs.push_back(op);
  });
  // In the order the backward makes the gradients ready.
  llvm::stable_sort(syncs, [](AllReduceOp a, AllReduceOp b) {
    return readyAfter(a.getX())->isBeforeInBlock(readyAfter(b.getX()));
  });
  SmallVector<SmallVector<AllReduceOp>> buckets;
  int64_t filled = 0;
  for (AllReduceOp sync : syncs) {
    int64_t bytes = numBytes(sync.getX());
    if (buckets.empty() || (filled + bytes > bucketBytes && filled > 0)) {
      buckets.emplace_back();
      filled = 0;
    }
    buckets.back().push_back(sync);
    filled += bytes;
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
        members.back().getLoc(), types, operands, builder.getStringAttr("dp"));
    for (auto [sync, result] : llvm::zip(members, coalesced.getYs())) {
      sync.getY().replaceAllUsesWith(result);
      sync.erase();
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
      bucket(func, bucketBytes);
  }
};

} // namespace
