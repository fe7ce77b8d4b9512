//===- ParameterStages.h - the pipeline stage of each parameter -*- C++ -*-===//
// defines: parameterStages, parameterChunks, pipelineAxis
//
// Passes that run between sharc-pipeline-partition and -schedule (bucketing,
// the optimizer) see stages only on forward ops; a parameter's is that of
// the forward ops that read it, which is where its gradient, its update and
// anything made from them must run.
//
//   llvm::StringMap<int64_t> stages = parameterStages(func);
//   int64_t stage = stages.lookup("layers.0.attn.q_proj.weight");
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

namespace sharc {

/// Each parameter's pipeline stage by name, from the first staged op that
/// reads it (through the views of a fused weight, sharc-fuse-projections);
/// empty when no op carries a stage. A tied embedding read by the first
/// stage and transferred to the last is the first stage's.
llvm::StringMap<int64_t> parameterStages(mlir::func::FuncOp func);

/// Each parameter's model chunk on its stage (interleaved schedule; 0
/// without chunks) by name, from the same reader as parameterStages.
llvm::StringMap<int64_t> parameterChunks(mlir::func::FuncOp func);

/// The mesh axis the stages' transfers move over, "" without transfers.
llvm::StringRef pipelineAxis(mlir::func::FuncOp func);

} // namespace sharc
