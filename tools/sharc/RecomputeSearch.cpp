//===- RecomputeSearch.cpp - the fewest layers to re-run that fit ---------===//

#include "tools/sharc/RecomputeSearch.h"
#include "ir/frontend/ModelConfig.h"
#include "planner/MemoryReport.h"

#include <cstdio>
#include <string>

using namespace sharc;

int64_t sharc::planDeviceBytes(const plan::Plan &plan) {
  MemoryReport report = buildMemoryReport(plan);
  return report.totalBytes + report.workspaceBytes;
}

namespace {

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB",
                static_cast<double>(bytes) / (1 << 20));
  return text;
}

} // namespace

std::string RecomputeChoice::describe(int64_t limitMiB) const {
  char text[256];
  std::snprintf(
      text, sizeof text,
      "the first %lld of %lld layers re-run in the backward, %.1f "
      "MiB a rank within %lld (none: %.1f, all: %.1f; %d compiles)",
      static_cast<long long>(layers), static_cast<long long>(numLayers),
      static_cast<double>(bytes) / (1 << 20), static_cast<long long>(limitMiB),
      static_cast<double>(noneBytes) / (1 << 20),
      static_cast<double>(allBytes) / (1 << 20), compiles);
  return text;
}

std::variant<plan::Plan, CompileError>
sharc::compileWithinMemory(mlir::MLIRContext &context, CompileOptions options,
                           int64_t limitBytes, RecomputeChoice *choice,
                           PlanSchedule *schedule) {
  frontend::ConfigResult config =
      frontend::readConfigFile(options.modelPath, options.runPath);
  if (!config.ok())
    return CompileError{2, config.error->format()};
  choice->numLayers = config.config->model.numLayers.value;
  choice->compiles = 0;
  int64_t lastCompiled = -1;
  // The plan with the first n layers re-run (n = 0: none).
  auto compileWith = [&](int64_t n) -> std::variant<plan::Plan, CompileError> {
    options.pipeline.recompute = n > 0 ? "full" : "none";
    options.pipeline.recomputeLayers = n;
    ++choice->compiles;
    lastCompiled = n;
    return compileModel(context, options, schedule);
  };
  // The search's compiles dump no IR; the chosen plan's is dumped once.
  std::string dumpIr = options.dumpIr;
  options.dumpIr.clear();
  auto chosen = [&](int64_t n, std::variant<plan::Plan, CompileError> plan)
      -> std::variant<plan::Plan, CompileError> {
    choice->layers = n;
    // The schedule the caller gets is the last compile's: redo the chosen
    // one when bisection ended elsewhere, or to dump its IR.
    if ((schedule && lastCompiled != n) || !dumpIr.empty()) {
      options.dumpIr = dumpIr;
      return compileWith(n);
    }
    return plan;
  };
  auto none = compileWith(0);
  if (auto *error = std::get_if<CompileError>(&none))
    return *error;
  choice->noneBytes = planDeviceBytes(std::get<plan::Plan>(none));
  if (choice->noneBytes <= limitBytes) {
    choice->bytes = choice->allBytes = choice->noneBytes;
    return chosen(0, std::move(none));
  }
  auto all = compileWith(choice->numLayers);
  if (auto *error = std::get_if<CompileError>(&all))
    return *error;
  choice->allBytes = planDeviceBytes(std::get<plan::Plan>(all));
  if (choice->allBytes > limitBytes)
    return CompileError{
        2, "--memory-limit-mib: the plan needs " + mib(choice->allBytes) +
               " a rank with every layer re-run in the backward (" +
               mib(choice->noneBytes) + " with none), over the limit of " +
               mib(limitBytes)};
  // Bisection: `fits` re-runs enough layers, `tooFew` too few.
  int64_t fits = choice->numLayers, tooFew = 0;
  std::variant<plan::Plan, CompileError> best = std::move(all);
  choice->bytes = choice->allBytes;
  while (fits - tooFew > 1) {
    int64_t middle = (fits + tooFew) / 2;
    auto plan = compileWith(middle);
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
