//===- CompileDriver.cpp - model file to plan, as a library ---------------===//

#include "tools/sharc/CompileDriver.h"
#include "ir/SharcDialect.h"
#include "ir/frontend/ModelBuilder.h"
#include "ir/frontend/ModelConfig.h"
#include "passes/Passes.h"
#include "planner/PlanEmitter.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <cstdio>

using namespace mlir;
using namespace sharc;

namespace {

/// The run file's schedule as the plan carries it: a factor on the lr of
/// every adamw, so the runtime changes the rate without rebinding. The floor
/// defaults to lr / 10, MiniMind's.
plan::LrSchedule lrSchedule(const frontend::OptimizerConfig &optimizer) {
  const frontend::ScheduleConfig &config = optimizer.schedule;
  plan::LrSchedule schedule;
  schedule.decay = config.decay.value;
  schedule.warmupSteps = config.warmupSteps.value;
  schedule.totalSteps = config.totalSteps.value;
  schedule.minFactor = 1.0;
  if (schedule.decay != "constant") {
    double lr = optimizer.lr.value;
    bool hasMinLr = config.minLr.loc.line != 0;
    schedule.minFactor = !hasMinLr ? 0.1 : lr > 0 ? config.minLr.value / lr : 0;
  }
  return schedule;
}

} // namespace

/// Prints MLIR diagnostics as `sharc: error: FILE:LINE:COL: message`.
void sharc::printDiagnostic(Diagnostic &diag) {
  const char *severity = "error";
  if (diag.getSeverity() == DiagnosticSeverity::Warning)
    severity = "warning";
  else if (diag.getSeverity() == DiagnosticSeverity::Note)
    severity = "note";
  else if (diag.getSeverity() == DiagnosticSeverity::Remark)
    severity = "remark";
  std::string where;
  // Line 0 names no line: a whole file, or a flag that overrode a key
  // (--microbatches).
  if (auto loc = dyn_cast<FileLineColLoc>(diag.getLocation()))
    where = loc.getFilename().str() +
            (loc.getLine() == 0 ? ""
                                : ":" + std::to_string(loc.getLine()) + ":" +
                                      std::to_string(loc.getColumn())) +
            ": ";
  std::fprintf(stderr, "sharc: %s: %s%s\n", severity, where.c_str(),
               diag.str().c_str());
  for (Diagnostic &note : diag.getNotes())
    printDiagnostic(note);
}

std::string sharc::decodeFlagError(const PipelineOptions &pipeline) {
  if (pipeline.dpSize > 1 || pipeline.tpSize > 1 || pipeline.cpSize > 1 ||
      pipeline.ppSize > 1 || !pipeline.extraAxes.empty())
    return "--decode compiles the dense model (a checkpoint of any layout "
           "loads into it); leave out --mode and the mesh sizes";
  if (pipeline.sequenceParallel || pipeline.vocabParallel ||
      pipeline.recompute != "none" || pipeline.zeroStage > 0)
    return "--decode has no backward: --sp, --vp, --recompute and --zero do "
           "not apply";
  return "";
}

std::variant<plan::Plan, CompileError>
sharc::compileModel(MLIRContext &context, const CompileOptions &options,
                    PlanSchedule *schedule) {
  frontend::ConfigResult config =
      frontend::readConfigFile(options.modelPath, options.runPath);
  if (!config.ok())
    return CompileError{2, config.error->format()};
  if (options.numMicrobatches)
    config.config->run.numMicrobatches = {*options.numMicrobatches,
                                          {"--microbatches", 0, 0}};

  if (options.decode && config.config->run.numMicrobatches.value != 1)
    return CompileError{2, "--decode generates one batch at a time; "
                           "num_microbatches must be 1"};
  if (options.prefillRows > config.config->run.seqLen.value) {
    const auto &seqLen = config.config->run.seqLen;
    std::string message = "--prefill-rows " +
                          std::to_string(options.prefillRows) +
                          " exceeds the key/value cache's seq_len " +
                          std::to_string(seqLen.value);
    // Where seq_len was set (the model or the run file), so the fix is one
    // look away; a default one has no line.
    if (seqLen.loc.line > 0)
      message =
          frontend::ConfigError{seqLen.loc, message + ", set here"}.format();
    return CompileError{2, message};
  }

  context.loadDialect<SharcDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      buildModel(&context, *config.config,
                 {options.emitLogits, options.decode, options.prefillRows});
  if (failed(verify(*module)))
    return CompileError{1, "the builder made an invalid program (a bug in "
                           "sharc)"};

  llvm::raw_ostream &dump =
      options.dumpStream ? *options.dumpStream : llvm::outs();
  PassManager pm(&context);
  if (options.decode)
    buildDecodePipeline(pm, options.pipeline);
  else
    buildPipeline(pm, options.pipeline);
  if (options.dumpIr == "after-all") {
    dump << "// -----// IR after builder //----- //\n";
    module->print(dump);
    dump << "\n";
    context.disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true,
                        /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, dump);
  }
  // A pass rejects a layout the user asked for: bad input.
  if (failed(pm.run(*module)))
    return CompileError{2, ""};
  if (options.dumpIr == "final") {
    module->print(dump);
    dump << "\n";
  }
  EmitOptions emitOptions;
  emitOptions.mode = options.mode;
  emitOptions.scheduleMachine = options.scheduleMachine;
  FailureOr<plan::Plan> plan = emitPlan(*module, emitOptions, schedule);
  if (failed(plan))
    return CompileError{1, ""};
  plan->lrSchedule = lrSchedule(config.config->run.optimizer);
  return std::move(*plan);
}
