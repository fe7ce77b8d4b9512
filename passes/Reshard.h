//===- Reshard.h - one value from one placement to another ------*- C++ -*-===//
// defines: reshard
//
// The one conversion between placements that spmdize (and later context
// parallelism) uses: one collective per mesh axis whose code changes, each
// differentiable through its own VJP (all_gather <-> reduce_scatter or
// slice_to_rank, replicate <-> all_reduce, all_to_all <-> its inverse).
//
//   FailureOr<Value> y = reshard(builder, loc, x, target, getMesh(module));
#pragma once

#include "ir/SharcAttrs.h"

#include "mlir/IR/Builders.h"

namespace sharc {

/// Brings `value` to `target` at the builder's insertion point: first one
/// all_reduce over every axis a sum ends on, when there are several; then,
/// axis by axis innermost first, the sums and replications that end
/// (all_reduce, replicate) and every split not where the target wants it:
/// the axes inside it on its dimension go first, then it moves by one
/// all_to_all when it lands where the target orders it (the target's
/// splits outside it on the new dimension are already there), else it is
/// gathered; then the target's missing splits of each dimension in its
/// order (reduce_scatter, slice_to_rank), each innermost. Honours stated
/// split orders (PlacementAttr's `order`). Emits an error at `loc` naming
/// the axis where no collective makes the change.
mlir::FailureOr<mlir::Value> reshard(mlir::OpBuilder &builder,
                                     mlir::Location loc, mlir::Value value,
                                     PlacementAttr target, MeshAttr mesh);

} // namespace sharc
