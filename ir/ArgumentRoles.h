//===- ArgumentRoles.h - roles of arguments, results ------------*- C++ -*-===//
// defines: kParamAttr, kRoleAttr, kRole*, kPlacementAttr, kMeshAttr,
//          kSequenceParallelAttr, kVocabParallelAttr, kContextParallelAttr,
//          kBalancedAxisAttr,
//          kInputAttr, kStateAttr, kCacheAttr, kOutputAttr, kUpdateOfAttr,
//          kInitAttr, kInitStdAttr, kOptimizerAttr, kModelAttr, kStageAttr,
//          kChunkAttr, kFromChunkAttr, kToChunkAttr, getArgName, getResultName
//
// A train-step function says what each argument and result is through
// string attributes; passes and the planner look them up here.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace sharc {

inline constexpr llvm::StringLiteral kParamAttr = "sharc.param";
inline constexpr llvm::StringLiteral kInputAttr = "sharc.input";
inline constexpr llvm::StringLiteral kStateAttr = "sharc.state";
/// A key/value cache of generation (`sharc compile --decode`), named
/// layers.N.self_attn.k_cache or v_cache; the plan's cache region.
inline constexpr llvm::StringLiteral kCacheAttr = "sharc.cache";
inline constexpr llvm::StringLiteral kOutputAttr = "sharc.output";
inline constexpr llvm::StringLiteral kUpdateOfAttr = "sharc.update_of";
inline constexpr llvm::StringLiteral kInitAttr = "sharc.init";
inline constexpr llvm::StringLiteral kInitStdAttr = "sharc.init_std";
inline constexpr llvm::StringLiteral kOptimizerAttr = "sharc.optimizer";
inline constexpr llvm::StringLiteral kModelAttr = "sharc.model";
/// Where each size of kModelAttr was written (a dictionary of locations).
inline constexpr llvm::StringLiteral kModelLocsAttr = "sharc.model_locs";
/// What a parameter is to the sharding passes: one of the kRole* values.
inline constexpr llvm::StringLiteral kRoleAttr = "sharc.role";
inline constexpr llvm::StringLiteral kRoleColumn = "column"; // q k v gate up
inline constexpr llvm::StringLiteral kRoleRow = "row";       // o down
inline constexpr llvm::StringLiteral kRoleNorm = "norm";     // layer norms
inline constexpr llvm::StringLiteral kRoleHeadNorm = "head_norm"; // q/k norm
inline constexpr llvm::StringLiteral kRoleEmbedding = "embedding";
inline constexpr llvm::StringLiteral kRoleLmHead = "lm_head";
/// A parameter's or input's placement requested by the sharding passes (an
/// argument attribute, PlacementAttr), materialised by sharc-spmdize.
inline constexpr llvm::StringLiteral kPlacementAttr = "sharc.placement";
/// The device mesh, a module attribute #sharc.mesh<dp = N, tp = M>.
inline constexpr llvm::StringLiteral kMeshAttr = "sharc.mesh";
/// Module attributes requesting sequence parallelism (the name of the axis
/// whose ranks split the sequence between layers) and vocabulary
/// parallelism (a unit attribute).
inline constexpr llvm::StringLiteral kSequenceParallelAttr =
    "sharc.sequence_parallel";
inline constexpr llvm::StringLiteral kVocabParallelAttr =
    "sharc.vocab_parallel";
/// Module attribute requesting context parallelism: the exchange attention
/// uses on a sequence split ("a2a" or "all_gather").
inline constexpr llvm::StringLiteral kContextParallelAttr =
    "sharc.context_parallel";
/// Module attribute naming the mesh axis whose splits of the sequence
/// (dimension 0 of tokens, labels and activations) are balanced: the
/// sequence is cut into 2n chunks and coordinate r holds chunks r and
/// 2n-1-r (sharc-context-parallel{split=balanced}). Absent: contiguous.
inline constexpr llvm::StringLiteral kBalancedAxisAttr = "sharc.balanced_axis";
/// The pipeline stage an op runs on (i64, sharc-pipeline-partition and
/// -schedule); the planner writes it into the plan.
inline constexpr llvm::StringLiteral kStageAttr = "sharc.stage";
/// Marks what sharc-recompute runs again in the backward, by policy (a
/// string): "full" (a copy of a layer's forward op), "selective" (a cheap
/// op's copy) or "sp-allgather" (a column input's re-gather). The planner
/// defers no weight gradient past a "full" copy; selective copies are no
/// barrier: they are small and many, and stopping at each would cost the
/// overlap (MiniMind ddp: 6.48 against 6.10 ms predicted, for 25 MiB). The
/// report sums what all of them cost, and the plan carries the mark as the
/// instruction's `recompute` field.
inline constexpr llvm::StringLiteral kRecomputeAttr = "sharc.recompute";
/// Interleaved pipelines: the model chunk (i64) of an op on its stage, and
/// a transfer's chunks at either end; the virtual stage is
/// stage + chunk x (pipeline ranks).
inline constexpr llvm::StringLiteral kChunkAttr = "sharc.chunk";
inline constexpr llvm::StringLiteral kFromChunkAttr = "sharc.from_chunk";
inline constexpr llvm::StringLiteral kToChunkAttr = "sharc.to_chunk";

/// The string value of `attrName` on argument `index`, or "".
inline llvm::StringRef getArgString(mlir::func::FuncOp func, unsigned index,
                                    llvm::StringRef attrName) {
  if (auto attr = func.getArgAttrOfType<mlir::StringAttr>(index, attrName))
    return attr.getValue();
  return "";
}

/// The string value of `attrName` on result `index`, or "".
inline llvm::StringRef getResultString(mlir::func::FuncOp func, unsigned index,
                                       llvm::StringRef attrName) {
  if (auto attr = func.getResultAttrOfType<mlir::StringAttr>(index, attrName))
    return attr.getValue();
  return "";
}

/// Replaces the function's results: a new return of `results`, the result
/// attributes `attrs`, and the function type from the entry block's
/// arguments (which passes may have retyped or extended).
inline void setResults(mlir::func::FuncOp func, mlir::ValueRange results,
                       llvm::ArrayRef<mlir::DictionaryAttr> attrs) {
  mlir::Block &body = func.getBody().front();
  mlir::Operation *oldReturn = body.getTerminator();
  mlir::OpBuilder builder(oldReturn);
  builder.create<mlir::func::ReturnOp>(oldReturn->getLoc(), results);
  oldReturn->erase();
  func.setType(
      builder.getFunctionType(body.getArgumentTypes(), results.getTypes()));
  func.setAllResultAttrs(attrs);
}

} // namespace sharc
