//===- RecomputeSearch.h - the least re-run work that fits ------*- C++ -*-===//
// defines: RecomputeChoice, applyRecomputeFlags, planDeviceBytes,
//          compileWithinMemory
//
// `sharc compile --recompute auto --memory-limit-mib M`: the fastest plan
// that fits re-runs as little as it must. Per byte saved, a layer's cheap
// ops (selective) cost far less than its whole forward (full): MiniMind at
// seq 2048 saves 80 MiB a layer for a predicted 0.07 ms selectively, 204
// MiB for 0.29 ms whole. So the search walks one chain of plans, each
// re-running more than the one before:
//
//   step 0        nothing re-run
//   step s <= L   the cheap ops of the first s layers (selective)
//   step L + f    the first f layers whole, the other L - f selectively
//   step 2L       every layer whole (full)
//
// and bisects it for the first step whose plan a rank can hold in M. Step
// 2L may keep more than step 2L - 1 (the last layer's whole copy lives
// through its own backward); the chain then ends at 2L - 1.
//
// Without --memory-limit-mib the limit is the machine file's GPU memory
// less what the CUDA context, NCCL and the libraries take.
//
//   RecomputeChoice choice;
//   auto plan = compileWithinMemory(context, options, 20480LL << 20, &choice);
//   // choice.fullLayers whole, choice.selectiveLayers selectively
#pragma once

#include "planner/CostModel.h"
#include "tools/sharc/CompileDriver.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace sharc {

/// What the search settled on, and the two ends it measured.
struct RecomputeChoice {
  int64_t numLayers = 0; ///< the model's
  /// Re-run: the first `fullLayers` layers whole, then the next
  /// `selectiveLayers` layers' cheap ops.
  int64_t fullLayers = 0, selectiveLayers = 0;
  /// The first step's policy: none, or the async SP modes' sp-allgather.
  std::string baseline = "none";
  int64_t bytes = 0; ///< the chosen plan's, a rank
  /// Nothing re-run, and the chain's end (the most re-run).
  int64_t noneBytes = 0, allBytes = 0;
  int compiles = 0;
  /// The search refused: even the chain's end needs more than the limit.
  bool overLimit = false;
  /// The `sharc compile` flags of the chosen plan ("--recompute none").
  std::string flags() const;
  /// "the first 12 of 32 layers re-run whole, the other 20 selectively
  /// (--recompute full --recompute-layers 12 --recompute-rest selective),
  /// 98472.8 MiB a rank within 100000 (nothing re-run: 180336.8, the most:
  /// 51500.8; 9 compiles)".
  std::string describe(const std::string &limit) const;
};

/// `sharc compile`'s --recompute POLICY, --recompute-layers N,
/// --recompute-rest REST and --memory-limit-mib M checked against each
/// other (auto's limit may come from the machine file instead) and set on
/// `pipeline` (policy "" or "auto" leaves it as the mode
/// has it; the caller runs the search for auto). Returns the usage error,
/// or "".
std::string applyRecomputeFlags(const std::string &policy,
                                std::optional<int64_t> layers,
                                const std::string &rest,
                                std::optional<int64_t> memoryLimitMiB,
                                PipelineOptions &pipeline);

/// What `--recompute auto` fits a rank in without --memory-limit-mib: the
/// machine file's gpu_memory less the CUDA context and kCudaRankReserveBytes
/// (DeviceWorkspace.h); 0 when the machine has no gpu_memory.
int64_t machineLimitBytes(const Machine &machine);
/// "h200-nvlink's gpu_memory, 143771 MiB, less 1920 for the CUDA context,
/// NCCL and the libraries".
std::string machineLimitSource(const Machine &machine);
/// `sharc compile --recompute auto`'s limit in bytes, --memory-limit-mib
/// when given, else the machine's (0 when it has none), and the text
/// RecomputeChoice::describe says it with.
std::pair<int64_t, std::string> recomputeLimit(std::optional<int64_t> limitMiB,
                                               const Machine &machine);

/// What a rank of `plan` holds on a GPU: the plan's regions and the GPU
/// workspace (the memory report's total and workspace lines).
int64_t planDeviceBytes(const plan::Plan &plan);

/// Compiles `options` with the least re-run work whose plan needs at most
/// `limitBytes` a rank (nothing re-run if it fits as it is), by the chain
/// above. A CompileError (exit 2) when even re-running every layer whole
/// needs more, naming both sizes. `options.pipeline.recompute` is the
/// first step's policy when it is sp-allgather (the async SP modes'), else
/// ignored; the schedule goes to `schedule` as in compileModel.
std::variant<plan::Plan, CompileError>
compileWithinMemory(mlir::MLIRContext &context, CompileOptions options,
                    int64_t limitBytes, RecomputeChoice *choice,
                    PlanSchedule *schedule = nullptr);

} // namespace sharc
