//===- Passes.h - pass declarations and pipelines ---------------*- C++ -*-===//
// defines: createAutodiff, createAdamW (generated), registerSharcPasses,
//          PipelineOptions, buildPipeline
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace sharc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// What `sharc compile` asks of the pipeline.
struct PipelineOptions {
  bool withOptimizer = true; ///< add the AdamW update (else return grads)
};

/// Fills `pm` with the passes from the forward program to the train step.
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

} // namespace sharc
