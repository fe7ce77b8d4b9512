//===- Pipelines.cpp - the pass pipelines of sharc compile ------------------===//

#include "passes/Passes.h"

using namespace mlir;

void sharc::buildPipeline(OpPassManager &pm, const PipelineOptions &options) {
  pm.addPass(createAutodiff());
  if (options.withOptimizer)
    pm.addPass(createAdamW());
}
