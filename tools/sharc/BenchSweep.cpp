//===- BenchSweep.cpp - `sharc bench`: compile the sweep, then run it -----===//
//
// Compiles every point into --work-dir (a model file and a plan per point,
// and bench.yaml, the manifest that `sharc-run --bench` reads), predicts
// each plan's step on the machine file, then starts sharc-run once for the
// whole sweep and the plot script after it. A point that does not compile
// is a row with status error and the compiler's message; the sweep goes on.
//
//===----------------------------------------------------------------------===//

#include "tools/sharc/BenchSweep.h"
#include "tools/sharc/BenchModes.h"

#include "planner/CostModel.h"
#include "planner/StepSimulation.h"
#include "planner/plan/DeviceWorkspace.h"
#include "planner/plan/FileText.h"
#include "planner/plan/PlanIO.h"
#include "tools/sharc/CompileDriver.h"
#include "tools/sharc/DefaultMachine.h"
#include "tools/sharc/RecomputeSearch.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace mlir;

namespace sharc::bench {
namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitFailure = 1;

/// A YAML double-quoted scalar: the reason may hold quotes and newlines.
std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char ch : text) {
    if (ch == '"' || ch == '\\')
      out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

std::string modelYaml(const BenchConfig &c, const BenchPoint &p) {
  std::ostringstream out;
  // The plan's batch is the global one (split over dp): fixed_per_rank
  // gives each DDP rank the whole model batch (3.4). Only the general
  // runner microbatches (BenchModes.cpp).
  out << "# " << p.mode << ", " << p.layers << " layers, seq " << p.seqLen
      << ": written by sharc bench\n"
      << "model:\n  name: bench\n  hidden_size: " << c.hiddenSize
      << "\n  num_hidden_layers: " << p.layers
      << "\n  num_attention_heads: " << c.numAttentionHeads
      << "\n  num_key_value_heads: " << c.numKeyValueHeads
      << "\n  head_dim: " << p.headDim
      << "\n  intermediate_size: " << p.intermediateSize
      << "\n  vocab_size: " << c.vocabSize << "\n  tie_word_embeddings: false\n"
      << "run:\n  seq_len: " << p.seqLen
      << "\n  micro_batch_size: " << p.microBatchSize
      << "\n  num_microbatches: " << p.numMicrobatches
      << "\n  dtype: " << c.dtype << "\n  seed: " << c.seed << "\n";
  return out.str();
}

bool writeText(const std::string &path, const std::string &text) {
  return writeFileAtomically(path, {text}, "").isOk();
}

/// The predicted step (every rank simulated together), and the part of it
/// during which no compute node runs (a collective in the way, a wait for
/// one, a pipeline bubble): the union of the compute nodes' intervals
/// subtracted from the step, on the rank whose compute covers the most.
void predict(const PlanSchedule &schedule, const plan::Plan &plan,
             const Machine &machine, BenchPoint &point) {
  MeshShape mesh;
  for (const plan::MeshAxis &axis : plan.mesh)
    mesh.push_back({axis.name, axis.size});
  StepSimulation simulation = simulateStep(schedule.graph, schedule.streams,
                                           schedule.order, machine, mesh);
  if (simulation.deadlocked)
    return;
  double mostCovered = 0;
  for (const Timeline &timeline : simulation.ranks) {
    std::vector<std::pair<double, double>> compute;
    for (size_t n = 0; n < schedule.graph.size(); ++n)
      if (schedule.graph[n].kind == NodeKind::Compute &&
          timeline.end[n] > timeline.start[n])
        compute.push_back({timeline.start[n], timeline.end[n]});
    std::sort(compute.begin(), compute.end());
    double covered = 0, reach = 0;
    for (auto [start, end] : compute) {
      start = std::max(start, reach);
      if (end > start)
        covered += end - start;
      reach = std::max(reach, end);
    }
    mostCovered = std::max(mostCovered, covered);
  }
  point.predictedStepMs = simulation.stepSeconds * 1e3;
  point.exposedCommMs =
      std::max(0.0, simulation.stepSeconds - mostCovered) * 1e3;
  if (plan.axisSize(plan::kStageAxis) > 1)
    point.simulatedBubble = simulation.bubble;
}

/// Compiles one point; on failure the point becomes an error row.
void compilePoint(const BenchConfig &c, const std::string &workDir,
                  const Machine &machine, BenchPoint &point) {
  std::string diagnostics;
  MLIRContext context;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error) {
      std::string where;
      if (auto loc = dyn_cast<FileLineColLoc>(diag.getLocation()))
        where = loc.getFilename().str() + ":" + std::to_string(loc.getLine()) +
                ":" + std::to_string(loc.getColumn()) + ": ";
      diagnostics += (diagnostics.empty() ? "" : "; ") + where + diag.str();
    }
    return success();
  });
  CompileOptions options;
  options.modelPath = workDir + "/" + point.modelPath;
  options.mode = point.mode;
  options.pipeline = pipelineOptionsOf(c, point);
  if (c.schedule == "latency")
    options.scheduleMachine = &machine;
  PlanSchedule schedule;
  RecomputeChoice choice;
  bool search = c.recompute == "auto";
  int64_t limitBytes = c.memoryLimitMiB > 0 ? (c.memoryLimitMiB << 20) -
                                                  plan::kCudaRankReserveBytes
                                            : machineLimitBytes(machine);
  auto result = search ? compileWithinMemory(context, options, limitBytes,
                                             &choice, &schedule)
                       : compileModel(context, options, &schedule);
  if (auto *error = std::get_if<CompileError>(&result)) {
    // The search's own refusal: no plan fits, as a run would find.
    if (search && choice.overLimit) {
      point.status = "oom";
      point.reason =
          error->message + " (" +
          (c.memoryLimitMiB > 0
               ? "--memory-limit-mib " + std::to_string(c.memoryLimitMiB) +
                     " less " +
                     std::to_string(plan::kCudaRankReserveBytes >> 20) +
                     " MiB kept for NCCL and the libraries"
               : machineLimitSource(machine)) +
          ")";
      point.planPath.clear();
      return;
    }
    point.status = "error";
    point.reason =
        "compile: " + (diagnostics.empty() ? error->message : diagnostics);
    point.planPath.clear();
    return;
  }
  if (Status status = plan::writePlanFile(std::get<plan::Plan>(result),
                                          workDir + "/" + point.planPath);
      !status.isOk()) {
    point.status = "error";
    point.reason = "compile: " + status.message();
    point.planPath.clear();
    return;
  }
  if (search)
    point.recompute = choice.flags();
  predict(schedule, std::get<plan::Plan>(result), machine, point);
}

std::string manifestYaml(const BenchConfig &c,
                         const std::vector<BenchPoint> &points,
                         const std::string &csvPath) {
  std::ostringstream out;
  out.precision(17);
  std::string scaling = c.numHiddenLayers.size() > 1 ? "layers"
                        : c.seqLens.size() > 1       ? "sequence"
                                                     : "none";
  out << "# sharc bench manifest: sharc-run --bench THIS_FILE runs every "
         "point\n"
      << "kind: " << c.kind << "\nscaling: " << scaling
      << "\nbackend: " << c.backend
      << "\ncuda_graph: " << (c.cudaGraph ? "true" : "false")
      << "\nfuse_adds: " << (c.fuseAdds ? "true" : "false")
      << "\nfuse_norm_rope: " << (c.fuseNormRope ? "true" : "false")
      << "\nfuse_projections: " << c.fuseProjections
      << "\nzero_stage: " << c.zeroStage << "\nrecompute: " << c.recompute
      << "\nschedule: " << c.schedule << "\npp_schedule: " << c.ppSchedule
      << "\nbatch_policy: " << c.batchPolicy
      << "\nwarmup_iters: " << c.warmupIters
      << "\nbenchmark_iters: " << c.benchmarkIters << "\nseed: " << c.seed
      << "\nmemory_limit_mib: " << c.memoryLimitMiB
      << "\npeak_flops_per_gpu: " << c.peakFlopsPerGpu
      << "\nnum_microbatches: " << c.numMicrobatches
      << "\noutput_csv: " << quoted(csvPath) << "\nmodes: [";
  for (size_t m = 0; m < c.modes.size(); ++m)
    out << (m ? ", " : "") << c.modes[m];
  out << "]\npoints:\n";
  for (const BenchPoint &p : points) {
    auto flag = [](bool on) { return on ? "true" : "false"; };
    out << "  - mode: " << p.mode << "\n    label: " << quoted(p.label)
        << "\n    runner: " << p.runner << "\n    tp_size: " << p.tpSize
        << "\n    pp_size: " << p.ppSize << "\n    cp_size: " << p.cpSize
        << "\n    cp_comm_type: " << quoted(p.cpCommType)
        << "\n    pp_schedule: " << p.ppSchedule
        << "\n    virtual_stages: " << p.virtualStages
        << "\n    micro_batch_size: " << p.microBatchSize
        << "\n    num_microbatches: " << p.numMicrobatches
        << "\n    world_size: " << p.worldSize
        << "\n    sequence_parallel: " << flag(p.sequenceParallel)
        << "\n    async_communication: " << flag(p.asyncCommunication)
        << "\n    vocab_parallel: " << flag(p.vocabParallel)
        << "\n    model_batch_size: " << p.modelBatchSize
        << "\n    global_batch_size: " << p.globalBatchSize
        << "\n    layers: " << p.layers << "\n    seq_len: " << p.seqLen
        << "\n    params: " << p.params
        << "\n    flops_per_token: " << p.flopsPerToken
        << "\n    predicted_step_ms: " << p.predictedStepMs
        << "\n    exposed_comm_ms: " << p.exposedCommMs
        << "\n    simulated_bubble: " << p.simulatedBubble
        << "\n    model: " << quoted(p.modelPath)
        << "\n    plan: " << quoted(p.planPath)
        << "\n    recompute: " << quoted(p.recompute)
        << "\n    status: " << p.status << "\n    reason: " << quoted(p.reason)
        << "\n";
  }
  return out.str();
}

std::string siblingTool(const std::string &argv0, const std::string &name) {
  std::error_code error;
  std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error)
    self = argv0;
  return (self.parent_path() / name).string();
}

/// Runs argv[0] with argv, waits, returns its exit status (1 if it could
/// not start or died of a signal).
/// The sweep's process while spawn() waits for it: a stop signal sent to
/// `sharc bench` alone (a scheduler's SIGTERM) goes on to it, which ends
/// the sweep after its point in flight (sharc-run's StopSignals.h).
volatile sig_atomic_t runningChild = 0;

void forwardToChild(int signal) {
  if (runningChild > 0)
    kill(static_cast<pid_t>(runningChild), signal);
}

int spawn(const std::vector<std::string> &argv) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0)
    return kExitFailure;
  if (pid == 0) {
    std::vector<char *> cargs;
    for (const std::string &arg : argv)
      cargs.push_back(const_cast<char *>(arg.c_str()));
    cargs.push_back(nullptr);
    execv(cargs[0], cargs.data());
    std::fprintf(stderr, "sharc: error: cannot start %s\n", cargs[0]);
    _exit(127);
  }
  runningChild = pid;
  struct sigaction forward{}, previous[3];
  forward.sa_handler = forwardToChild;
  forward.sa_flags = SA_RESTART;
  sigemptyset(&forward.sa_mask);
  const int stopSignals[3] = {SIGINT, SIGTERM, SIGUSR1};
  for (int i = 0; i < 3; ++i)
    sigaction(stopSignals[i], &forward, &previous[i]);
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  for (int i = 0; i < 3; ++i)
    sigaction(stopSignals[i], &previous[i], nullptr);
  runningChild = 0;
  if (waited < 0)
    return kExitFailure;
  // A child a second signal ended: the shell's status for it.
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitFailure;
}

std::string joined(const std::vector<std::string> &argv) {
  std::string line;
  for (const std::string &arg : argv)
    line += (line.empty() ? "" : " ") + arg;
  return line;
}

} // namespace

int runBenchCommand(const std::vector<std::string> &args,
                    const std::string &argv0) {
  auto parsed = parseBenchFlags(args);
  if (int *exitCode = std::get_if<int>(&parsed))
    return *exitCode;
  const BenchConfig &config = std::get<BenchConfig>(parsed);
  auto machine = config.machinePath.empty()
                     ? parseMachine(kDefaultMachineYaml, kDefaultMachineName)
                     : readMachineFile(config.machinePath);
  if (!machine.isOk()) {
    std::fprintf(stderr, "sharc: error: %s\n",
                 machine.status().message().c_str());
    return kExitBadInput;
  }
  std::error_code error;
  std::filesystem::path workDir = std::filesystem::absolute(config.workDir);
  std::filesystem::create_directories(workDir / "points", error);
  if (error) {
    std::fprintf(stderr, "sharc: error: cannot create %s: %s\n",
                 workDir.c_str(), error.message().c_str());
    return kExitFailure;
  }
  // The files a sweep writes after hours of measuring, checked before
  // (compiled alone, the sweep runs elsewhere); they may be in the work
  // directory.
  if (!config.compileOnly)
    for (const auto &[flag, path] :
         {std::pair{"--output_csv", config.outputCsv},
          {"--output_plot", config.outputPlot}})
      if (Status status =
              path.empty() ? Status::ok() : checkWritablePath(path, flag);
          !status) {
        std::fprintf(stderr, "sharc: error: %s\n", status.message().c_str());
        return kExitBadInput;
      }
  if (config.recompute == "auto" && config.memoryLimitMiB == 0 &&
      machineLimitBytes(*machine) == 0) {
    std::fprintf(stderr,
                 "sharc: error: --recompute auto fits each point in "
                 "--memory-limit-mib MIB a rank, or in the machine file's "
                 "gpu_memory; %s has none\n",
                 machine->name.c_str());
    return kExitBadInput;
  }
  std::vector<BenchPoint> points = expandSweep(config);
  for (size_t i = 0; i < points.size(); ++i) {
    BenchPoint &point = points[i];
    if (!writeText((workDir / point.modelPath).string(),
                   modelYaml(config, point))) {
      std::fprintf(stderr, "sharc: error: cannot write %s\n",
                   (workDir / point.modelPath).c_str());
      return kExitFailure;
    }
    compilePoint(config, workDir.string(), *machine, point);
    std::string what = point.status == "ok" ? point.planPath : point.reason;
    if (!point.recompute.empty())
      what += " (recompute auto: " + point.recompute + ")";
    std::printf("compiled [%zu/%zu] %s, %lld layers, seq %lld: %s\n", i + 1,
                points.size(), point.mode.c_str(),
                static_cast<long long>(point.layers),
                static_cast<long long>(point.seqLen), what.c_str());
  }
  std::string csvPath = std::filesystem::absolute(config.outputCsv).string();
  std::string manifestPath = (workDir / "bench.yaml").string();
  // As given: sharc-run resolves it in its own working directory, which
  // on a GPU node need not hold this one's paths.
  if (!writeText(manifestPath,
                 manifestYaml(config, points, config.outputCsv))) {
    std::fprintf(stderr, "sharc: error: cannot write %s\n",
                 manifestPath.c_str());
    return kExitFailure;
  }
  std::vector<std::string> runArgv = {siblingTool(argv0, "sharc-run"),
                                      "--bench", manifestPath};
  std::vector<std::string> plotArgv = {"python3", SHARC_BENCH_PLOT_SCRIPT,
                                       csvPath,   config.outputPlot,
                                       "--kind",  config.kind};
  if (config.compileOnly) {
    std::printf("manifest %s\nrun: %s\n", manifestPath.c_str(),
                joined(runArgv).c_str());
    if (!config.outputPlot.empty())
      std::printf("plot: %s\n", joined(plotArgv).c_str());
    return 0;
  }
  int exitCode = spawn(runArgv);
  // A sweep stopped by a signal (128 + it) has the points it measured in
  // the CSV: they are plotted too.
  if (!config.outputPlot.empty() &&
      (exitCode == 0 || exitCode == 1 || exitCode > 128))
    (void)spawn({"/usr/bin/env", "python3", SHARC_BENCH_PLOT_SCRIPT, csvPath,
                 config.outputPlot, "--kind", config.kind});
  return exitCode;
}

} // namespace sharc::bench
