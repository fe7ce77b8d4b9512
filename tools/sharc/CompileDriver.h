//===- CompileDriver.h - model file to plan, as a library -------*- C++ -*-===//
// defines: CompileOptions, CompileError, compileModel, printDiagnostic,
//          decodeFlagError
//
// What `sharc compile` does, callable from tests: read the YAML, build the
// forward program, run the pass pipeline and emit the plan. Diagnostics go
// to the caller's handler on the context (the tool prints them as
// `sharc: error: FILE:LINE:COL: message`).
#pragma once

#include "passes/Passes.h"
#include "planner/PlanEmitter.h"
#include "planner/plan/Plan.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <variant>

namespace sharc {

struct CompileOptions {
  std::string modelPath, runPath;
  std::string mode = "dense"; ///< recorded in the plan
  PipelineOptions pipeline;
  /// `--microbatches M`: the step's num_microbatches, over what the model
  /// and run files say (micro_batch_size stays); errors about it point at
  /// the flag.
  std::optional<int64_t> numMicrobatches;
  bool emitLogits = false;
  /// A generation step with a key/value cache (BuildOptions::decode),
  /// compiled by buildDecodePipeline.
  bool decode = false;
  /// decode: also a prefill of this many positions a sample (BuildOptions).
  int64_t prefillRows = 0;
  /// "", "after-all" (IR after the builder and every pass) or "final".
  std::string dumpIr;
  llvm::raw_ostream *dumpStream = nullptr; ///< where dumped IR goes
  /// --schedule latency: the machine whose figures order the plan
  /// (EmitOptions::scheduleMachine); null: weight-gradient deferral.
  const Machine *scheduleMachine = nullptr;
};

/// Prints MLIR diagnostics as `sharc: error: FILE:LINE:COL: message`, and
/// their notes after them.
void printDiagnostic(mlir::Diagnostic &diag);

/// What makes `pipeline` no layout for a decode step (any mesh axis, a
/// sharding or recompute option), or "".
std::string decodeFlagError(const PipelineOptions &pipeline);

/// Why a compile failed, and the exit status the tool should return.
struct CompileError {
  int exitCode = 1;    ///< 2 bad input, 1 a failure inside sharc
  std::string message; ///< set when no diagnostic was emitted
};

/// Compiles the model; diagnostics are reported through `context`. The
/// schedule behind the plan goes to `schedule` when given.
std::variant<plan::Plan, CompileError>
compileModel(mlir::MLIRContext &context, const CompileOptions &options,
             PlanSchedule *schedule = nullptr);

} // namespace sharc
