//===- Validation.cpp - a sharded plan against the dense plan -------------===//

#include "executor/Validation.h"

#include "executor/Runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

using namespace sharc;
using namespace sharc::exec;

namespace {

/// The elements of `actual` (possibly padded on some dimensions) that
/// correspond to the dense `expected`, in expected's row-major order.
Result<std::vector<double>> cropTo(const plan::NamedTensor &actual,
                                   const plan::NamedTensor &expected) {
  if (actual.shape.size() != expected.shape.size())
    return Status::runtimeError(actual.name + ": rank " +
                                std::to_string(actual.shape.size()) +
                                " differs from the dense rank " +
                                std::to_string(expected.shape.size()));
  for (size_t d = 0; d < actual.shape.size(); ++d)
    if (actual.shape[d] < expected.shape[d])
      return Status::runtimeError(actual.name + ": dimension " +
                                  std::to_string(d) +
                                  " is smaller than the dense one");
  std::vector<double> values = plan::tensorAsDoubles(actual);
  std::vector<double> cropped;
  int64_t count = 1;
  for (int64_t extent : expected.shape)
    count *= extent;
  cropped.reserve(count);
  std::vector<int64_t> index(expected.shape.size(), 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < index.size(); ++d)
      offset = offset * actual.shape[d] + index[d];
    cropped.push_back(values[offset]);
    for (int64_t d = static_cast<int64_t>(index.size()) - 1; d >= 0; --d) {
      if (++index[d] < expected.shape[d])
        break;
      index[d] = 0;
    }
  }
  return cropped;
}

enum class Criterion { MaxAbs, MeanAbs, RelativeL2 };

TensorComparison compare(const std::string &name,
                         const std::vector<double> &actual,
                         const std::vector<double> &expected, double tolerance,
                         Criterion criterion) {
  TensorComparison result;
  result.name = name;
  double errorSquares = 0, referenceSquares = 0, errorSum = 0, referenceSum = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    double error = std::fabs(actual[i] - expected[i]);
    result.maxAbsError = std::max(result.maxAbsError, error);
    result.referenceMaxAbs =
        std::max(result.referenceMaxAbs, std::fabs(expected[i]));
    errorSum += error;
    referenceSum += std::fabs(expected[i]);
    errorSquares += error * error;
    referenceSquares += expected[i] * expected[i];
  }
  if (!expected.empty()) {
    result.meanAbsError = errorSum / static_cast<double>(expected.size());
    result.referenceMeanAbs =
        referenceSum / static_cast<double>(expected.size());
  }
  result.relativeL2 =
      std::sqrt(errorSquares) / (std::sqrt(referenceSquares) + 1e-12);
  // A tensor that is exactly zero in the dense run must be zero here too.
  bool withinTolerance = false;
  switch (criterion) {
  case Criterion::MaxAbs:
    withinTolerance = result.maxAbsError <= tolerance * result.referenceMaxAbs;
    break;
  case Criterion::MeanAbs:
    withinTolerance =
        result.meanAbsError <= tolerance * result.referenceMeanAbs;
    break;
  case Criterion::RelativeL2:
    // An exactly-zero reference must be matched exactly.
    withinTolerance = referenceSquares == 0 ? errorSquares == 0
                                            : result.relativeL2 <= tolerance;
    break;
  }
  result.passed = std::isfinite(result.maxAbsError) && withinTolerance;
  return result;
}

Result<TensorComparison> compareOutputs(const Runtime &sharded,
                                        const Runtime &dense,
                                        const std::string &name,
                                        double tolerance, Criterion criterion) {
  auto actual = sharded.gatherOutput(name);
  if (!actual.isOk())
    return actual.status();
  auto expected = dense.gatherOutput(name);
  if (!expected.isOk())
    return expected.status();
  auto cropped = cropTo(*actual, *expected);
  if (!cropped.isOk())
    return cropped.status();
  return compare(name, *cropped, plan::tensorAsDoubles(*expected), tolerance,
                 criterion);
}

Result<std::unique_ptr<Runtime>>
startRuntime(const plan::Plan &plan, const std::string &backend, uint64_t seed,
             const std::vector<int32_t> &tokens, bool shareGpus = false) {
  RunOptions options;
  options.backend = backend;
  options.shareGpus = shareGpus;
  options.poisonActivations = true;
  options.checkHazards = true;
  auto runtime = Runtime::create(plan, options);
  if (!runtime.isOk())
    return runtime.status();
  SHARC_TRY((*runtime)->initParams(seed));
  SHARC_TRY((*runtime)->setBatch(tokens));
  return std::move(runtime.value());
}

bool storesBf16(const plan::Plan &plan) {
  for (const plan::ParamEntry &param : plan.params)
    if (plan.buffers[param.buffer].dtype == DType::BF16)
      return true;
  return false;
}

/// One mean-error row a tensor of `reference` (parameters or moments after
/// the steps), named `prefix` + its name, against `actual`'s tensor of the
/// same name, the vocabulary padding cropped off.
Status compareAfterSteps(const Result<plan::TensorFile> &actual,
                         const Result<plan::TensorFile> &reference,
                         const std::string &prefix, const std::string &what,
                         double tolerance,
                         std::vector<TensorComparison> &rows) {
  if (!actual.isOk())
    return actual.status();
  if (!reference.isOk())
    return reference.status();
  for (const plan::NamedTensor &expected : reference->tensors) {
    const plan::NamedTensor *found = actual->find(expected.name);
    if (!found)
      return Status::runtimeError("the sharded plan has no " + what + " '" +
                                  expected.name + "'");
    auto cropped = cropTo(*found, expected);
    if (!cropped.isOk())
      return cropped.status();
    rows.push_back(compare(prefix + expected.name, *cropped,
                           plan::tensorAsDoubles(expected), tolerance,
                           Criterion::MeanAbs));
  }
  return Status::ok();
}

} // namespace

Result<ValidationReport>
sharc::exec::validateAgainstDense(const plan::Plan &plan,
                                  const plan::Plan &densePlan,
                                  const ValidationOptions &options) {
  if (plan.seqLen != densePlan.seqLen || plan.batchSize != densePlan.batchSize)
    return Status::invalidInput(
        "the plans differ in sequence length or batch size");
  // A microbatched plan has no logits output (sharc-microbatch): then the
  // loss and gradients are compared without them.
  bool withLogits = plan.findOutput("logits") && densePlan.findOutput("logits");
  // Plans that return no gradients (a ZeRO-1 plan updates from blocks of
  // them; or compiled without --keep-grads) compare the optimizer's
  // moments after the steps instead.
  auto countGrads = [&](const plan::Plan &which) {
    int64_t count = 0;
    for (const plan::ParamEntry &param : densePlan.params)
      count += param.tiedTo.empty() && which.findOutput("grad:" + param.name);
    return count;
  };
  int64_t numGrads = 0;
  for (const plan::ParamEntry &param : densePlan.params)
    numGrads += param.tiedTo.empty();
  bool withGrads = countGrads(plan) == numGrads &&
                   countGrads(densePlan) == numGrads && numGrads > 0;
  bool withoutGrads = countGrads(plan) == 0 && countGrads(densePlan) == 0;
  if ((!withGrads && !withoutGrads) ||
      (!withLogits &&
       (plan.findOutput("logits") || densePlan.findOutput("logits"))))
    return Status::invalidInput(
        "both plans need the same outputs: the logits (--emit-logits) and "
        "every gradient (--keep-grads), or no gradient in either (then the "
        "moments are compared); a plan of several microbatches has no "
        "logits, so neither may have them");

  std::mt19937_64 rng(options.seed + 1);
  std::vector<int32_t> tokens(plan.batchSize * plan.seqLen);
  for (int32_t &id : tokens)
    id = static_cast<int32_t>(rng() % static_cast<uint64_t>(plan.vocabSize));

  auto sharded = startRuntime(plan, options.backend, options.seed, tokens,
                              options.shareGpus);
  if (!sharded.isOk())
    return sharded.status().withContext("sharded plan");
  auto dense =
      startRuntime(densePlan, options.referenceBackend, options.seed, tokens);
  bool bf16 = storesBf16(plan) || storesBf16(densePlan);
  Criterion firstStepCriterion =
      bf16 ? Criterion::RelativeL2 : Criterion::MaxAbs;
  double gradientTolerance =
      bf16 ? options.bf16GradientTolerance : options.gradientTolerance;
  double parameterTolerance =
      bf16 ? options.bf16ParameterTolerance : options.parameterTolerance;
  if (!dense.isOk())
    return dense.status().withContext("dense plan");

  ValidationReport report;
  report.backend = (*sharded)->backendName();
  for (int64_t step = 1; step <= options.steps; ++step) {
    auto shardedStep = (*sharded)->step();
    if (!shardedStep.isOk())
      return shardedStep.status().withContext("sharded plan");
    auto denseStep = (*dense)->step();
    if (!denseStep.isOk())
      return denseStep.status().withContext("dense plan");
    if (step != 1)
      continue;
    std::vector<std::string> names{"loss"};
    if (withLogits)
      names.push_back("logits");
    for (const plan::ParamEntry &param : densePlan.params)
      if (param.tiedTo.empty() && withGrads)
        names.push_back("grad:" + param.name);
    // Plans that clip: the global gradient norm, each parameter once.
    if (plan.findOutput("grad_norm_sq") && densePlan.findOutput("grad_norm_sq"))
      names.push_back("grad_norm_sq");
    for (const std::string &name : names) {
      auto comparison = compareOutputs(**sharded, **dense, name,
                                       gradientTolerance, firstStepCriterion);
      if (!comparison.isOk())
        return comparison.status();
      report.firstStep.push_back(*comparison);
    }
  }

  SHARC_TRY(compareAfterSteps((*sharded)->gatherParams(),
                              (*dense)->gatherParams(), "param:", "parameter",
                              parameterTolerance, report.afterSteps));
  if (withoutGrads)
    SHARC_TRY(compareAfterSteps(
        (*sharded)->gatherOptimizerState(), (*dense)->gatherOptimizerState(),
        "state:", "optimizer state",
        bf16 ? options.bf16StateTolerance : options.stateTolerance,
        report.afterSteps));

  report.passed = true;
  for (const auto *group : {&report.firstStep, &report.afterSteps})
    for (const TensorComparison &comparison : *group)
      report.passed &= comparison.passed;
  return report;
}

std::string sharc::exec::formatReport(const ValidationReport &report) {
  std::string text;
  char line[256];
  auto section = [&](const char *title,
                     const std::vector<TensorComparison> &rows) {
    text += title;
    std::snprintf(line, sizeof(line), "  %-44s %10s %10s %10s %10s %10s\n",
                  "tensor", "max|err|", "mean|err|", "rel L2", "max|ref|",
                  "mean|ref|");
    text += line;
    for (const TensorComparison &row : rows) {
      std::snprintf(line, sizeof(line),
                    "  %-44s %10.3e %10.3e %10.3e %10.3e %10.3e%s\n",
                    row.name.c_str(), row.maxAbsError, row.meanAbsError,
                    row.relativeL2, row.referenceMaxAbs, row.referenceMeanAbs,
                    row.passed ? "" : "  FAIL");
      text += line;
    }
  };
  bool withLogits =
      std::any_of(report.firstStep.begin(), report.firstStep.end(),
                  [](const TensorComparison &c) { return c.name == "logits"; });
  bool withGrads = std::any_of(
      report.firstStep.begin(), report.firstStep.end(),
      [](const TensorComparison &c) { return c.name.rfind("grad:", 0) == 0; });
  section(withLogits && withGrads ? "after step 1 (loss, logits, gradients):\n"
          : withLogits            ? "after step 1 (loss, logits; no gradients "
                                    "returned):\n"
                       : "after step 1 (loss, gradients; microbatched: no "
                         "logits):\n",
          report.firstStep);
  section(withGrads ? "after the AdamW steps (parameters):\n"
                    : "after the AdamW steps (parameters, moments):\n",
          report.afterSteps);
  text += report.passed ? "validation passed\n" : "validation FAILED\n";
  return text;
}
