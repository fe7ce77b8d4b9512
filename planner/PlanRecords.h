//===- PlanRecords.h - plan records of IR values and ops --------*- C++ -*-===//
// defines: dtypeOf, globalLayout, pipelineStages,
//          stageOfValue, locationString, instructionAttrs, slabRegion,
//          memberName, parameterGradients, columnCopies
//
// What PlanEmitter writes for one value or op: its element type, global
// layout, location and attributes; where a gradient bucket's slab goes and
// what its members are called; and the column copies of a concat or split.
#pragma once

#include "ir/SharcOps.h"
#include "planner/plan/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sharc {

mlir::FailureOr<DType> dtypeOf(mlir::Type type, mlir::Location loc);

/// Each op's pipeline stage on a mesh with a pp axis of more than one rank
/// (an op without one is an error); empty without such an axis.
mlir::FailureOr<std::vector<int64_t>>
pipelineStages(llvm::ArrayRef<mlir::Operation *> ops, MeshAttr mesh);

/// The pipeline stage that holds `value`: its producer's, or for an
/// argument the one stage that reads it; -1 when every stage does.
int64_t stageOfValue(mlir::Value value);

/// The plan's sharding and global shape of a value with local `type`; a
/// split of dimension 0 (the sequence) over `balancedAxis` (the module's
/// sharc.balanced_axis) is the balanced one.
std::pair<plan::Sharding, std::vector<int64_t>>
globalLayout(mlir::Type type, MeshAttr mesh, llvm::StringRef balancedAxis);

/// "file:line:col" of the first file location in `loc`, or "".
std::string locationString(mlir::Location loc);

/// Converts the op's attributes to plan attributes, adding what a kernel
/// needs that the IR keeps in types (rms_norm's group size).
std::map<std::string, plan::AttrValue> instructionAttrs(mlir::Operation *op);

/// Where a bucket's slab goes, or nothing when the bucket keeps separate
/// operands and results; `outputBases` are values whose views are outputs.
std::optional<plan::Region>
slabRegion(AllReduceCoalescedOp bucket, mlir::Operation *returnOp,
           const llvm::DenseSet<mlir::Value> &outputBases);

/// A readable name for a bucket member or a fused gradient's piece.
std::string memberName(mlir::func::FuncOp func, mlir::Value result,
                       mlir::Operation *returnOp, const std::string &fallback);

/// The parameter gradients and the partial gradients they are made from.
llvm::DenseSet<mlir::Value>
parameterGradients(llvm::ArrayRef<mlir::Operation *> ops);

/// A concat or split along the last dimension: one column_insert or
/// column_slice per piece, `instr`'s waits on the first, its signals on the
/// last.
std::vector<plan::Instruction>
columnCopies(mlir::Operation *op, const plan::Instruction &instr,
             const llvm::DenseMap<mlir::Value, int64_t> &bufferOf);

} // namespace sharc
