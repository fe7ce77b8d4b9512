//===- BenchManifest.h - the benchmark sweep sharc-run runs -----*- C++ -*-===//
// defines: BenchPointSpec, BenchManifest, BenchResult, readBenchManifest
//
// `sharc bench` compiles every point of a sweep and writes bench.yaml, the
// manifest (tools/sharc/BenchSweep.h); `sharc-run --bench bench.yaml` runs
// them all in one process (BenchRunner.h). Plan paths are relative to the
// manifest's folder, so the folder can be carried to a GPU node as it is.
#pragma once

#include "planner/plan/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sharc::benchrun {

/// One point as compiled: its parameters, its plan and what the compiler
/// predicted.
struct BenchPointSpec {
  std::string mode, label, runner;
  int64_t tpSize = 1, worldSize = 1;
  int64_t ppSize = 1, cpSize = 1, virtualStages = 1;
  std::string cpCommType;          ///< empty without context parallelism
  std::string ppSchedule = "none"; ///< the general runner's schedule
  int64_t microBatchSize = 0, numMicrobatches = 1; ///< the plan's
  bool sequenceParallel = false, asyncCommunication = false;
  bool vocabParallel = false;
  int64_t modelBatchSize = 0, globalBatchSize = 0;
  int64_t layers = 0, seqLen = 0, params = 0;
  double flopsPerToken = 0;
  double predictedStepMs = -1, exposedCommMs = -1; ///< -1: not predicted
  /// The simulated pipeline bubble (a share of the step); -1 without stages.
  double simulatedBubble = -1;
  std::string planPath; ///< absolute; empty when it did not compile
  std::string status = "ok", reason;
};

struct BenchManifest {
  std::string kind = "memory";  ///< memory or throughput
  std::string scaling = "none"; ///< layers, sequence or none
  std::string backend = "auto", batchPolicy = "fixed_global";
  std::string ppSchedule = "gpipe"; ///< as given to sharc bench
  bool cudaGraph = false;           ///< capture and replay each point's step
  int64_t warmupIters = 2, benchmarkIters = 5, numMicrobatches = 1;
  uint64_t seed = 42;
  int64_t memoryLimitMiB = 0; ///< 0: what the device or host has
  double peakFlopsPerGpu = 989.4e12;
  std::string outputCsv;
  std::vector<std::string> modes;
  std::vector<BenchPointSpec> points;
};

/// What running one point gave.
struct BenchResult {
  std::string status = "ok"; ///< ok, oom or error
  std::string reason;        ///< why, for oom and error
  double stepMs = 0;         ///< median over the timed steps
  double tokensPerSecond = 0, mfu = 0;
  double plannedPeakMiB = 0; ///< the plan's regions, one rank
  double peakMiB = -1;       ///< device bytes in use, max over ranks
  /// The regions plus the workspace the backend allocated (cuBLASLt, kernel
  /// scratch, staging), max over ranks: every byte sharc allocated, as the
  /// original's allocator peak counts PyTorch's tensors and workspaces.
  double allocatedMiB = -1;
  double firstLoss = 0, lastLoss = 0;
};

/// Reads a manifest; a missing file or field is invalid input with its
/// FILE:LINE:COL.
Result<BenchManifest> readBenchManifest(const std::string &path);

} // namespace sharc::benchrun
