//===- SharcOps.h - operations of the sharc dialect -------------*- C++ -*-===//
// defines: the ops of SharcOps.td (EmbeddingOp, MatmulOp, ...), the
//          interfaces ShardingRuleOpInterface, VJPOpInterface and
//          CostOpInterface, attentionResultTypes, buildRingAttention
#pragma once

#include "ir/SharcAttrs.h"
#include "ir/SharcDialect.h"
#include "ir/ShardingRule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/SharcInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ir/SharcOps.h.inc"

namespace sharc {
/// `value`'s ranked tensor type (what every sharc op takes and returns).
mlir::RankedTensorType tensorOf(mlir::Value value);
/// Bytes of a tensor value at its local shape: elements times the element's
/// bytes (a sub-byte type rounded up to a byte). Collectives' traffic, the
/// planner's memory traffic, buckets and optimizer runs all count with it.
int64_t tensorBytes(mlir::Value value);

/// attention's and attention_block's results for q: out of q's type, lse
/// [B, Hq, S] f32 split where q's batch and heads are.
mlir::LogicalResult
attentionResultTypes(mlir::MLIRContext *context,
                     std::optional<mlir::Location> location, mlir::Type q,
                     int64_t headDim, llvm::SmallVectorImpl<mlir::Type> &types);
/// Ring attention of q's block on the numBlocks K/V blocks moving over `axis`
/// (SharcRingOps.td): the chain of ring_shift, attention_block and
/// lse_merge ops, built at the builder's insertion point; out and lse.
/// `balanced`: the axis splits the sequence balanced, so the blocks go
/// round the whole ring and attend by two chunks' positions.
llvm::SmallVector<mlir::Value>
buildRingAttention(mlir::OpBuilder &builder, mlir::Location loc, mlir::Value q,
                   mlir::Value k, mlir::Value v, int64_t headDim,
                   mlir::StringAttr axis, int64_t numBlocks, bool balanced);
} // namespace sharc
