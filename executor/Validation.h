//===- Validation.h - a sharded plan against the dense plan -----*- C++ -*-===//
// defines: ValidationOptions, TensorComparison, ValidationReport,
//          validateAgainstDense, formatReport
//
// Runs a sharded plan and the dense plan of the same model (or one plan on
// two backends: the same plan as its own reference, on the cpu) from the same
// initial weights (the counter-based init makes every shard the matching
// slice of the dense tensor) on the same tokens. After the first step it
// compares the loss, the logits and every parameter gradient (each gathered
// shard set against the dense tensor, the vocabulary padding left out);
// after `steps` AdamW steps it compares every parameter. Both plans are
// compiled with --emit-logits --keep-grads, or both without gradients (a
// ZeRO-1 plan updates from blocks of them): then the optimizer's moments
// are compared after the steps as well.
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
  /// Where the plan under test and the reference plan run ("cpu", "cuda").
  std::string backend = "cpu";
  std::string referenceBackend = "cpu";
  /// The plan under test on cuda with more ranks than GPUs
  /// (BackendOptions::shareGpus).
  bool shareGpus = false;
  /// Loss, logits and gradients after one step pass when
  /// max |error| <= gradientTolerance * max |dense|.
  double gradientTolerance = 1e-5;
  /// Parameters after `steps` pass when
  /// mean |error| <= parameterTolerance * mean |dense|. Not the maximum:
  /// Adam's first update is lr * g / (|g| + eps), nearly lr * sign(g), so
  /// fp32 noise in a near-zero gradient moves that one element by up to
  /// 2 lr; the mean shows drift without being hostage to those elements.
  double parameterTolerance = 1e-4;
  /// When either plan stores bf16 parameters, results differ by rounding
  /// alone (a bf16 element holds 8 significant bits, and two backends or
  /// layouts sum in different orders): loss, logits and gradients then
  /// pass on relative L2 error <= bf16GradientTolerance, parameters on
  /// mean |error| <= bf16ParameterTolerance * mean |reference|. The bound
  /// is bf16's own noise: on models/minimind.yaml (8 layers) the cpu's bf16
  /// gradients of q_norm and k_norm differ from its f32 ones by relative L2
  /// 3.7e-2, so two bf16 runs that round differently differ by about
  /// sqrt(2) times that. Exactness is what the f32 plans check.
  double bf16GradientTolerance = 6e-2;
  double bf16ParameterTolerance = 1e-2;
  /// AdamW's moments after `steps` (compared where no gradients come out:
  /// a ZeRO-1 plan) pass when mean |error| <= stateTolerance *
  /// mean |reference|. A moment averages the steps' gradients, and after
  /// the first step those follow parameters that Adam's fp32 noise moved
  /// apart: the same f32 ZeRO-1 plans on an H200 and on the cpu differ by
  /// 1.1e-4 to 1.7e-4 (three steps), one block or one replica count wrong
  /// by O(1). Under bf16 the gradients' own bound (relative L2 there; the
  /// same plans differ by up to 3.2e-2).
  double stateTolerance = 1e-3;
  double bf16StateTolerance = 6e-2;
};

struct TensorComparison {
  std::string name;
  double maxAbsError = 0, meanAbsError = 0, relativeL2 = 0;
  double referenceMaxAbs = 0, referenceMeanAbs = 0;
  bool passed = false;
};

struct ValidationReport {
  std::string backend;                     ///< where the plan under test ran
  std::vector<TensorComparison> firstStep; ///< loss, logits, grad:<param>
  /// param:<param>; and state:<param>.exp_avg(_sq) where no gradients
  /// were compared.
  std::vector<TensorComparison> afterSteps;
  bool passed = false;
};

Result<ValidationReport> validateAgainstDense(const plan::Plan &plan,
                                              const plan::Plan &densePlan,
                                              const ValidationOptions &options);

/// A table like the original's validation output, one row per tensor.
std::string formatReport(const ValidationReport &report);

} // namespace sharc::exec
