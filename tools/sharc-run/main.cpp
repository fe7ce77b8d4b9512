//===- main.cpp - sharc-run: execute a plan and report its steps ----------===//
//
// sharc-run PLAN [--backend auto|cpu|cuda] [--steps N] [--seed N] [--data FILE
// |
//   --synthetic] [--load CKPT] [--save CKPT] [--dump-outputs FILE]
//   [--poison] [--check] [--quiet] [--validate DENSE_PLAN | --compare-cpu]
//   [--trace FILE] [--timeout SECONDS] [--log FILE.csv]
// sharc-run PLAN --generate IDS... [--max-new-tokens N] [--temperature T]
//   [--top-k K] [--top-p P] [--load CKPT]: continue prompts instead
//   (GenerateText.cpp).
// stdout: one line per step and a summary. Errors go to stderr as
// `sharc-run: error: message`; exit 2 for bad input (flags, plan, data,
// checkpoint), 1 for a failure at run time. `mpirun -np P sharc-run PLAN
// --backend cuda` spreads the ranks over P processes (Processes.h): the
// first prints and writes files, every one names itself in its errors.
// The flags are parsed and checked in RunFlags.cpp; this file runs them.
//
//===----------------------------------------------------------------------===//

#include "executor/Checkpoint.h"
#include "executor/DataLoader.h"
#include "executor/Divergence.h"
#include "executor/Generation.h"
#include "executor/Metrics.h"
#include "executor/Processes.h"
#include "executor/Runtime.h"
#include "executor/TransferOrder.h"
#include "executor/Validation.h"
#include "planner/MemoryReport.h"
#include "planner/plan/DeviceWorkspace.h"
#include "planner/plan/FileText.h"
#include "planner/plan/HostMemory.h"
#include "planner/plan/PlanIO.h"
#include "tools/sharc-run/BenchRunner.h"
#include "tools/sharc-run/GenerateText.h"
#include "tools/sharc-run/Resume.h"
#include "tools/sharc-run/RunFlags.h"
#include "tools/sharc-run/StopSignals.h"
#include "tools/sharc-run/TrainLog.h"
#include "tools/sharc-run/Training.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace sharc;

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Under mpirun, this process's index (errors name it); -1 otherwise.
int64_t processIndex = -1;
/// Under mpirun, the run's processes, which a failure ends all at once.
exec::Processes *runProcesses = nullptr;

int fail(const Status &status) {
  int exitCode = status.exitCode() == 0 ? 1 : status.exitCode();
  if (processIndex < 0) {
    std::fprintf(stderr, "sharc-run: error: %s\n", status.message().c_str());
    return exitCode;
  }
  std::fprintf(stderr, "sharc-run: process %lld: error: %s\n",
               static_cast<long long>(processIndex), status.message().c_str());
  // The other processes may be waiting in a collective this one will
  // never join (a background write failed here alone): they end too,
  // whatever they would have reported.
  runProcesses->abortAll(exitCode);
  return exitCode;
}

Status writeTrace(const exec::Runtime &runtime, const std::string &path) {
  auto trace = runtime.lastStepTrace();
  if (!trace)
    return trace.status();
  return writeFileAtomically(path, {*trace}, "trace");
}

/// Planned bytes per rank against what the device holds (cuda only): the
/// plan's regions, then the workspace the compiler predicted
/// (plan/DeviceWorkspace.h: GEMM workspaces, kernel scratch, staging)
/// against what the device allocated; the CUDA context and NCCL's buffers
/// come on top in "device in use".
void printDeviceMemory(const exec::Runtime &runtime, const char *when) {
  std::vector<int64_t> inUse = runtime.deviceBytesInUse();
  std::vector<int64_t> workspace = runtime.workspaceBytes();
  int64_t planned = 0;
  for (const auto &[region, numBytes] : runtime.plan().regionBytes)
    planned += numBytes;
  int64_t predicted = plan::predictDeviceWorkspace(runtime.plan()).totalBytes();
  for (size_t r = 0; r < inUse.size(); ++r)
    if (inUse[r] >= 0)
      std::printf("rank %zu: plan %.1f MiB + workspace %.1f MiB predicted, "
                  "%.1f MiB allocated; device in use %.1f MiB %s\n",
                  r, planned / 1048576.0, predicted / 1048576.0,
                  workspace[r] / 1048576.0, inUse[r] / 1048576.0, when);
}

int validate(const RunFlags &options, const plan::Plan &plan, bool stepsGiven) {
  auto densePlan = plan::readPlanFile(options.validatePath);
  if (!densePlan)
    return fail(densePlan.status());
  exec::ValidationOptions validation;
  validation.backend = options.backend;
  validation.referenceBackend = "cpu";
  validation.shareGpus = options.shareGpus;
  validation.seed = options.seed;
  validation.steps = stepsGiven ? options.steps : 5;
  if (validation.steps < 1)
    return fail(Status::invalidInput("--validate needs --steps >= 1"));
  auto report = exec::validateAgainstDense(plan, *densePlan, validation);
  if (!report)
    return fail(report.status());
  std::printf("validating %s (%s, %s backend) against %s (%s, cpu), %lld "
              "AdamW steps\n",
              options.planPath.c_str(), plan.mode.c_str(),
              report->backend.c_str(), options.validatePath.c_str(),
              densePlan->mode.c_str(),
              static_cast<long long>(validation.steps));
  std::printf("%s", exec::formatReport(*report).c_str());
  return report->passed ? 0 : 1;
}

/// Step `step`'s updates stored a NaN or an infinity: the error naming the
/// tensor that holds one (Divergence.h).
Status divergedAt(const exec::Runtime &runtime, int64_t step) {
  auto diverged = exec::findDivergence(runtime);
  if (!diverged)
    return diverged.status();
  if (*diverged)
    return Status::runtimeError("step " + std::to_string(step) + ": " +
                                **diverged +
                                ": the run diverged; nothing was saved");
  // The flag and the state disagree only if the state changed since.
  return Status::runtimeError("step " + std::to_string(step) +
                              ": an AdamW update stored a NaN or an infinity: "
                              "the run diverged; nothing was saved");
}

int run(RunFlags options, bool stepsGiven,
        std::shared_ptr<exec::Processes> processes) {
  auto plan = plan::readPlanFile(options.planPath);
  if (!plan)
    return fail(plan.status());
  if (options.prompts.empty() && plan->findInput("positions"))
    return fail(Status::invalidInput(
        options.planPath + ": a decode plan (sharc compile --decode) "
                           "generates (--generate IDS); it does not train"));
  if (!options.validatePath.empty()) {
    if (processes->count() > 1)
      return fail(Status::invalidInput(
          "--validate and --compare-cpu run the reference on the cpu in one "
          "process: launch without mpirun"));
    return validate(options, *plan, stepsGiven);
  }
  if (!options.prompts.empty())
    if (Status status =
            exec::checkGenerationInput(*plan, options.prompts, options.stopIds);
        !status)
      return fail(status.withContext(options.planPath));
  // --resume: the newest checkpoint is --load, --steps what is left.
  auto resumed = training::applyResume(options, *processes);
  if (!resumed)
    return fail(resumed.status());

  // Opened before any work, so that a path it cannot write fails at once;
  // under mpirun the first process writes it, as every other file.
  std::optional<training::TrainLog> trainLog;
  if (!options.logPath.empty() && processes->writesFiles()) {
    auto opened = training::TrainLog::open(options.logPath,
                                           *resumed ? (*resumed)->step : -1);
    if (!opened)
      return fail(opened.status());
    trainLog = std::move(*opened);
  }
  if (processes->writesFiles())
    if (Status status = checkOutputFolders(options); !status)
      return fail(status);
  if (!options.quiet) {
    // The memory a run takes is known before it starts: say it first.
    MemoryReport report = buildMemoryReport(*plan);
    std::printf(
        "plan %s (%s), %lld ranks: %.1f MiB per rank (parameters "
        "%.1f, optimizer %.1f, gradients %.1f, activations %.1f)\n",
        plan->modelName.c_str(), plan->mode.c_str(),
        static_cast<long long>(report.worldSize), report.totalBytes / 1048576.0,
        report.parameterBytes / 1048576.0, report.optimizerBytes / 1048576.0,
        report.gradientBytes / 1048576.0,
        report.activationPeakBytes / 1048576.0);
  }
  exec::RunOptions runOptions;
  runOptions.backend = options.backend;
  runOptions.collectiveTimeoutSeconds =
      static_cast<double>(options.timeoutSeconds);
  runOptions.poisonActivations = options.poison;
  runOptions.checkHazards = options.check;
  runOptions.recordTrace = !options.tracePath.empty();
  // Generation's passes are captured unasked: each token is one short
  // forward whose time on a GPU is its launches (docs/training.md).
  runOptions.captureSteps = options.cudaGraph || !options.prompts.empty();
  // "auto" with fewer GPUs than ranks: the ranks share them where the
  // collectives can run on the GPUs (far faster than the cpu backend).
  int64_t sharedGpus = 0;
  if (options.backend == "auto" && !options.shareGpus &&
      processes->count() == 1)
    sharedGpus = exec::gpusToShare(plan->worldSize());
  runOptions.shareGpus = options.shareGpus || sharedGpus > 0;
  runOptions.processes = processes;
  auto setUpStart = std::chrono::steady_clock::now();
  auto runtime = exec::Runtime::create(*plan, runOptions);
  if (!runtime)
    return fail(runtime.status().withContext(options.planPath));
  if (options.check) {
    std::printf("check: %zu instructions on %lld stream%s, no ordering "
                "hazards\n",
                plan->instructions.size(),
                static_cast<long long>(plan->numStreams),
                plan->numStreams == 1 ? "" : "s");
    // What the cuda backend asks of pipeline transfers, said on any.
    if (Status order = exec::checkTransfersPairInOrder(*plan); !order)
      std::printf("check: not for cuda: %s\n", order.message().c_str());
    else
      std::printf("check: transfers pair in order on every link (as NCCL "
                  "matches them)\n");
  }
  exec::Runtime &rt = **runtime;
  if (!options.quiet) {
    std::printf("backend %s", rt.backendName());
    if (sharedGpus > 0)
      std::printf(", %lld ranks sharing %lld GPU%s",
                  static_cast<long long>(plan->worldSize()),
                  static_cast<long long>(sharedGpus),
                  sharedGpus == 1 ? "" : "s");
    if (processes->count() > 1)
      std::printf(", %lld processes (%s), %lld ranks each",
                  static_cast<long long>(processes->count()),
                  processes->describe().c_str(),
                  static_cast<long long>(rt.localRanks().count));
    std::printf(" (set-up %.1f s)\n", secondsSince(setUpStart));
    printDeviceMemory(rt, "after set-up");
  }

  // The token windows consumed so far: a checkpoint's, else the step's.
  int64_t dataPosition = -1;
  exec::DataOrder dataOrder; ///< a shuffled checkpoint's order
  if (!options.loadPath.empty()) {
    auto started = std::chrono::steady_clock::now();
    if (Status status = exec::loadCheckpoint(rt, options.loadPath,
                                             &dataPosition, &dataOrder);
        !status)
      return fail(status);
    if (!options.quiet)
      std::printf("%s\n", training::formatCheckpointLine(
                              "loaded", options.loadPath, secondsSince(started))
                              .c_str());
  } else {
    auto started = std::chrono::steady_clock::now();
    if (Status status = rt.initParams(options.seed); !status)
      return fail(status);
    if (!options.quiet)
      std::printf("parameters drawn (seed %llu) in %.1f s\n",
                  static_cast<unsigned long long>(options.seed),
                  secondsSince(started));
  }

  if (!options.prompts.empty()) {
    if (Status status = printGeneration(rt, options); !status)
      return fail(status);
    return 0;
  }

  int64_t batch = plan->batchSize, seqLen = plan->seqLen;
  if (plan->vocabSize <= 0 || batch <= 0 || seqLen <= 0)
    return fail(Status::invalidInput(
        options.planPath + ": vocab_size, batch_size and seq_len must be "
                           "positive to feed tokens"));
  std::optional<exec::DataLoader> loader;
  if (options.dataPath.empty()) {
    loader = exec::DataLoader::synthetic(plan->vocabSize, batch, seqLen,
                                         options.seed);
  } else {
    auto fromFile = exec::DataLoader::fromFile(options.dataPath,
                                               plan->vocabSize, batch, seqLen);
    if (!fromFile)
      return fail(fromFile.status());
    loader = std::move(*fromFile);
    // A shuffled run resumes in its order, --shuffle given again or not.
    if (dataOrder.stride > 0) {
      if (Status status = loader->setOrder(dataOrder); !status)
        return fail(status.withContext(options.loadPath + " with --data " +
                                       options.dataPath));
    } else {
      loader->setShuffle(options.shuffle);
    }
  }
  if (dataPosition < 0)
    dataPosition = (rt.nextStep() - 1) * batch;
  std::optional<exec::DataLoader> valLoader;
  if (!options.valPath.empty()) {
    auto fromFile = exec::DataLoader::fromFile(options.valPath, plan->vocabSize,
                                               batch, seqLen);
    if (!fromFile)
      return fail(fromFile.status());
    valLoader = std::move(*fromFile);
  }
  auto runStart = std::chrono::steady_clock::now();
  auto secondsSinceStart = [&] { return secondsSince(runStart); };
  auto evaluate = [&](int64_t step) -> Status {
    auto result = training::evaluate(rt, *valLoader, options.evalBatches);
    if (!result)
      return result.status();
    std::printf("%s\n", training::formatEval(step, *result).c_str());
    std::fflush(stdout);
    if (trainLog)
      return trainLog->writeEval(step, *result, secondsSinceStart());
    return Status::ok();
  };
  // --save-every writes in the background where the host can hold a
  // snapshot of the state beside the run.
  bool background = options.saveEvery > 0 && !options.saveInPlace;
  if (background) {
    std::string why;
    if (!exec::snapshotFits(exec::checkpointBytes(rt), memAvailableBytes(),
                            why)) {
      background = false;
      if (!options.quiet && rt.writesFiles())
        std::printf("--save-every writes in place: %s\n", why.c_str());
    }
  }
  training::CheckpointRotation rotation(options.savePath, options.keepLast,
                                        background);
  if (*resumed)
    for (const auto &[step, path] : (*resumed)->rotating)
      rotation.adopt(path, step);
  // A background save's line once its file is whole; its failure fails
  // the run.
  auto reportSaved = [&](bool wait) -> Status {
    auto started = std::chrono::steady_clock::now();
    auto written = rotation.finished(wait);
    if (!written)
      return written.status();
    // A save that comes before the last one's write is done waits for it:
    // saves closer than a write takes, which the line says.
    double waited = secondsSince(started);
    if (*written && !options.quiet && rt.writesFiles())
      std::printf("%s%s\n",
                  training::formatCheckpointLine("saved", (*written)->path,
                                                 (*written)->seconds)
                      .c_str(),
                  waited >= 0.05 ? training::formatWait(waited).c_str() : "");
    return Status::ok();
  };
  double baseLr = training::baseLearningRate(*plan);

  // From here on, SIGINT, SIGTERM or SIGUSR1 stops the run after its step,
  // saved where --save says (StopSignals.h). The signal may reach one
  // process alone: every process stops after the same step.
  training::installStopHandlers(/*announce=*/rt.writesFiles());
  auto agreedStop = [&]() -> Result<int> {
    int request = training::stopRequest(options.stopFile);
    if (processes->count() == 1)
      return request;
    auto agreed = processes->max(static_cast<double>(request));
    if (!agreed)
      return agreed.status();
    return static_cast<int>(*agreed);
  };
  int stoppedBy = 0;
  int64_t stepsRun = 0;

  // Where the run starts, so that the first comparison is on the page.
  if (valLoader && options.steps > 0)
    if (Status status = evaluate(rt.nextStep() - 1); !status)
      return fail(status);

  exec::Metrics metrics(batch * seqLen);
  for (int64_t i = 0; i < options.steps; ++i, ++stepsRun) {
    auto stop = agreedStop();
    if (!stop)
      return fail(stop.status());
    if ((stoppedBy = *stop) != 0)
      break;
    int64_t step = rt.nextStep();
    if (Status status = rt.setBatch(loader->batchAt(dataPosition)); !status)
      return fail(status);
    auto stats = rt.step();
    if (!stats)
      return fail(stats.status());
    dataPosition += batch;
    // A diverged run stops here: nothing after it, a checkpoint least of
    // all, may be written from that state.
    if (plan->findOutput("loss") && !std::isfinite(stats->loss))
      return fail(
          Status::runtimeError("the loss of step " + std::to_string(step) +
                               " is " + std::to_string(stats->loss) +
                               ": the run diverged; nothing was saved"));
    // The updates flag a NaN or an infinity they store (kernels/AdamW.h),
    // on every backend at no cost to a finite step; only then is the state
    // gathered to name the tensor.
    if (stats->nonFiniteUpdate)
      return fail(divergedAt(rt, step));
    exec::StepRecord record = metrics.record(step, *stats);
    if (baseLr >= 0)
      record.lr = baseLr * plan->lrSchedule.factor(step);
    // Wall time per step so far, evaluations and saves included.
    record.elapsedSeconds = secondsSinceStart();
    record.etaSeconds = record.elapsedSeconds / static_cast<double>(i + 1) *
                        static_cast<double>(options.steps - i - 1);
    if (!options.quiet)
      std::printf("%s\n", exec::Metrics::formatStep(record).c_str());
    if (trainLog)
      if (Status status = trainLog->writeStep(record); !status)
        return fail(status);
    // The last step's evaluation comes after --dump-outputs, which must
    // see the training step's outputs.
    if (valLoader && options.evalEvery > 0 && step % options.evalEvery == 0 &&
        i + 1 < options.steps)
      if (Status status = evaluate(step); !status)
        return fail(status);
    bool saves = options.saveEvery > 0 && step % options.saveEvery == 0;
    if (Status status = reportSaved(/*wait=*/saves); !status)
      return fail(status);
    if (saves) {
      auto started = std::chrono::steady_clock::now();
      auto saved = rotation.save(rt, dataPosition, loader->order());
      if (!saved)
        return fail(saved.status().withContext("step " + std::to_string(step)));
      if (!options.quiet && rt.writesFiles())
        std::printf("%s\n", rotation.background()
                                ? training::formatSnapshotLine(
                                      *saved, rotation.snapshotBytes(),
                                      secondsSince(started))
                                      .c_str()
                                : training::formatCheckpointLine(
                                      "saved", *saved, secondsSince(started))
                                      .c_str());
    }
  }
  if (Status status = reportSaved(/*wait=*/true); !status)
    return fail(status);
  std::printf("%s\n", metrics.summary().c_str());
  if (!options.quiet && options.steps > 0)
    printDeviceMemory(rt, "after the steps");
  std::fflush(stdout);

  // A stopped run keeps its state and nothing that describes a whole run.
  if (!options.dumpPath.empty() && !stoppedBy) {
    if (options.steps == 0)
      return fail(Status::invalidInput("--dump-outputs needs --steps >= 1"));
    auto outputs = rt.gatherOutputs();
    if (!outputs)
      return fail(outputs.status());
    if (rt.writesFiles())
      if (Status status = plan::writeSafeTensors(options.dumpPath, *outputs);
          !status)
        return fail(status);
  }
  if (valLoader && !stoppedBy)
    if (Status status = evaluate(rt.nextStep() - 1); !status)
      return fail(status);
  if (!options.savePath.empty()) {
    auto started = std::chrono::steady_clock::now();
    // A run that ends on a --save-every step has that state on disk
    // already: the final checkpoint is the same file, not a second save.
    std::optional<std::string> same = rotation.writtenAt(rt.nextStep() - 1);
    Status status =
        same ? (rt.writesFiles() ? training::linkOrCopy(*same, options.savePath)
                                 : Status::ok())
             : exec::saveCheckpoint(rt, options.savePath, true, dataPosition,
                                    loader->order(), /*refuseDiverged=*/true);
    if (!status)
      return fail(
          status.withContext("step " + std::to_string(rt.nextStep() - 1)));
    if (!options.quiet && rt.writesFiles())
      std::printf("%s%s\n",
                  training::formatCheckpointLine("saved", options.savePath,
                                                 secondsSince(started))
                      .c_str(),
                  same ? (", the file of " + *same).c_str() : "");
  }
  // The stop file asked for this stop, or came too late for one.
  std::string stopFileLeft = training::consumeStopFile(options.stopFile);
  if (stoppedBy) {
    std::string by = stoppedBy == training::kStopFileRequest
                         ? "the stop file " + options.stopFile +
                               (stopFileLeft.empty() ? " (removed)" : "")
                         : training::signalName(stoppedBy);
    std::printf(
        "stopped by %s after step %lld (%lld of the %lld steps "
        "asked)%s%s\n",
        by.c_str(), static_cast<long long>(rt.nextStep() - 1),
        static_cast<long long>(stepsRun), static_cast<long long>(options.steps),
        options.savePath.empty()
            ? ": nothing saved (--save FILE keeps a stopped run)"
        : options.resume
            ? "; the same command continues it"
            : ("; --load " + options.savePath + " --steps " +
               std::to_string(options.steps - stepsRun) + " runs the rest")
                  .c_str(),
        stopFileLeft.empty() ? "" : ("; " + stopFileLeft).c_str());
    return training::stopExitCode(stoppedBy);
  }
  if (!stopFileLeft.empty())
    std::printf("warning: %s\n", stopFileLeft.c_str());
  if (!options.tracePath.empty())
    if (Status status = writeTrace(rt, options.tracePath); !status)
      return fail(status);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  // sharc never throws, but the standard library may (std::bad_alloc on a
  // plan sized beyond this host's memory): no exception reaches the user.
  try {
    // `sharc-run --bench MANIFEST`: a benchmark sweep (BenchRunner.h).
    if (argc > 1 && std::string(argv[1]) == "--bench") {
      auto processes = exec::joinProcesses();
      if (!processes)
        return fail(processes.status());
      if ((*processes)->count() > 1)
        return fail(Status::invalidInput(
            "--bench runs every point in one process: launch without mpirun"));
      return benchrun::runBenchMain(argc, argv);
    }
    auto options = parseRunFlags(argc, argv);
    if (!options)
      return fail(options.status());
    bool stepsGiven = false;
    for (int i = 1; i < argc; ++i)
      stepsGiven |= std::string(argv[i]) == "--steps";
    // Under mpirun: MPI's world, each process driving its span of ranks.
    auto processes = exec::joinProcesses();
    if (!processes)
      return fail(processes.status());
    if ((*processes)->count() > 1) {
      processIndex = (*processes)->index();
      runProcesses = processes->get();
      // The first process speaks for the run; the others only report
      // their errors.
      if (processIndex > 0 && !std::freopen("/dev/null", "w", stdout))
        return fail(Status::runtimeError("cannot silence stdout"));
    }
    return run(*options, stepsGiven, *processes);
  } catch (const std::bad_alloc &) {
    return fail(Status::runtimeError("out of host memory"));
  } catch (const std::exception &error) {
    return fail(
        Status::runtimeError(std::string("internal error: ") + error.what()));
  }
}
