//===- RecomputeSearch.cpp - the least re-run work that fits --------------===//

#include "tools/sharc/RecomputeSearch.h"
#include "ir/frontend/ModelConfig.h"
#include "planner/MemoryReport.h"
#include "planner/plan/DeviceWorkspace.h"

#include <cstdio>
#include <string>
#include <tuple>
#include <utility>

using namespace sharc;

int64_t sharc::planDeviceBytes(const plan::Plan &plan) {
  MemoryReport report = buildMemoryReport(plan);
  return report.totalBytes + report.workspaceBytes;
}

std::string sharc::applyRecomputeFlags(const std::string &policy,
                                       std::optional<int64_t> layers,
                                       const std::string &rest,
                                       std::optional<int64_t> memoryLimitMiB,
                                       PipelineOptions &pipeline) {
  if (!policy.empty()) {
    if (policy != "none" && policy != "sp-allgather" && policy != "full" &&
        policy != "selective" && policy != "auto")
      return "unknown recompute policy '" + policy +
             "' (expected none, sp-allgather, selective, full or auto)";
    // auto leaves the mode's policy for the search's first step.
    if (policy != "auto")
      pipeline.recompute = policy;
  }
  if (layers && pipeline.recompute != "full" &&
      pipeline.recompute != "selective")
    return "--recompute-layers N limits --recompute full or selective to the "
           "first N layers; it needs one";
  pipeline.recomputeLayers = layers.value_or(-1);
  if (!rest.empty()) {
    if (rest != "none" && rest != "selective")
      return "--recompute-rest takes none or selective, not '" + rest + "'";
    if (pipeline.recompute != "full" || !layers)
      return "--recompute-rest " + rest +
             " says what the layers past --recompute full --recompute-layers "
             "N re-run; it needs both";
    pipeline.recomputeRest = rest;
  }
  if (memoryLimitMiB && policy != "auto")
    return "--memory-limit-mib MIB is the memory --recompute auto fits a "
           "rank's plan in; it needs --recompute auto";
  return "";
}

int64_t sharc::machineLimitBytes(const Machine &machine) {
  int64_t bytes = static_cast<int64_t>(machine.gpuMemoryBytes) -
                  plan::kCudaContextBytes - plan::kCudaRankReserveBytes;
  return machine.gpuMemoryBytes > 0 && bytes > 0 ? bytes : 0;
}

std::string sharc::machineLimitSource(const Machine &machine) {
  char text[192];
  std::snprintf(
      text, sizeof text,
      "%s's gpu_memory, %.0f MiB, less %lld for the CUDA context, "
      "NCCL and the libraries",
      machine.name.c_str(), machine.gpuMemoryBytes / (1 << 20),
      static_cast<long long>(
          (plan::kCudaContextBytes + plan::kCudaRankReserveBytes) >> 20));
  return text;
}

std::pair<int64_t, std::string>
sharc::recomputeLimit(std::optional<int64_t> limitMiB, const Machine &machine) {
  if (limitMiB)
    return {*limitMiB << 20, std::to_string(*limitMiB)};
  int64_t bytes = machineLimitBytes(machine);
  return {bytes, std::to_string(bytes >> 20) + " (" +
                     machineLimitSource(machine) + ")"};
}

namespace {

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB",
                static_cast<double>(bytes) / (1 << 20));
  return text;
}

/// Step `step` of the chain (RecomputeSearch.h): the layers it re-runs
/// whole, then the layers whose cheap ops it re-runs.
std::pair<int64_t, int64_t> stepLayers(int64_t step, int64_t numLayers) {
  if (step <= numLayers)
    return {0, step};
  return {step - numLayers, 2 * numLayers - step};
}

/// The pipeline options of re-running `full` layers whole and the next
/// `selective` selectively; nothing re-run is `baseline`, the layout's own
/// policy. RecomputeChoice::flags says the same as flags.
void setLayers(int64_t full, int64_t selective, const std::string &baseline,
               PipelineOptions &pipeline) {
  pipeline.recompute = full > 0        ? "full"
                       : selective > 0 ? "selective"
                                       : baseline;
  pipeline.recomputeLayers = full > 0 ? full : selective > 0 ? selective : -1;
  pipeline.recomputeRest = full > 0 && selective > 0 ? "selective" : "none";
}

} // namespace

std::string RecomputeChoice::flags() const {
  std::string n = std::to_string(fullLayers ? fullLayers : selectiveLayers);
  if (fullLayers == numLayers)
    return "--recompute full";
  if (fullLayers > 0)
    return "--recompute full --recompute-layers " + n +
           " --recompute-rest selective";
  if (selectiveLayers == numLayers)
    return "--recompute selective";
  if (selectiveLayers > 0)
    return "--recompute selective --recompute-layers " + n;
  return "--recompute " + baseline;
}

std::string RecomputeChoice::describe(const std::string &limit) const {
  std::string what;
  auto of = [&](int64_t n) {
    return "the first " + std::to_string(n) + " of " +
           std::to_string(numLayers) + " layers";
  };
  if (fullLayers == numLayers)
    what = "every layer re-run whole";
  else if (fullLayers > 0)
    what = of(fullLayers) + " re-run whole, " +
           (numLayers - fullLayers == 1
                ? std::string("the last")
                : "the other " + std::to_string(numLayers - fullLayers)) +
           " selectively";
  else if (selectiveLayers == numLayers)
    what = "every layer's norms, rope and SwiGLU re-run (selective)";
  else if (selectiveLayers > 0)
    what = "the norms, rope and SwiGLU of " + of(selectiveLayers) + " re-run";
  else
    what = baseline == "none" ? "nothing re-run"
                              : "nothing re-run but the mode's " + baseline;
  char text[512];
  std::snprintf(text, sizeof text,
                " (%s), %.1f MiB a rank within %s (nothing re-run: %.1f, "
                "the most: %.1f; %d compiles)",
                flags().c_str(), static_cast<double>(bytes) / (1 << 20),
                limit.c_str(), static_cast<double>(noneBytes) / (1 << 20),
                static_cast<double>(allBytes) / (1 << 20), compiles);
  return what + text;
}

std::variant<plan::Plan, CompileError>
sharc::compileWithinMemory(mlir::MLIRContext &context, CompileOptions options,
                           int64_t limitBytes, RecomputeChoice *choice,
                           PlanSchedule *schedule) {
  frontend::ConfigResult config =
      frontend::readConfigFile(options.modelPath, options.runPath);
  if (!config.ok())
    return CompileError{2, config.error->format()};
  int64_t numLayers = config.config->model.numLayers.value;
  choice->numLayers = numLayers;
  choice->compiles = 0;
  choice->overLimit = false;
  int64_t lastCompiled = -1;
  // The async SP modes' re-gather stays where nothing else is re-run; the
  // other steps re-gather as their policy does.
  std::string &baseline = choice->baseline;
  baseline =
      options.pipeline.recompute == "sp-allgather" ? "sp-allgather" : "none";
  auto compileStep =
      [&](int64_t step) -> std::variant<plan::Plan, CompileError> {
    auto [full, selective] = stepLayers(step, numLayers);
    setLayers(full, selective, baseline, options.pipeline);
    ++choice->compiles;
    lastCompiled = step;
    return compileModel(context, options, schedule);
  };
  // The search's compiles dump no IR; the chosen plan's is dumped once.
  std::string dumpIr = options.dumpIr;
  options.dumpIr.clear();
  auto chosen = [&](int64_t step, std::variant<plan::Plan, CompileError> plan)
      -> std::variant<plan::Plan, CompileError> {
    std::tie(choice->fullLayers, choice->selectiveLayers) =
        stepLayers(step, numLayers);
    // The schedule the caller gets is the last compile's: redo the chosen
    // one when bisection ended elsewhere, or to dump its IR.
    if ((schedule && lastCompiled != step) || !dumpIr.empty()) {
      options.dumpIr = dumpIr;
      return compileStep(step);
    }
    return plan;
  };
  auto none = compileStep(0);
  if (auto *error = std::get_if<CompileError>(&none))
    return *error;
  choice->noneBytes = planDeviceBytes(std::get<plan::Plan>(none));
  if (choice->noneBytes <= limitBytes) {
    choice->bytes = choice->allBytes = choice->noneBytes;
    return chosen(0, std::move(none));
  }
  // The chain's end: every layer whole, or the last one selectively when
  // that keeps no more. Re-run whole at once, the last layer's copies all
  // live through its own backward, and that is often the peak.
  int64_t last = 2 * numLayers;
  auto all = compileStep(last);
  if (auto *error = std::get_if<CompileError>(&all))
    return *error;
  choice->allBytes = planDeviceBytes(std::get<plan::Plan>(all));
  if (numLayers > 1) {
    auto almost = compileStep(last - 1);
    if (auto *error = std::get_if<CompileError>(&almost))
      return *error;
    if (int64_t bytes = planDeviceBytes(std::get<plan::Plan>(almost));
        bytes <= choice->allBytes) {
      choice->allBytes = bytes;
      all = std::move(almost);
      --last;
    }
  }
  choice->overLimit = choice->allBytes > limitBytes;
  if (choice->overLimit)
    return CompileError{
        2, "--memory-limit-mib: the plan needs " + mib(choice->allBytes) +
               " a rank with every layer re-run in the backward (" +
               mib(choice->noneBytes) + " with none), over the limit of " +
               mib(limitBytes)};
  // Bisection over the chain up to its end, whose plans never grow as steps
  // re-run more: `fits` is a step that fits, `tooFew` one that does not.
  int64_t fits = last, tooFew = 0;
  std::variant<plan::Plan, CompileError> best = std::move(all);
  choice->bytes = choice->allBytes;
  while (fits - tooFew > 1) {
    int64_t middle = (fits + tooFew) / 2;
    auto plan = compileStep(middle);
    if (auto *error = std::get_if<CompileError>(&plan))
      return *error;
    int64_t bytes = planDeviceBytes(std::get<plan::Plan>(plan));
    if (bytes <= limitBytes) {
      fits = middle;
      choice->bytes = bytes;
      best = std::move(plan);
    } else {
      tooFew = middle;
    }
  }
  return chosen(fits, std::move(best));
}
