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
/// all_reduce over every axis a sum ends on, when there are several; then
/// the axes that stop splitting, move a split or stop summing (all_gather
/// and all_to_all innermost axis first, so each moves contiguous blocks;
/// all_reduce; replicate); then the axes that start splitting
/// (reduce_scatter, slice_to_rank) outermost first. Emits an error at
/// `loc` naming the axis where no collective makes the change.
mlir::FailureOr<mlir::Value> reshard(mlir::OpBuilder &builder,
                                     mlir::Location loc, mlir::Value value,
                                     PlacementAttr target, MeshAttr mesh);

} // namespace sharc
