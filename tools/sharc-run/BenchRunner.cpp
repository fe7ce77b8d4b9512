//===- BenchRunner.cpp - run every point of a benchmark sweep -------------===//
//
// Each point gets its own Runtime, destroyed before the next one starts, so
// a point never sees the previous one's memory.
//
//===----------------------------------------------------------------------===//

#include "tools/sharc-run/BenchRunner.h"
#include "executor/DataLoader.h"
#include "executor/Runtime.h"
#include "planner/plan/DeviceWorkspace.h"
#include "planner/plan/FileText.h"
#include "planner/plan/PlanIO.h"
#include "tools/sharc-run/BenchMemory.h"
#include "tools/sharc-run/BenchReport.h"
#include "tools/sharc-run/StopSignals.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <new>

namespace sharc::benchrun {
namespace {

constexpr double kMiB = 1048576.0;
BenchResult failed(const std::string &status, const std::string &reason) {
  BenchResult result;
  result.status = status;
  result.reason = reason;
  return result;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid]
                           : 0.5 * (values[mid - 1] + values[mid]);
}

/// Warm-up and timed steps on a created runtime; fills `result`.
Status measure(const BenchManifest &manifest, const BenchPointSpec &point,
               exec::Runtime &runtime, BenchResult &result) {
  const plan::Plan &plan = runtime.plan();
  SHARC_TRY(runtime.initParams(manifest.seed));
  exec::DataLoader loader = exec::DataLoader::synthetic(
      plan.vocabSize, plan.batchSize, plan.seqLen, manifest.seed);
  std::vector<double> seconds;
  int64_t total = manifest.warmupIters + manifest.benchmarkIters;
  for (int64_t i = 0; i < total; ++i) {
    int64_t step = runtime.nextStep();
    SHARC_TRY(runtime.setBatch(loader.batch(step)));
    auto stats = runtime.step();
    if (!stats)
      return stats.status();
    if (!std::isfinite(stats->loss))
      return Status::runtimeError("the loss of step " + std::to_string(step) +
                                  " is " + std::to_string(stats->loss));
    if (i == 0)
      result.firstLoss = stats->loss;
    result.lastLoss = stats->loss;
    if (i >= manifest.warmupIters)
      seconds.push_back(stats->seconds);
  }
  double stepSeconds = median(seconds);
  result.stepMs = stepSeconds * 1e3;
  result.tokensPerSecond =
      stepSeconds > 0 ? static_cast<double>(point.globalBatchSize) *
                            static_cast<double>(point.seqLen) / stepSeconds
                      : 0;
  result.mfu =
      result.tokensPerSecond * point.flopsPerToken /
      (static_cast<double>(point.worldSize) * manifest.peakFlopsPerGpu);
  int64_t inUse = -1;
  for (int64_t bytes : runtime.deviceBytesInUse())
    inUse = std::max(inUse, bytes);
  result.peakMiB = inUse < 0 ? -1 : static_cast<double>(inUse) / kMiB;
  int64_t workspace = 0;
  for (int64_t bytes : runtime.workspaceBytes())
    workspace = std::max(workspace, bytes);
  result.allocatedMiB =
      result.plannedPeakMiB + static_cast<double>(workspace) / kMiB;
  return Status::ok();
}

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(bytes) / kMiB);
  return text;
}

} // namespace

BenchResult runBenchPoint(const BenchManifest &manifest,
                          const BenchPointSpec &point,
                          const std::string &backend) {
  // A point no plan fits (sharc bench --recompute auto) is an oom row.
  if (point.status != "ok")
    return failed(point.status == "oom" ? "oom" : "error", point.reason);
  auto plan = plan::readPlanFile(point.planPath);
  if (!plan)
    return failed("error", plan.status().message());
  if (plan->worldSize() != point.worldSize ||
      plan->batchSize != point.globalBatchSize || plan->seqLen != point.seqLen)
    return failed("error", point.planPath +
                               ": the plan's world size, batch or seq_len "
                               "is not the manifest's");
  int64_t plannedBytes = 0;
  for (const auto &[region, numBytes] : plan->regionBytes)
    plannedBytes += numBytes;
  std::string resolved = backend;
  if (resolved == "auto")
    resolved = cudaAvailableFor(point.worldSize) ? "cuda" : "cpu";
  MemoryBudget budget =
      memoryBudget(resolved, point.worldSize, manifest.memoryLimitMiB);
  int64_t reserve = resolved == "cuda" ? plan::kCudaRankReserveBytes : 0;
  BenchResult result;
  result.plannedPeakMiB = static_cast<double>(plannedBytes) / kMiB;
  if (budget.bytesPerRank >= 0 &&
      plannedBytes + reserve > budget.bytesPerRank) {
    result.status = "oom";
    result.reason =
        "the plan needs " + mib(plannedBytes) + " MiB per rank" +
        (reserve ? " + " + mib(reserve) + " MiB reserve" : std::string()) +
        ", " + mib(budget.bytesPerRank) + " MiB (" + budget.source +
        ") are available";
    return result;
  }
  try {
    exec::RunOptions options;
    options.backend = resolved;
    options.captureSteps = manifest.cudaGraph;
    auto runtime = exec::Runtime::create(*plan, options);
    if (!runtime)
      return failed(runtime.status().code() == Status::Code::OutOfMemory
                        ? "oom"
                        : "error",
                    runtime.status().message());
    if (Status status = measure(manifest, point, **runtime, result); !status) {
      BenchResult error = failed("error", status.message());
      error.plannedPeakMiB = result.plannedPeakMiB;
      return error;
    }
  } catch (const std::bad_alloc &) {
    // The simulated ranks' regions are host memory: a failed allocation
    // is this point not fitting, not a fault of the run.
    BenchResult oom = failed("oom", "a host allocation failed");
    oom.plannedPeakMiB = result.plannedPeakMiB;
    return oom;
  }
  return result;
}

int runBenchMain(int argc, char **argv) {
  std::string manifestPath, backend, outputCsv;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string *into = flag == "--bench"        ? &manifestPath
                        : flag == "--backend"    ? &backend
                        : flag == "--output_csv" ? &outputCsv
                                                 : nullptr;
    if (!into || i + 1 >= argc) {
      std::fprintf(stderr,
                   "sharc-run: error: %s\nusage: sharc-run --bench "
                   "MANIFEST [--backend auto|cpu|cuda] [--output_csv FILE]\n",
                   into ? (flag + " needs a value").c_str()
                        : ("unknown bench flag '" + flag + "'").c_str());
      return 2;
    }
    *into = argv[++i];
  }
  auto manifest = readBenchManifest(manifestPath);
  if (!manifest) {
    std::fprintf(stderr, "sharc-run: error: %s\n",
                 manifest.status().message().c_str());
    return 2;
  }
  if (backend.empty())
    backend = manifest->backend;
  if (backend != "auto" && backend != "cpu" && backend != "cuda") {
    std::fprintf(stderr, "sharc-run: error: unknown backend '%s'\n",
                 backend.c_str());
    return 2;
  }
  if (!outputCsv.empty())
    manifest->outputCsv = outputCsv;
  if (Status status = checkWritablePath(manifest->outputCsv, "--output_csv");
      !status) {
    std::fprintf(stderr, "sharc-run: error: %s\n", status.message().c_str());
    return 2;
  }
  std::vector<BenchResult> results;
  bool anyError = false;
  // A sweep runs for hours on a GPU: the CSV holds every point measured
  // so far (rewritten whole after each), and a stop signal ends the sweep
  // after the point in flight with the tables of the points done.
  training::installStopHandlers(/*announce=*/true, "point");
  int stoppedBy = 0;
  for (size_t i = 0; i < manifest->points.size(); ++i) {
    if ((stoppedBy = training::stopSignal()) != 0)
      break;
    const BenchPointSpec &point = manifest->points[i];
    results.push_back(runBenchPoint(*manifest, point, backend));
    anyError |= results.back().status == "error";
    // The file first: a point's line on the console means it is on disk.
    if (Status status = writeCsv(manifest->outputCsv, *manifest, results);
        !status) {
      std::fprintf(stderr, "sharc-run: error: %s\n", status.message().c_str());
      return 1;
    }
    std::printf("%s\n", formatProgress(*manifest, i, results.back()).c_str());
    std::fflush(stdout);
  }
  // The tables of the points measured (all of them, unless stopped).
  BenchManifest measured = *manifest;
  measured.points.resize(results.size());
  std::printf("\n%s", formatTables(measured, results).c_str());
  // Once more, for a sweep stopped before its first point.
  if (Status status = writeCsv(manifest->outputCsv, *manifest, results);
      !status) {
    std::fprintf(stderr, "sharc-run: error: %s\n", status.message().c_str());
    return 1;
  }
  std::printf("saved CSV: %s\n", manifest->outputCsv.c_str());
  if (stoppedBy != 0) {
    std::printf("stopped by %s after %zu of the %zu points\n",
                training::signalName(stoppedBy), results.size(),
                manifest->points.size());
    return 128 + stoppedBy;
  }
  return anyError ? 1 : 0;
}

} // namespace sharc::benchrun
