//===- main.cpp - sharc: compile a model into a plan ----------------------===//
//
//   sharc compile MODEL.yaml [--run RUN.yaml] [-o PLAN] [--dump-ir=after-all]
//                 [--emit-logits] [--no-optimizer]
//
// Exit status: 0 success, 2 bad input (YAML, flags, a layout a pass
// rejects), 1 a failure inside sharc or while writing the plan.
//
//===----------------------------------------------------------------------===//

#include "planner/CostModel.h"
#include "planner/MemoryReport.h"
#include "planner/StageMemory.h"
#include "planner/StepSimulation.h"
#include "planner/Timeline.h"
#include "planner/plan/FileText.h"
#include "planner/plan/PlanIO.h"
#include "tools/sharc/BenchSweep.h"
#include "tools/sharc/CompileDriver.h"
#include "tools/sharc/DefaultMachine.h"
#include "tools/sharc/HfConvert.h"
#include "tools/sharc/RecomputeSearch.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <vector>

using namespace mlir;

namespace {

constexpr int kExitBadInput = 2;
constexpr int kExitFailure = 1;

struct CompileFlags {
  std::string modelPath, runPath, outputPath;
  std::string dumpIr; ///< "", "after-all" or "final"
  std::string mode = "dense";
  std::optional<int64_t> dpSize, tpSize, bucketBytes, ppSize, ppChunks;
  std::optional<int64_t> cpSize, numMicrobatches, zeroStage;
  std::optional<int64_t> recomputeLayers, memoryLimitMiB, prefillRows;
  std::string cpComm, cpSplit, ppSchedule, ppBalance;
  bool sequenceParallel = false, vocabParallel = false;
  std::string recompute, recomputeRest;
  bool emitLogits = false, decode = false;
  bool withOptimizer = true;
  bool keepGradients = false;
  bool fuseProjections = true;
  bool fuseAttentionProjections = true; ///< q/k/v too, not gate/up alone
  bool fuseAdds = true;
  bool fuseNormRope = true;
  bool withDenseReference = false;
  std::string report; ///< "", "text" or "json"
  std::string machinePath, traceSimPath;
  std::string schedule = "defer"; ///< --schedule defer|latency
};

void printUsage(FILE *out) {
  std::fprintf(
      out,
      "usage: sharc compile MODEL.yaml [--run RUN.yaml] [-o PLAN]\n"
      "         [--mode dense|ddp|tp|tp_sp|tp_sp_async|tp_vp|"
      "tp_sp_async_vp|cp|tp_cp|pp|tp_pp|\n"
      "                 pp_cp|tp_cp_pp|config]  (the mode's first "
      "axis takes its flag's\n"
      "          size, 2 unless given: dp for ddp, cp for cp, pp "
      "for pp and pp_cp,\n"
      "          tp for the tp_ modes; its other axes are 2 unless "
      "--cp/--pp say;\n"
      "          config takes every size from its flag)\n"
      "         [--dp N] [--tp N] [--pp N] "
      "[--pp-schedule gpipe|1f1b|interleaved]\n"
      "         [--pp-chunks V | --virtual-stages V (model chunks a "
      "stage, interleaved)]\n"
      "         [--microbatches M (num_microbatches; overrides the "
      "run file)]\n"
      "         [--pp-balance cost|layers] [--sp] [--vp] "
      "[--recompute none|sp-allgather|selective|full|auto]\n"
      "         (full: each layer's forward runs again in the "
      "backward; only layer inputs are kept; selective: its norms, "
      "rope and SwiGLU alone, and context parallelism's exchange)\n"
      "         [--recompute-layers N (full, selective: the first N layers "
      "alone)]\n         [--recompute-rest selective (with full and N: the "
      "other layers selectively)]\n"
      "         [--recompute auto [--memory-limit-mib M] (the least "
      "re-run whose plan fits M MiB a rank;\n"
      "          default: the machine file's gpu_memory less 1920 MiB)]\n"
      "         [--cp N (context parallel: the sequence split over N "
      "ranks)]\n"
      "         [--cp-comm a2a|all_gather|ring (attention's exchange: "
      "Ulysses all_to_all,\n"
      "          K/V all-gathered, or K/V blocks passed rank to rank "
      "(ring attention);\n"
      "          default a2a)]\n"
      "         [--cp-split balanced|contiguous (rank r holds chunks "
      "r and 2N-1-r of 2N,\n"
      "          even causal work; or block r; default balanced)]\n"
      "         [--bucket-bytes N (dp and cp gradient buckets, "
      "default 25 MiB)]\n"
      "         [--zero 0|1|3 (1: ZeRO-1, each dp rank keeps the "
      "optimizer state of one\n"
      "          block of every parameter: gradients "
      "reduce-scattered, blocks all-gathered;\n"
      "          3: ZeRO-3, the parameters too, gathered a group "
      "ahead of the ops that read them)]\n"
      "         [--dump-ir=after-all|final] [--emit-logits] "
      "[--keep-grads] [--no-optimizer]\n"
      "         [--decode (a generation step: one new token a sample "
      "against a key/value cache of seq_len positions; dense)]\n"
      "         [--prefill-rows T (with --decode: also a prompt's prefill, "
      "T positions a sample a step)]\n"
      "         [--fuse-projections[=all|gate_up|none] (one GEMM "
      "for q/k/v and for gate/up,\n"
      "          the default; gate/up alone; or every projection "
      "its own GEMM)]\n"
      "         [--no-fuse-projections (as =none)]\n"
      "         [--no-fuse-adds (residual adds and gradient sums "
      "as their own ops, not in the GEMMs' epilogue)]\n"
      "         [--no-fuse-norm-rope (q/k norms and rope as "
      "separate kernels)]\n"
      "         [--with-dense-reference (also write PLAN.dense for "
      "sharc-run --validate)]\n"
      "         [--schedule defer|latency (weight gradients past the "
      "next collective, or a list schedule that fills every wait)]\n"
      "         [--report[=text|json]] [--machine MACHINE.yaml] "
      "[--trace-sim TRACE.json]\n"
      "       sharc bench --kind memory|throughput ... (the "
      "benchmark sweep; sharc bench --help)\n"
      "       sharc export --format hf CKPT MODEL.yaml -o DIR "
      "[--tokenizer tokenizer.json]\n"
      "       sharc import DIR -o MODEL.yaml --checkpoint CKPT\n");
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "sharc: error: %s\n", message.c_str());
  printUsage(stderr);
  return kExitBadInput;
}

/// Parses the flags after `compile`; returns an exit code on error.
std::optional<int> parseFlags(const std::vector<std::string> &args,
                              CompileFlags &flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    auto value = [&](const char *name) -> std::optional<std::string> {
      if (i + 1 >= args.size())
        return std::nullopt;
      return args[++i];
    };
    if (arg == "-o" || arg == "--run" || arg == "--mode" ||
        arg == "--recompute" || arg == "--machine" || arg == "--trace-sim" ||
        arg == "--schedule" || arg == "--cp-comm" || arg == "--cp-split" ||
        arg == "--pp-schedule" || arg == "--pp-balance" ||
        arg == "--recompute-rest") {
      std::optional<std::string> v = value(arg.c_str());
      if (!v)
        return usageError(arg + " needs a value");
      if (arg == "-o")
        flags.outputPath = *v;
      else if (arg == "--run")
        flags.runPath = *v;
      else if (arg == "--mode")
        flags.mode = *v;
      else if (arg == "--machine")
        flags.machinePath = *v;
      else if (arg == "--schedule")
        flags.schedule = *v;
      else if (arg == "--pp-schedule")
        flags.ppSchedule = *v;
      else if (arg == "--pp-balance")
        flags.ppBalance = *v;
      else if (arg == "--trace-sim")
        flags.traceSimPath = *v;
      else if (arg == "--cp-comm")
        flags.cpComm = *v;
      else if (arg == "--cp-split")
        flags.cpSplit = *v;
      else if (arg == "--recompute-rest")
        flags.recomputeRest = *v;
      else
        flags.recompute = *v;
    } else if (arg == "--dp" || arg == "--tp" || arg == "--cp" ||
               arg == "--pp" || arg == "--pp-chunks" ||
               arg == "--virtual-stages" || arg == "--microbatches" ||
               arg == "--bucket-bytes" || arg == "--recompute-layers" ||
               arg == "--memory-limit-mib" || arg == "--prefill-rows") {
      std::optional<std::string> v = value(arg.c_str());
      char *end = nullptr;
      long long size = v ? std::strtoll(v->c_str(), &end, 10) : 0;
      long long limit = arg == "--bucket-bytes" || arg == "--memory-limit-mib"
                            ? (1LL << 40)
                            : 4096;
      if (!v || v->empty() || *end != '\0' || size < 1 || size > limit)
        return usageError(arg + " needs a positive integer");
      // --virtual-stages is the original's name for --pp-chunks.
      (arg == "--dp"                                       ? flags.dpSize
       : arg == "--tp"                                     ? flags.tpSize
       : arg == "--cp"                                     ? flags.cpSize
       : arg == "--pp"                                     ? flags.ppSize
       : arg == "--pp-chunks" || arg == "--virtual-stages" ? flags.ppChunks
       : arg == "--microbatches"     ? flags.numMicrobatches
       : arg == "--recompute-layers" ? flags.recomputeLayers
       : arg == "--memory-limit-mib" ? flags.memoryLimitMiB
       : arg == "--prefill-rows"     ? flags.prefillRows
                                     : flags.bucketBytes) = size;
    } else if (arg == "--zero") {
      std::optional<std::string> v = value(arg.c_str());
      if (v && *v == "2")
        return usageError(
            "--zero takes 0, 1 or 3: stage 2's saving, gradients a rank does "
            "not keep, is in every plan already (each gradient dies at its "
            "bucket's update), so --zero 1 is stage 2 here");
      if (!v || (*v != "0" && *v != "1" && *v != "3"))
        return usageError("--zero takes 0, 1 (optimizer state sharded over "
                          "dp) or 3 (parameters as well)");
      flags.zeroStage = std::stoll(*v);
    } else if (arg == "--sp") {
      flags.sequenceParallel = true;
    } else if (arg == "--vp") {
      flags.vocabParallel = true;
    } else if (arg == "--report" || arg == "--report=text") {
      flags.report = "text";
    } else if (arg == "--report=json") {
      flags.report = "json";
    } else if (arg == "--with-dense-reference") {
      flags.withDenseReference = true;
    } else if (arg == "--keep-grads") {
      flags.keepGradients = true;
    } else if (arg == "--fuse-projections" || arg == "--fuse-projections=all") {
      flags.fuseProjections = true;
    } else if (arg == "--fuse-projections=gate_up") {
      flags.fuseProjections = true;
      flags.fuseAttentionProjections = false;
    } else if (arg == "--no-fuse-projections" ||
               arg == "--fuse-projections=none") {
      flags.fuseProjections = false;
    } else if (arg == "--fuse-adds") {
      flags.fuseAdds = true;
    } else if (arg == "--no-fuse-adds") {
      flags.fuseAdds = false;
    } else if (arg == "--fuse-norm-rope") {
      flags.fuseNormRope = true;
    } else if (arg == "--no-fuse-norm-rope") {
      flags.fuseNormRope = false;
    } else if (arg.rfind("--dump-ir=", 0) == 0) {
      flags.dumpIr = arg.substr(10);
      if (flags.dumpIr != "after-all" && flags.dumpIr != "final")
        return usageError("--dump-ir takes after-all or final, not '" +
                          flags.dumpIr + "'");
    } else if (arg == "--emit-logits") {
      flags.emitLogits = true;
    } else if (arg == "--no-optimizer") {
      flags.withOptimizer = false;
    } else if (arg == "--decode") {
      flags.decode = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return usageError("unknown flag '" + arg + "'");
    } else if (flags.modelPath.empty()) {
      flags.modelPath = arg;
    } else {
      return usageError("unexpected argument '" + arg + "'");
    }
  }
  if (flags.modelPath.empty())
    return usageError("no model file given");
  if (flags.schedule != "defer" && flags.schedule != "latency")
    return usageError("unknown schedule '" + flags.schedule +
                      "' (expected defer or latency)");
  // The machine file feeds the predicted timeline and the latency schedule.
  if (!flags.machinePath.empty() && flags.report.empty() &&
      flags.traceSimPath.empty() && flags.schedule != "latency" &&
      flags.recompute != "auto")
    return usageError("--machine is used by --report, --trace-sim, "
                      "--schedule latency and --recompute auto; give one of "
                      "them");
  // An output may never replace an input of the same run.
  for (const std::string *output : {&flags.outputPath, &flags.traceSimPath})
    for (const std::string *input :
         {&flags.modelPath, &flags.runPath, &flags.machinePath})
      if (!output->empty() && !input->empty() &&
          sharc::sameFile(*output, *input))
        return usageError("'" + *output +
                          "' is both an input and an output of this run; "
                          "write the output elsewhere");
  return std::nullopt;
}

/// Compiles `options` and writes the plan to `path`; an exit code on error.
int compileTo(const sharc::CompileOptions &options, const std::string &path) {
  MLIRContext context;
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    sharc::printDiagnostic(diag);
    return success();
  });
  auto result = sharc::compileModel(context, options);
  if (auto *error = std::get_if<sharc::CompileError>(&result)) {
    if (!error->message.empty())
      std::fprintf(stderr, "sharc: error: %s\n", error->message.c_str());
    return error->exitCode;
  }
  if (sharc::Status status =
          sharc::plan::writePlanFile(std::get<sharc::plan::Plan>(result), path);
      !status.isOk()) {
    std::fprintf(stderr, "sharc: error: %s\n", status.message().c_str());
    return kExitFailure;
  }
  return 0;
}

int compile(const CompileFlags &flags) {
  MLIRContext context;
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    sharc::printDiagnostic(diag);
    return success();
  });
  sharc::CompileOptions options;
  options.modelPath = flags.modelPath;
  options.runPath = flags.runPath;
  options.emitLogits = flags.emitLogits;
  sharc::PipelineOptions &pipeline = options.pipeline;
  options.numMicrobatches = flags.numMicrobatches;
  // The mode's first axis takes its flag's size (2 unless given); the
  // flags below then set every size given, the preset's other axes too.
  bool ppFirst = flags.mode == "pp" || flags.mode == "pp_cp";
  int64_t presetSize = flags.mode == "ddp"  ? flags.dpSize.value_or(2)
                       : flags.mode == "cp" ? flags.cpSize.value_or(2)
                       : ppFirst            ? flags.ppSize.value_or(2)
                                            : flags.tpSize.value_or(2);
  if (!sharc::applyModePreset(flags.mode, presetSize, pipeline))
    return usageError("unknown mode '" + flags.mode + "' (expected one of " +
                      sharc::modePresetNames().str() + ")");
  if (flags.dpSize)
    pipeline.dpSize = *flags.dpSize;
  if (flags.tpSize)
    pipeline.tpSize = *flags.tpSize;
  if (flags.bucketBytes)
    pipeline.bucketBytes = *flags.bucketBytes;
  if (flags.cpSize)
    pipeline.cpSize = *flags.cpSize;
  if (!flags.cpComm.empty()) {
    if (flags.cpComm != "a2a" && flags.cpComm != "all_gather" &&
        flags.cpComm != "ring")
      return usageError("unknown cp exchange '" + flags.cpComm +
                        "' (expected a2a, all_gather or ring)");
    if (pipeline.cpSize == 1)
      return usageError("--cp-comm picks context parallelism's exchange; it "
                        "needs --cp N, N > 1");
    pipeline.cpComm = flags.cpComm;
  }
  if (!flags.cpSplit.empty()) {
    if (flags.cpSplit != "balanced" && flags.cpSplit != "contiguous")
      return usageError("unknown cp split '" + flags.cpSplit +
                        "' (expected balanced or contiguous)");
    if (pipeline.cpSize == 1)
      return usageError("--cp-split picks how context parallelism splits the "
                        "sequence; it needs --cp N, N > 1");
    pipeline.cpSplit = flags.cpSplit;
  }
  if (flags.ppSize)
    pipeline.ppSize = *flags.ppSize;
  if (!flags.ppSchedule.empty()) {
    if (flags.ppSchedule != "gpipe" && flags.ppSchedule != "1f1b" &&
        flags.ppSchedule != "interleaved")
      return usageError("unknown pipeline schedule '" + flags.ppSchedule +
                        "' (expected gpipe, 1f1b or interleaved)");
    pipeline.ppSchedule = flags.ppSchedule;
  }
  // Interleaving takes 2 model chunks a stage unless told otherwise.
  if (pipeline.ppSchedule == "interleaved")
    pipeline.ppChunks = flags.ppChunks.value_or(2);
  if (flags.ppChunks &&
      (pipeline.ppSchedule != "interleaved" || *flags.ppChunks < 2))
    return usageError("--pp-chunks (--virtual-stages) V takes V >= 2 with "
                      "--pp-schedule interleaved");
  if (!flags.ppBalance.empty()) {
    if (flags.ppBalance != "cost" && flags.ppBalance != "layers")
      return usageError("unknown pipeline balance '" + flags.ppBalance +
                        "' (expected cost or layers)");
    pipeline.ppBalance = flags.ppBalance;
  }
  if ((!flags.ppSchedule.empty() || !flags.ppBalance.empty()) &&
      pipeline.ppSize == 1)
    return usageError("--pp-schedule and --pp-balance need pipeline "
                      "parallelism (--pp N, N > 1)");
  pipeline.sequenceParallel |= flags.sequenceParallel;
  pipeline.vocabParallel |= flags.vocabParallel;
  if (std::string error = sharc::applyRecomputeFlags(
          flags.recompute, flags.recomputeLayers, flags.recomputeRest,
          flags.memoryLimitMiB, pipeline);
      !error.empty())
    return usageError(error);
  if ((pipeline.sequenceParallel || pipeline.vocabParallel) &&
      pipeline.tpSize == 1)
    return usageError("--sp and --vp need tensor parallelism (--tp N, N > 1)");
  // Flags the layout would drop without a word are errors instead.
  if (flags.bucketBytes && pipeline.dpSize == 1 && pipeline.cpSize == 1)
    return usageError("--bucket-bytes sizes the gradient buckets of data and "
                      "context parallelism; it needs --dp N or --cp N, N > 1");
  if (pipeline.recompute == "sp-allgather" && !pipeline.sequenceParallel)
    return usageError("--recompute sp-allgather re-gathers sequence-parallel "
                      "inputs; it needs --sp");
  if (flags.zeroStage.value_or(0) > 0) {
    std::string zero = "--zero " + std::to_string(*flags.zeroStage);
    if (pipeline.dpSize == 1)
      return usageError(zero + " shards the optimizer state over data "
                               "parallel ranks; it needs --dp N or --mode "
                               "ddp");
    if (!flags.withOptimizer)
      return usageError(zero + " shards the optimizer; --no-optimizer "
                               "leaves none");
    if (flags.keepGradients)
      return usageError(zero + " updates each parameter from its block of "
                               "the gradient; --keep-grads would return "
                               "whole gradients");
    pipeline.zeroStage = *flags.zeroStage;
  }
  pipeline.withOptimizer = flags.withOptimizer;
  pipeline.keepGradients = flags.keepGradients;
  pipeline.fuseProjections = flags.fuseProjections;
  pipeline.fuseAttentionProjections = flags.fuseAttentionProjections;
  pipeline.fuseAdds = flags.fuseAdds;
  pipeline.fuseNormRope = flags.fuseNormRope;
  if (flags.decode) {
    std::string error = sharc::decodeFlagError(pipeline);
    if (error.empty() && (flags.keepGradients || flags.withDenseReference))
      error = "--decode compiles generation, which has no gradients";
    if (!error.empty())
      return usageError(error);
    options.decode = true;
    options.mode = "decode";
    options.prefillRows = flags.prefillRows.value_or(0);
  } else if (flags.prefillRows) {
    return usageError("--prefill-rows needs --decode");
  }
  if (flags.withDenseReference) {
    if (flags.outputPath.empty())
      return usageError("--with-dense-reference needs -o PLAN");
    // Validation compares logits and gradients: both plans return them.
    // A ZeRO plan returns no gradients, so neither does and validation
    // compares the moments instead.
    bool gradients = pipeline.zeroStage == 0;
    options.emitLogits = true;
    pipeline.keepGradients = gradients;
    sharc::CompileOptions dense = options;
    dense.mode = "dense";
    dense.dumpIr.clear();
    dense.pipeline = sharc::PipelineOptions();
    dense.pipeline.keepGradients = gradients;
    dense.pipeline.withOptimizer = flags.withOptimizer;
    if (int exitCode = compileTo(dense, flags.outputPath + ".dense"))
      return exitCode;
  }
  if (!flags.decode)
    options.mode = flags.mode;
  options.dumpIr = flags.dumpIr;
  // The machine whose figures the latency schedule and the report use.
  auto machine = flags.machinePath.empty()
                     ? sharc::parseMachine(sharc::kDefaultMachineYaml,
                                           sharc::kDefaultMachineName)
                     : sharc::readMachineFile(flags.machinePath);
  if (!machine.isOk()) {
    std::fprintf(stderr, "sharc: error: %s\n",
                 machine.status().message().c_str());
    return kExitBadInput;
  }
  if (flags.schedule == "latency")
    options.scheduleMachine = &*machine;
  sharc::PlanSchedule schedule;
  sharc::RecomputeChoice choice;
  auto [limitBytes, limit] =
      sharc::recomputeLimit(flags.memoryLimitMiB, *machine);
  if (flags.recompute == "auto" && limitBytes == 0)
    return usageError("--recompute auto fits the plan in --memory-limit-mib "
                      "MIB a rank, or in the machine file's gpu_memory; " +
                      machine->name + " has none");
  auto result = flags.recompute == "auto"
                    ? sharc::compileWithinMemory(context, options, limitBytes,
                                                 &choice, &schedule)
                    : sharc::compileModel(context, options, &schedule);
  if (auto *error = std::get_if<sharc::CompileError>(&result)) {
    if (!error->message.empty())
      std::fprintf(stderr, "sharc: error: %s\n", error->message.c_str());
    return error->exitCode;
  }
  auto &plan = std::get<sharc::plan::Plan>(result);
  if (flags.recompute == "auto")
    std::fprintf(stderr, "sharc: recompute auto: %s\n",
                 choice.describe(limit).c_str());
  double predictedSeconds = 0;
  std::optional<sharc::StepSimulation> simulation;
  if (!flags.report.empty() || !flags.traceSimPath.empty()) {
    sharc::MeshShape mesh;
    for (const sharc::plan::MeshAxis &axis : plan.mesh)
      mesh.push_back({axis.name, axis.size});
    simulation = sharc::simulateStep(schedule.graph, schedule.streams,
                                     schedule.order, *machine, mesh);
    predictedSeconds = simulation->stepSeconds;
    // The plan's transfers or collectives do not pair up: a bug in sharc,
    // which the prediction should not hide.
    if (simulation->deadlocked)
      std::fprintf(stderr, "sharc: warning: the simulated step deadlocks; "
                           "the predicted step time covers what ran\n");
    if (!flags.traceSimPath.empty()) {
      std::string trace = sharc::chromeTrace(simulation->ranks, schedule.graph,
                                             simulation->transfers, &plan);
      if (sharc::Status status =
              sharc::writeFileAtomically(flags.traceSimPath, {trace}, "trace");
          !status.isOk()) {
        std::fprintf(stderr, "sharc: error: %s\n", status.message().c_str());
        return status.exitCode();
      }
    }
  }
  if (!flags.report.empty()) {
    sharc::MemoryReport report = sharc::buildMemoryReport(plan);
    report.predictedStepSeconds = predictedSeconds;
    if (simulation)
      report.recompute = sharc::recomputeCost(schedule.graph, *simulation);
    // Both forms carry the pipeline's figures; a plan without stages has
    // none, and its JSON no "pipeline" key.
    sharc::PipelineReport stages =
        sharc::buildPipelineReport(plan, pipeline.ppChunks);
    stages.schedule = pipeline.ppSchedule;
    if (simulation && !simulation->deadlocked) {
      stages.stageBusySeconds = simulation->stageBusySeconds;
      stages.stepSeconds = simulation->stepSeconds;
      stages.simulatedBubble = simulation->bubble;
    }
    std::string text;
    if (flags.report == "json") {
      text = sharc::reportJson(plan, report, &stages);
    } else {
      text = sharc::formatReport(plan, report);
      if (!stages.stages.empty())
        text += sharc::formatPipelineReport(stages);
    }
    std::fputs(text.c_str(), stdout);
  }
  if (flags.outputPath.empty())
    return 0;
  if (sharc::Status status = sharc::plan::writePlanFile(plan, flags.outputPath);
      !status.isOk()) {
    std::fprintf(stderr, "sharc: error: %s\n", status.message().c_str());
    return kExitFailure;
  }
  return 0;
}

int dispatch(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    printUsage(args.empty() ? stderr : stdout);
    return args.empty() ? kExitBadInput : 0;
  }
  // `sharc bench`: the benchmark sweep (BenchSweep.h).
  if (args[0] == "bench")
    return sharc::bench::runBenchCommand({args.begin() + 1, args.end()},
                                         argv[0]);
  // `sharc export` / `sharc import`: Hugging Face checkpoints (HfConvert.h).
  if (args[0] == "export")
    return sharc::runExportCommand({args.begin() + 1, args.end()});
  if (args[0] == "import")
    return sharc::runImportCommand({args.begin() + 1, args.end()});
  if (args[0] != "compile")
    return usageError("unknown command '" + args[0] + "'");
  CompileFlags flags;
  if (std::optional<int> exitCode =
          parseFlags({args.begin() + 1, args.end()}, flags))
    return *exitCode;
  return compile(flags);
}

} // namespace

int main(int argc, char **argv) {
  // Every reader turns bad input into a message; anything still thrown is
  // sharc's fault, and says so rather than aborting with a signal.
  try {
    return dispatch(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "sharc: error: out of host memory\n");
  } catch (const std::exception &error) {
    std::fprintf(stderr, "sharc: error: internal error: %s\n", error.what());
  }
  return 1;
}
