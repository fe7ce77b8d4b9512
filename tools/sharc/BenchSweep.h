//===- BenchSweep.h - `sharc bench`: the sweep, compiled ahead --*- C++ -*-===//
// defines: BenchConfig, BenchPoint, parseBenchFlags, expandSweep,
//          flopsPerToken, paramCount, runBenchCommand
//
// The original benchmark's orchestrator (seed-system.md, section 3), split
// at the plan: `sharc bench` expands modes x layers x seq_len, writes each
// point's model file and compiles its plan into a folder with a manifest
// (bench.yaml), then runs `sharc-run --bench MANIFEST` once for every point
// (no process start-up per point) and, when asked, the plot script. With
// --compile-only it prints those commands instead, for a GPU node that has
// only sharc-run: the folder travels as it is (paths in the manifest are
// relative to it).
//
//   auto config = parseBenchFlags(args); // exit 2 on bad flags
//   std::vector<BenchPoint> points = expandSweep(*config);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace sharc::bench {

struct BenchConfig {
  std::string kind = "memory"; ///< memory or throughput
  std::vector<std::string> modes = {"ddp", "tp"};
  int64_t tpSize = 2;
  /// Pipeline stages of the pp modes (the original's default 2); ddp alone
  /// counts it in its world only when given.
  std::optional<int64_t> ppSize;
  int64_t cpSize = 1;                    ///< ranks splitting the sequence
  std::string cpCommType = "all_gather"; ///< or a2a (Ulysses)
  std::string ppSchedule = "gpipe";      ///< 1f1b, or sharc's interleaved
  std::optional<int64_t> virtualStages;  ///< model chunks a stage, >= 2
  /// The features of the modes that take them from the command line (tp
  /// and the tp topologies, seed-system.md 3.3).
  bool sequenceParallel = false, asyncCommunication = false;
  bool vocabParallel = false;
  std::vector<int64_t> numHiddenLayers = {16};
  std::vector<int64_t> seqLens = {1024};
  int64_t hiddenSize = 768, numAttentionHeads = 8, numKeyValueHeads = 4;
  int64_t vocabSize = 6400;
  std::optional<int64_t> headDim, intermediateSize; ///< else the rule
  int64_t microBatchSize = 2, numMicrobatches = 4;
  std::string batchPolicy = "fixed_global"; ///< or fixed_per_rank
  std::string dtype = "bfloat16";           ///< or float32
  int64_t warmupIters = 2, benchmarkIters = 5, seed = 42;
  std::string outputCsv, outputPlot; ///< defaults by kind
  std::string backend = "auto";
  std::string workDir = "sharc-bench"; ///< plans, models, manifest
  std::string machinePath;             ///< for the predicted timeline
  /// Test hook: the memory one rank may use; 0 = the device's free memory
  /// (cuda) or the host's available memory shared by the ranks (cpu).
  int64_t memoryLimitMiB = 0;
  double peakFlopsPerGpu = 989.4e12;
  bool compileOnly = false;
  /// Replay each point's step as a CUDA graph (sharc-run --cuda-graph).
  bool cudaGraph = false;
  /// Compile options beyond the original's knobs, as `sharc compile` has
  /// them: adds in the GEMMs' epilogue and q/k norm + rope as one kernel
  /// (both on unless --no_fuse_adds, --no_fuse_norm_rope) and the
  /// latency-hiding order (--schedule latency).
  bool fuseAdds = true;
  bool fuseNormRope = true;
  /// One GEMM for q/k/v and gate/up ("all", the default), for gate/up alone
  /// ("gate_up"), or none (`sharc compile --fuse-projections=...`).
  std::string fuseProjections = "all";
  std::string schedule = "defer";
  /// ddp points with the optimizer state sharded over dp (ZeRO-1,
  /// `sharc compile --zero 1`); the other modes have no dp axis.
  int64_t zeroStage = 0;
  /// "full": every point re-runs each layer's forward in its backward
  /// (`sharc compile --recompute full`), "selective" its cheap ops; "auto"
  /// the least that fits memoryLimitMiB less kCudaRankReserveBytes
  /// (RecomputeSearch.h); "none" keeps the modes' own.
  std::string recompute = "none";
};

/// One (mode, layers, seq_len) of the sweep, as the manifest records it.
struct BenchPoint {
  std::string mode, label, runner;
  int64_t tpSize = 1, worldSize = 1;
  int64_t ppSize = 1, cpSize = 1, virtualStages = 1;
  std::string cpCommType;          ///< empty without context parallelism
  std::string ppSchedule = "none"; ///< the general runner's schedule
  /// The plan's microbatches: the general runner splits the model batch
  /// into num_microbatches of micro_batch_size; ddp and tp run it whole.
  int64_t microBatchSize = 0, numMicrobatches = 1;
  bool sequenceParallel = false, asyncCommunication = false;
  bool vocabParallel = false;
  int64_t modelBatchSize = 0, globalBatchSize = 0;
  int64_t layers = 0, seqLen = 0;
  int64_t headDim = 0, intermediateSize = 0;
  int64_t params = 0;
  double flopsPerToken = 0;
  /// From the planner's simulated timeline (the machine file's figures);
  /// negative when the point did not compile.
  double predictedStepMs = -1, exposedCommMs = -1;
  /// The stages' mean idle share of the simulated step (StepSimulation.h),
  /// as `sharc compile --report` gives it; negative without pipeline
  /// stages or a simulation that ran to its end.
  double simulatedBubble = -1;
  std::string modelPath, planPath; ///< relative to the work folder
  /// ok; error when it did not compile; oom when --recompute auto found no
  /// plan that fits.
  std::string status = "ok";
  std::string reason;
  /// --recompute auto: what the search chose, as `sharc compile` flags.
  std::string recompute;
};

/// Parses the flags after `bench`: the config, or an exit code (2 for bad
/// flags, 0 for --help) after printing the message.
std::variant<BenchConfig, int>
parseBenchFlags(const std::vector<std::string> &args);

/// The points in run order: layers-or-seq outer, modes inner (as the
/// original), with the batch policy and each mode's sizes applied
/// (BenchModes.h).
std::vector<BenchPoint> expandSweep(const BenchConfig &config);

/// torch_peer.py's count, for the training step (forward + backward):
/// layers * (6 * linear + 6 * seq * q) + 6 * hidden * vocab, with
/// linear = 2*hidden*q + 2*hidden*kv + 3*hidden*intermediate.
double flopsPerToken(const BenchConfig &config, int64_t layers, int64_t seqLen);
/// The original's analytic parameter count, untied (section 3.8).
int64_t paramCount(const BenchConfig &config, int64_t layers);

/// `sharc bench ARGS`: compiles the sweep, then runs it (or prints how to).
int runBenchCommand(const std::vector<std::string> &args,
                    const std::string &argv0);

} // namespace sharc::bench
