//===- RecomputeSearch.h - the fewest layers to re-run that fit -*- C++ -*-===//
// defines: RecomputeChoice, planDeviceBytes, compileWithinMemory
//
// `sharc compile --recompute auto --memory-limit-mib M`: full recompute
// trades about a fifth of the step for most of the activations, so the
// fastest plan that fits re-runs as few layers as it must. The search
// compiles the plan with the first N layers re-run (`--recompute full
// --recompute-layers N`) for N found by bisection between none and all,
// and keeps the smallest N whose plan a rank can hold in M.
//
//   RecomputeChoice choice;
//   auto plan = compileWithinMemory(context, options, 20480LL << 20, &choice);
//   // choice.layers of choice.numLayers re-run, choice.bytes a rank
#pragma once

#include "tools/sharc/CompileDriver.h"

#include <cstdint>
#include <string>
#include <variant>

namespace sharc {

/// What the search settled on, and the two ends it measured.
struct RecomputeChoice {
  int64_t numLayers = 0; ///< the model's
  int64_t layers = 0;    ///< re-run: the first `layers` layers
  int64_t bytes = 0;     ///< the chosen plan's, a rank (planDeviceBytes)
  int64_t noneBytes = 0, allBytes = 0; ///< no layer and every layer re-run
  int compiles = 0;
  /// "the first 5 of 8 layers re-run in the backward, 1349.0 MiB a rank
  /// within 1500 (none: 2370.3, all: 804.5; 5 compiles)".
  std::string describe(int64_t limitMiB) const;
};

/// What a rank of `plan` holds on a GPU: the plan's regions and the GPU
/// workspace (the memory report's total and workspace lines).
int64_t planDeviceBytes(const plan::Plan &plan);

/// Compiles `options` with the fewest layers re-run whose plan needs at
/// most `limitBytes` a rank (none if it fits as it is). A CompileError
/// (exit 2) when even re-running every layer needs more, naming both
/// sizes. `options.pipeline.recompute` is ignored; the schedule goes to
/// `schedule` as in compileModel.
std::variant<plan::Plan, CompileError>
compileWithinMemory(mlir::MLIRContext &context, CompileOptions options,
                    int64_t limitBytes, RecomputeChoice *choice,
                    PlanSchedule *schedule = nullptr);

} // namespace sharc
