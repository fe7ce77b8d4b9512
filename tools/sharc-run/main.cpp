//===- main.cpp - sharc-run: execute a plan and report its steps ----------===//
//
// sharc-run PLAN [--backend auto|cpu|cuda] [--steps N] [--seed N] [--data FILE
// |
//   --synthetic] [--load CKPT] [--save CKPT] [--dump-outputs FILE]
//   [--poison] [--check] [--quiet] [--validate DENSE_PLAN | --compare-cpu]
//   [--trace FILE] [--timeout SECONDS]
// stdout: one line per step and a summary. Errors go to stderr as
// `sharc-run: error: message`; exit 2 for bad input (flags, plan, data,
// checkpoint), 1 for a failure at run time. `mpirun -np P sharc-run PLAN
// --backend cuda` spreads the ranks over P processes (Processes.h): the
// first prints and writes files, every one names itself in its errors.
//
//===----------------------------------------------------------------------===//

#include "executor/Checkpoint.h"
#include "executor/DataLoader.h"
#include "executor/Divergence.h"
#include "executor/Metrics.h"
#include "executor/Processes.h"
#include "executor/Runtime.h"
#include "executor/TransferOrder.h"
#include "executor/Validation.h"
#include "planner/MemoryReport.h"
#include "planner/plan/DeviceWorkspace.h"
#include "planner/plan/FileText.h"
#include "planner/plan/PlanIO.h"
#include "tools/sharc-run/BenchRunner.h"
#include "tools/sharc-run/Training.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace sharc;

namespace {

struct Options {
  std::string planPath;
  std::string backend = "auto";
  int64_t steps = 10;
  int64_t timeoutSeconds = 60;
  bool compareCpu = false;
  uint64_t seed = 42;
  std::string dataPath; ///< empty: synthetic
  std::string loadPath, savePath, dumpPath;
  std::string tracePath;    ///< Chrome trace of the last step; empty: none
  std::string validatePath; ///< the dense plan to validate against
  bool poison = false;
  bool check = false;
  bool quiet = false;
  bool cudaGraph = false;   ///< --cuda-graph: replay steps as one graph
  bool shareGpus = false;   ///< --share-gpus: more ranks than GPUs
  std::string valPath;      ///< --val-data; empty: no evaluation
  int64_t evalEvery = 0;    ///< steps between evaluations (0: at the end)
  int64_t evalBatches = 16; ///< batches of the validation file per eval
  int64_t saveEvery = 0;    ///< 0: only the final --save
  int64_t keepLast = 3;     ///< rotating checkpoints kept
  bool shuffle = false;     ///< --data's windows in a scattered order
};

const char *kUsage =
    "usage: sharc-run PLAN [--backend auto|cpu|cuda] [--steps N] [--seed N]\n"
    "                 [--data FILE [--shuffle] | --synthetic] [--load CKPT]\n"
    "                 [--save CKPT] [--dump-outputs FILE.safetensors]\n"
    "                 [--poison] [--check] [--quiet] [--cuda-graph]\n"
    "                 [--share-gpus]\n"
    "                 [--validate DENSE_PLAN | --compare-cpu]\n"
    "                 [--trace FILE.json] [--timeout SECONDS]\n"
    "                 [--val-data FILE [--eval-every N] [--eval-batches N]]\n"
    "                 [--save-every N [--keep-last K]]\n"
    "       sharc-run --bench MANIFEST [--backend B] [--output_csv FILE]\n"
    "                 (a sweep `sharc bench` compiled; BenchRunner.h)\n"
    "  --backend       auto (default): cuda when this build has it and the\n"
    "                  node has a GPU per rank, else cpu\n"
    "  --data FILE     a token file (docs/data.md: scripts/prepare-data.py's,\n"
    "                  or raw int32 ids), read in windows of seq_len tokens\n"
    "                  (default: --synthetic); --shuffle reads its windows\n"
    "                  in a fixed scattered order that checkpoints keep\n"
    "  --val-data FILE  validation tokens: prints the loss and perplexity\n"
    "                  of the forward pass alone (no parameter changes) on\n"
    "                  its first --eval-batches batches (16) before the\n"
    "                  first step, every --eval-every steps and after the\n"
    "                  last\n"
    "  --save-every N  also write CKPT-stepNNNNNN.safetensors every N steps\n"
    "                  (--save CKPT names them), keeping the last\n"
    "                  --keep-last K (3); every checkpoint is atomic\n"
    "  --poison        fill activations with NaN before every step\n"
    "  --check         reject a plan whose streams may touch the same\n"
    "                  bytes without an event ordering them (exit 1),\n"
    "                  fill each activation with NaN after its last use,\n"
    "                  and stop (exit 1) at the first instruction whose\n"
    "                  output holds a NaN or infinity, naming it\n"
    "  --validate [DENSE_PLAN]  (default: PLAN.dense)\n"
    "                  run PLAN and the dense plan from the same weights and\n"
    "                  tokens; compare loss, logits and every gradient after\n"
    "                  one step and the parameters after --steps (default 5)\n"
    "                  AdamW steps; both compiled with --emit-logits\n"
    "                  --keep-grads. Exit 1 when they differ. PLAN runs on\n"
    "                  --backend, the dense plan on the cpu.\n"
    "  --compare-cpu   as --validate, with PLAN itself run on the cpu as\n"
    "                  the reference (PLAN on --backend, normally cuda)\n"
    "  --timeout S     deadline of every collective and event wait, and of\n"
    "                  a step's drain on the GPU (default 60)\n"
    "  --trace FILE.json  write the last step's instruction timings as a\n"
    "                  Chrome trace (chrome://tracing, Perfetto): one\n"
    "                  process per rank, one thread per stream\n"
    "  --cuda-graph    on the GPU, capture the second step as a CUDA graph\n"
    "                  and replay it for every later step (fewer launches;\n"
    "                  traced steps run eagerly)\n"
    "  --share-gpus    on cuda, run a plan with more ranks than the node has\n"
    "                  GPUs: rank r on GPU r mod GPUs, collectives and\n"
    "                  transfers through the host on managed memory. Slow;\n"
    "                  for checking multi-rank plans (with --validate or\n"
    "                  --compare-cpu) on a small machine\n";

/// Under mpirun, this process's index (errors name it); -1 otherwise.
int64_t processIndex = -1;

int fail(const Status &status) {
  if (processIndex >= 0)
    std::fprintf(stderr, "sharc-run: process %lld: error: %s\n",
                 static_cast<long long>(processIndex),
                 status.message().c_str());
  else
    std::fprintf(stderr, "sharc-run: error: %s\n", status.message().c_str());
  return status.exitCode() == 0 ? 1 : status.exitCode();
}

/// A decimal count in [0, 2^62]; anything else (a sign, a suffix, a value
/// that would wrap) is nullopt, never a wrapped number.
std::optional<int64_t> parseCount(const std::string &text) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    return std::nullopt;
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE || value > (1ull << 62))
    return std::nullopt;
  return static_cast<int64_t>(value);
}

Result<Options> parseFlags(int argc, char **argv) {
  Options options;
  bool timeoutGiven = false;
  auto bad = [](const std::string &message) {
    return Status::invalidInput(message);
  };
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc)
        return std::nullopt;
      return std::string(argv[++i]);
    };
    auto needValue = [&](std::string &into) -> Status {
      auto text = value();
      if (!text)
        return bad(flag + " needs a value");
      into = *text;
      return Status::ok();
    };
    auto needCount = [&](auto &into) -> Status {
      auto text = value();
      std::optional<int64_t> count = text ? parseCount(*text) : std::nullopt;
      if (!count)
        return bad(flag + " needs a non-negative integer" +
                   (text ? ", got '" + *text + "'" : std::string()));
      into = static_cast<std::decay_t<decltype(into)>>(*count);
      return Status::ok();
    };
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (flag == "--backend") {
      SHARC_TRY(needValue(options.backend));
    } else if (flag == "--compare-cpu") {
      options.compareCpu = true;
    } else if (flag == "--timeout") {
      timeoutGiven = true;
      SHARC_TRY(needCount(options.timeoutSeconds));
      if (options.timeoutSeconds < 1 || options.timeoutSeconds > 86400)
        return bad("--timeout needs 1 to 86400 seconds");
    } else if (flag == "--steps") {
      SHARC_TRY(needCount(options.steps));
      if (options.steps > 100000000)
        return bad("--steps " + std::to_string(options.steps) +
                   " is over the limit of 100000000");
    } else if (flag == "--seed") {
      SHARC_TRY(needCount(options.seed));
    } else if (flag == "--data") {
      SHARC_TRY(needValue(options.dataPath));
    } else if (flag == "--shuffle") {
      options.shuffle = true;
    } else if (flag == "--val-data") {
      SHARC_TRY(needValue(options.valPath));
    } else if (flag == "--eval-every") {
      SHARC_TRY(needCount(options.evalEvery));
    } else if (flag == "--eval-batches") {
      SHARC_TRY(needCount(options.evalBatches));
      if (options.evalBatches < 1)
        return bad("--eval-batches needs at least 1");
    } else if (flag == "--save-every") {
      SHARC_TRY(needCount(options.saveEvery));
    } else if (flag == "--keep-last") {
      SHARC_TRY(needCount(options.keepLast));
      if (options.keepLast < 1)
        return bad("--keep-last needs at least 1");
    } else if (flag == "--synthetic") {
      options.dataPath.clear();
    } else if (flag == "--load") {
      SHARC_TRY(needValue(options.loadPath));
    } else if (flag == "--save") {
      SHARC_TRY(needValue(options.savePath));
    } else if (flag == "--dump-outputs") {
      SHARC_TRY(needValue(options.dumpPath));
    } else if (flag == "--trace") {
      SHARC_TRY(needValue(options.tracePath));
    } else if (flag == "--validate") {
      // The dense plan may follow; without it, PLAN.dense (what `sharc
      // compile --with-dense-reference` writes beside the plan).
      if (i + 1 < argc && argv[i + 1][0] != '-')
        options.validatePath = argv[++i];
      else
        options.validatePath = "<plan>.dense";
    } else if (flag == "--poison") {
      options.poison = true;
    } else if (flag == "--check") {
      options.check = true;
    } else if (flag == "--quiet") {
      options.quiet = true;
    } else if (flag == "--cuda-graph") {
      options.cudaGraph = true;
    } else if (flag == "--share-gpus") {
      options.shareGpus = true;
    } else if (!flag.empty() && flag[0] == '-') {
      return bad("unknown flag '" + flag + "' (see --help)");
    } else if (options.planPath.empty()) {
      options.planPath = flag;
    } else {
      return bad("unexpected argument '" + flag + "': one plan per run");
    }
  }
  if (options.planPath.empty())
    return bad("no plan file given (see --help)");
  if (!options.tracePath.empty() && options.steps == 0)
    return bad("--trace needs --steps >= 1");
  if (!options.tracePath.empty() && !options.validatePath.empty())
    return bad("--trace does not apply to --validate");
  if (options.shuffle && options.dataPath.empty())
    return bad("--shuffle needs --data FILE");
  if (options.evalEvery > 0 && options.valPath.empty())
    return bad("--eval-every needs --val-data FILE");
  if (options.saveEvery > 0 && options.savePath.empty())
    return bad("--save-every needs --save CKPT (it names the checkpoints)");
  if (options.validatePath == "<plan>.dense")
    options.validatePath = options.planPath + ".dense";
  if (options.backend != "cpu" && options.backend != "cuda" &&
      options.backend != "auto")
    return bad("unknown backend '" + options.backend +
               "' (expected auto, cpu or cuda)");
  if (options.compareCpu && !options.validatePath.empty())
    return bad("--compare-cpu and --validate each pick a reference; give one");
  if (options.compareCpu && !options.tracePath.empty())
    return bad("--trace does not apply to --compare-cpu");
  if (options.compareCpu)
    options.validatePath = options.planPath;
  // An output may never replace an input of the same run.
  for (const std::string *output :
       {&options.savePath, &options.dumpPath, &options.tracePath})
    for (const std::string *input : {&options.planPath, &options.loadPath,
                                     &options.dataPath, &options.valPath})
      if (!output->empty() && !input->empty() && sameFile(*output, *input))
        return bad("'" + *output + "' is both an input and an output of " +
                   "this run; write the output elsewhere");
  // Validation starts both runs from --seed's weights: a checkpoint, an
  // output file or a token file would be silently ignored there.
  if (!options.validatePath.empty())
    for (const auto &[flag, value] : {std::pair{"--load", &options.loadPath},
                                      {"--save", &options.savePath},
                                      {"--dump-outputs", &options.dumpPath},
                                      {"--data", &options.dataPath},
                                      {"--val-data", &options.valPath}})
      if (!value->empty())
        return bad(std::string(flag) + " does not apply to " +
                   (options.compareCpu ? "--compare-cpu" : "--validate"));
  // Nor are the checking modes or the deadline passed to validation.
  if (!options.validatePath.empty())
    for (const auto &[flag, given] : {std::pair{"--check", options.check},
                                      {"--poison", options.poison},
                                      {"--timeout", timeoutGiven}})
      if (given)
        return bad(std::string(flag) + " does not apply to " +
                   (options.compareCpu ? "--compare-cpu" : "--validate"));
  return options;
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

int validate(const Options &options, const plan::Plan &plan, bool stepsGiven) {
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

/// A diverged state (Divergence.h) after step `step` as a runtime error:
/// nothing may be written from it, a checkpoint least of all.
Status checkDivergence(const exec::Runtime &runtime, int64_t step) {
  auto diverged = exec::findDivergence(runtime);
  if (!diverged)
    return diverged.status();
  if (*diverged)
    return Status::runtimeError("step " + std::to_string(step) + ": " +
                                **diverged +
                                ": the run diverged; nothing was saved");
  return Status::ok();
}

int run(const Options &options, bool stepsGiven,
        std::shared_ptr<exec::Processes> processes) {
  auto plan = plan::readPlanFile(options.planPath);
  if (!plan)
    return fail(plan.status());
  if (!options.validatePath.empty()) {
    if (processes->count() > 1)
      return fail(Status::invalidInput(
          "--validate and --compare-cpu run the reference on the cpu in one "
          "process: launch without mpirun"));
    return validate(options, *plan, stepsGiven);
  }
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
  runOptions.captureSteps = options.cudaGraph;
  runOptions.shareGpus = options.shareGpus;
  runOptions.processes = processes;
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
    if (processes->count() > 1)
      std::printf(", %lld processes (%s), %lld ranks each",
                  static_cast<long long>(processes->count()),
                  processes->describe().c_str(),
                  static_cast<long long>(rt.localRanks().count));
    std::printf("\n");
    printDeviceMemory(rt, "after set-up");
  }

  // The token windows consumed so far: a checkpoint's, else the step's.
  int64_t dataPosition = -1;
  exec::DataOrder dataOrder; ///< a shuffled checkpoint's order
  if (!options.loadPath.empty()) {
    if (Status status = exec::loadCheckpoint(rt, options.loadPath,
                                             &dataPosition, &dataOrder);
        !status)
      return fail(status);
  } else if (Status status = rt.initParams(options.seed); !status) {
    return fail(status);
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
  auto evaluate = [&](int64_t step) -> Status {
    auto result = training::evaluate(rt, *valLoader, options.evalBatches);
    if (!result)
      return result.status();
    std::printf("%s\n", training::formatEval(step, *result).c_str());
    std::fflush(stdout);
    return Status::ok();
  };
  training::CheckpointRotation rotation(options.savePath, options.keepLast);
  double baseLr = training::baseLearningRate(*plan);
  auto runStart = std::chrono::steady_clock::now();

  // Where the run starts, so that the first comparison is on the page.
  if (valLoader && options.steps > 0)
    if (Status status = evaluate(rt.nextStep() - 1); !status)
      return fail(status);

  exec::Metrics metrics(batch * seqLen);
  for (int64_t i = 0; i < options.steps; ++i) {
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
    // On the cpu the state is in host memory, so every step is checked;
    // on a GPU that would copy it to the host each step, so only the state
    // a checkpoint would hold is (below).
    if (rt.backendName() == std::string("cpu"))
      if (Status status = checkDivergence(rt, step); !status)
        return fail(status);
    exec::StepRecord record = metrics.record(step, *stats);
    if (baseLr >= 0)
      record.lr = baseLr * plan->lrSchedule.factor(step);
    // Wall time per step so far, evaluations and saves included.
    record.elapsedSeconds = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - runStart)
                                .count();
    record.etaSeconds = record.elapsedSeconds / static_cast<double>(i + 1) *
                        static_cast<double>(options.steps - i - 1);
    if (!options.quiet)
      std::printf("%s\n", exec::Metrics::formatStep(record).c_str());
    // The last step's evaluation comes after --dump-outputs, which must
    // see the training step's outputs.
    if (valLoader && options.evalEvery > 0 && step % options.evalEvery == 0 &&
        i + 1 < options.steps)
      if (Status status = evaluate(step); !status)
        return fail(status);
    if (options.saveEvery > 0 && step % options.saveEvery == 0) {
      if (Status status = checkDivergence(rt, step); !status)
        return fail(status);
      auto saved = rotation.save(rt, dataPosition, loader->order());
      if (!saved)
        return fail(saved.status());
      if (!options.quiet)
        std::printf("saved %s\n", saved->c_str());
    }
  }
  std::printf("%s\n", metrics.summary().c_str());
  if (!options.quiet && options.steps > 0)
    printDeviceMemory(rt, "after the steps");
  std::fflush(stdout);

  if (!options.dumpPath.empty()) {
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
  if (valLoader)
    if (Status status = evaluate(rt.nextStep() - 1); !status)
      return fail(status);
  if (!options.savePath.empty()) {
    if (Status status = checkDivergence(rt, rt.nextStep() - 1); !status)
      return fail(status);
    if (Status status = exec::saveCheckpoint(rt, options.savePath, true,
                                             dataPosition, loader->order());
        !status)
      return fail(status);
  }
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
    auto options = parseFlags(argc, argv);
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
