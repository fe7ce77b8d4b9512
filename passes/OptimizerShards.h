//===- OptimizerShards.h - where ZeRO-1 cuts an update ----------*- C++ -*-===//
// defines: optimizerShardDim, optimizerShardType, syncedGradients,
//          hasShardableUpdate
//
// Under sharc-shard-optimizer (ZeRO-1) each data-parallel rank updates one
// block of every parameter its dp ranks hold alike: the gradient is
// reduce-scattered instead of all-reduced, the moments (and the bf16-mixed
// master) are kept for that block alone, and the updated blocks are
// gathered back. sharc-bucket-gradients leaves those gradients' syncs out of
// its buckets, so both passes ask these helpers which gradients qualify.
//
//   int64_t dim = optimizerShardDim(grad.getType(), mesh);  // -1: none
#pragma once

#include "ir/SharcAttrs.h"
#include "ir/SharcOps.h"

#include "mlir/IR/BuiltinTypes.h"

namespace sharc {

/// The axis the optimizer state is sharded over.
inline constexpr llvm::StringLiteral kOptimizerShardAxis = "dp";

/// The dimension of a value of `type` (a parameter or its synced gradient,
/// replicated on dp) that ZeRO-1 splits over dp: 0, where dp divides the
/// rank's extent (inside any other axis' split of it); -1 when the value
/// is not replicated on dp or dim 0 does not qualify (it keeps a whole
/// update).
int64_t optimizerShardDim(mlir::Type type, MeshAttr mesh);

/// `type` with dimension `dim` split over dp (S(dim) there, the extent
/// divided): a parameter's block, and the type of its moments.
mlir::RankedTensorType optimizerShardType(mlir::Type type, int64_t dim,
                                          MeshAttr mesh);

/// The gradients a sync makes: its result, or the pieces of the dim-0
/// split that is its only reader (a fused weight's gradient,
/// sharc-fuse-projections).
llvm::SmallVector<mlir::Value> syncedGradients(AllReduceOp sync);

/// True when `sync` sums over dp alone and each gradient it makes has an
/// optimizerShardDim: its updates can run on blocks.
bool hasShardableUpdate(AllReduceOp sync, MeshAttr mesh);

} // namespace sharc
