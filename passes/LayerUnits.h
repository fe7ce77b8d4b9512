//===- LayerUnits.h - the model unit each forward op belongs to -*- C++ -*-===//
// defines: forwardUnits
//
// Pipeline partitioning cuts the forward between units, and full recompute
// re-runs one unit's forward in the backward; both need to know which unit
// an op computes. Units: the embedding (-1), a layer 0..L-1, the head (L:
// final norm, LM head, loss).
//
//   llvm::DenseMap<Operation *, int64_t> unit =
//       forwardUnits(func, forwardOps, sizes.get("num_hidden_layers"));
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>

namespace sharc {

/// The unit of each of `forwardOps` (in program order). A parameter's unit
/// comes from its name and role; an op's is the latest unit of what it
/// reads, so the residual stream moves to a layer's unit where the layer
/// starts; an op that reads no parameter nor unit op (a constant, a token
/// slice) takes its first unit user's among `forwardOps`, else -1.
llvm::DenseMap<mlir::Operation *, int64_t>
forwardUnits(mlir::func::FuncOp func,
             llvm::ArrayRef<mlir::Operation *> forwardOps, int64_t numLayers);

} // namespace sharc
