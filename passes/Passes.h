//===- Passes.h - pass declarations and pipelines ---------------*- C++ -*-===//
// defines: createAutodiff, createAdamW (generated), registerSharcPasses,
//          PipelineOptions, buildPipeline, buildDecodePipeline
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include <string>
#include <utility>
#include <vector>

namespace sharc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// What `sharc compile` asks of the pipeline: a parallel layout and what the
/// train step returns.
struct PipelineOptions {
  int64_t dpSize = 1, tpSize = 1;
  /// Further mesh axes (name, size) nothing is split over yet
  /// (sharc-declare-axis), declared before the layout passes.
  std::vector<std::pair<std::string, int64_t>> extraAxes;
  /// Context parallelism: ranks on the cp axis, attention's exchange
  /// ("a2a", "all_gather" or "ring") and the sequence split ("balanced" or
  /// "contiguous"; ring needs contiguous).
  int64_t cpSize = 1;
  std::string cpComm = "a2a";
  std::string cpSplit = "balanced";
  bool sequenceParallel = false, vocabParallel = false;
  /// "none", "sp-allgather", "full" or "selective" (the cheap ops alone;
  /// with sp, the column inputs' re-gather too).
  std::string recompute = "none";
  /// recompute "full", "selective": the first N layers alone (-1: all).
  int64_t recomputeLayers = -1;
  /// recompute "full" of the first N layers: "selective" re-runs the
  /// others' cheap ops ("none": keeps all they computed).
  std::string recomputeRest = "none";
  int64_t bucketBytes = 25 << 20; ///< data-parallel gradient buckets
  /// ZeRO stage: 0; 1 to shard the optimizer state over dp
  /// (sharc-shard-optimizer); 3 to shard the parameters too
  /// (sharc-shard-parameters).
  int64_t zeroStage = 0;
  bool withOptimizer = true;  ///< add the AdamW update
  bool keepGradients = false; ///< also return every gradient
  /// Optimizer updates gathered into runs of this many gradient bytes (or
  /// an eighth of all, if less), one launch each (sharc-adamw's
  /// group-bytes; not under dp, whose buckets are such runs already).
  int64_t updateGroupBytes = 8 << 20;
  bool fuseProjections = false;         ///< one GEMM for q/k/v and for gate/up
  bool fuseAttentionProjections = true; ///< q/k/v as well as gate/up
  bool fuseAdds = false;     ///< sums into the GEMMs that produce them
  bool fuseNormRope = false; ///< q/k norms and rope as one op
  /// Pipeline parallelism: stages over the "pp" axis, the schedule
  /// ("gpipe", "1f1b" or "interleaved" with ppChunks >= 2 model chunks a
  /// stage) and the split ("cost" or "layers").
  int64_t ppSize = 1, ppChunks = 1;
  std::string ppSchedule = "gpipe", ppBalance = "cost";
};

/// Sets the layout of one of the original's mode names (ddp, tp, tp_sp,
/// tp_sp_async, tp_vp, tp_sp_async_vp, cp, tp_cp, pp, tp_pp, pp_cp,
/// tp_cp_pp, config; dense), with `size` ranks on the mode's first axis: dp
/// for ddp, cp for cp, pp for pp and pp_cp, tp for every tp_ mode. The
/// other axes a mode names get 2 ranks (cp of tp_cp, pp_cp and tp_cp_pp;
/// pp of tp_pp and tp_cp_pp), which the caller may then change; config
/// sets nothing (every size from its flag). Returns false for an unknown
/// name.
bool applyModePreset(llvm::StringRef mode, int64_t size,
                     PipelineOptions &options);

/// The mode names applyModePreset accepts, for messages.
llvm::StringRef modePresetNames();

/// Fills `pm` with the passes from the forward program to the train step.
void buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options);

/// The passes of a decode step (BuildOptions::decode): no autodiff, no
/// optimizer; gate/up fused into one GEMM (q, k and v stay apart: a decode
/// step is one row a sample, and decode_attention reads them packed) and
/// residual adds into the GEMMs, as the options say.
void buildDecodePipeline(mlir::OpPassManager &pm,
                         const PipelineOptions &options);

} // namespace sharc
