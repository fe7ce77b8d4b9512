//===- Validation.h - a sharded plan against the dense plan -----*- C++ -*-===//
// defines: ValidationOptions, TensorComparison, ValidationReport,
//          validateAgainstDense, formatReport
//
// Runs a sharded plan and the dense plan of the same model from the same
// initial weights (the counter-based init makes every shard the matching
// slice of the dense tensor) on the same tokens. After the first step it
// compares the loss, the logits and every parameter gradient (each gathered
// shard set against the dense tensor, the vocabulary padding left out);
// after `steps` AdamW steps it compares every parameter. Both plans must be
// compiled with --emit-logits --keep-grads.
//
//   auto report = validateAgainstDense(plan, densePlan, {});
//   std::printf("%s", formatReport(*report).c_str());
//   return report->passed ? 0 : 1;
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <string>
#include <vector>

namespace sharc::exec {

struct ValidationOptions {
  uint64_t seed = 42;
  int64_t steps = 5;
  /// Loss, logits and gradients after one step pass when
  /// max |error| <= gradientTolerance * max |dense|.
  double gradientTolerance = 1e-5;
  /// Parameters after `steps` pass when
  /// mean |error| <= parameterTolerance * mean |dense|. Not the maximum:
  /// Adam's first update is lr * g / (|g| + eps), nearly lr * sign(g), so
  /// fp32 noise in a near-zero gradient moves that one element by up to
  /// 2 lr; the mean shows drift without being hostage to those elements.
  double parameterTolerance = 1e-4;
};

struct TensorComparison {
  std::string name;
  double maxAbsError = 0, meanAbsError = 0, relativeL2 = 0;
  double referenceMaxAbs = 0, referenceMeanAbs = 0;
  bool passed = false;
};

struct ValidationReport {
  std::vector<TensorComparison> firstStep;  ///< loss, logits, grad:<param>
  std::vector<TensorComparison> afterSteps; ///< param:<param>
  bool passed = false;
};

Result<ValidationReport> validateAgainstDense(const plan::Plan &plan,
                                              const plan::Plan &densePlan,
                                              const ValidationOptions &options);

/// A table like the original's validation output, one row per tensor.
std::string formatReport(const ValidationReport &report);

} // namespace sharc::exec
