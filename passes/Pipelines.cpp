//===- Pipelines.cpp - the pass pipelines of sharc compile ----------------===//

#include "passes/Passes.h"

using namespace mlir;
using namespace sharc;

bool sharc::applyModePreset(StringRef mode, int64_t size,
                            PipelineOptions &options) {
  // The original benchmark's modes (seed-system.md, section 3.3); "async"
  // is the SP recompute policy here, the overlap itself is the planner's.
  if (mode == "dense")
    return true;
  if (mode == "ddp") {
    options.dpSize = size;
    return true;
  }
  // Context parallelism: --cp N (here `size`) ranks split the sequence;
  // tp_cp takes tp from `size` and cp from --cp (2 unless given).
  if (mode == "cp") {
    options.cpSize = size;
    return true;
  }
  // pp: `size` pipeline stages; pp_cp: `size` stages, each sequence split
  // over 2 cp ranks until --cp says otherwise.
  if (mode == "pp" || mode == "pp_cp") {
    options.ppSize = size;
    if (mode == "pp_cp")
      options.cpSize = 2;
    return true;
  }
  // config: the original's "configured parallelism", every size from its
  // own flag (tp, cp and pp where > 1); nothing comes from `size`.
  if (mode == "config")
    return true;
  if (!mode.starts_with("tp"))
    return false;
  // The tp_ modes take `size` tensor-parallel ranks; the other axes they
  // name start at 2 (the flags that follow may change them).
  options.tpSize = size;
  if (mode == "tp")
    return true;
  if (mode == "tp_cp" || mode == "tp_pp" || mode == "tp_cp_pp") {
    if (mode != "tp_pp")
      options.cpSize = 2;
    if (mode != "tp_cp")
      options.ppSize = 2;
    return true;
  }
  if (mode == "tp_sp") {
    options.sequenceParallel = true;
    return true;
  }
  if (mode == "tp_sp_async" || mode == "tp_sp_async_vp") {
    options.sequenceParallel = true;
    options.recompute = "sp-allgather";
    options.vocabParallel = mode == "tp_sp_async_vp";
    return true;
  }
  if (mode == "tp_vp") {
    options.vocabParallel = true;
    return true;
  }
  return false;
}

StringRef sharc::modePresetNames() {
  return "dense, ddp, tp, tp_sp, tp_sp_async, tp_vp, tp_sp_async_vp, cp, "
         "tp_cp, pp, tp_pp, pp_cp, tp_cp_pp, config";
}

void sharc::buildPipeline(OpPassManager &pm, const PipelineOptions &options) {
  bool sharded = options.dpSize > 1 || options.tpSize > 1 || options.cpSize > 1;
  for (const auto &[name, size] : options.extraAxes) {
    pm.addPass(createDeclareAxis({name, size}));
    sharded |= size > 1;
  }
  if (options.ppSize > 1)
    pm.addPass(createDeclareAxis({"pp", options.ppSize}));
  if (options.dpSize > 1)
    pm.addPass(createDataParallel({options.dpSize}));
  if (options.tpSize > 1) {
    pm.addPass(createTensorParallel({options.tpSize}));
    if (options.sequenceParallel)
      pm.addPass(createSequenceParallel());
    if (options.vocabParallel)
      pm.addPass(createVocabParallel());
  }
  // After tp and sp: their sizes enter the divisibility checks.
  if (options.cpSize > 1)
    pm.addPass(createContextParallel(
        {options.cpSize, options.cpComm, options.cpSplit}));
  if (sharded)
    pm.addPass(createSpmdize());
  // On the forward alone: autodiff transposes its transfers.
  if (options.ppSize > 1)
    pm.addPass(
        createPipelinePartition({"pp", options.ppBalance, options.ppChunks}));
  pm.addPass(createAutodiff());
  // Ring attention's block gradients read the merged output.
  if (options.cpSize > 1)
    pm.addPass(createMergedBlockGrads());
  if (options.fuseProjections)
    pm.addPass(createFuseProjections({options.fuseAttentionProjections}));
  // On one microbatch's forward and backward, which sharc-microbatch then
  // copies with the recompute between them; after fusing, so a layer's
  // copy runs the fused GEMMs.
  if (options.recompute == "full" || options.recompute == "selective")
    pm.addPass(createRecompute(
        {options.recompute, options.recomputeLayers, options.recomputeRest}));
  // After fusing, so fused weights are built once for all microbatches;
  // before bucketing, so each dp gradient sync runs once per step.
  pm.addPass(createMicrobatch());
  // Context parallelism syncs gradients over cp as dp does over dp.
  bool buckets = options.dpSize > 1 || options.cpSize > 1;
  bool shardOptimizer =
      options.zeroStage >= 1 && options.dpSize > 1 && options.withOptimizer;
  if (buckets)
    pm.addPass(createBucketGradients({options.bucketBytes, shardOptimizer}));
  // Selective recompute keeps what collectives gathered; under sequence
  // parallelism the column inputs are gathered again as well.
  bool selective =
      options.recompute == "selective" ||
      (options.recompute == "full" && options.recomputeRest == "selective");
  if (options.recompute == "sp-allgather" ||
      (selective && options.sequenceParallel))
    pm.addPass(createRecompute({"sp-allgather", -1}));
  if (options.withOptimizer) {
    // Gradient buckets (dp, cp) are runs of updates already.
    pm.addPass(createAdamW(
        {options.keepGradients, buckets ? 0 : options.updateGroupBytes}));
    if (shardOptimizer)
      pm.addPass(createShardOptimizer({options.bucketBytes}));
    // ZeRO-3: the blocks ZeRO-1 updates become the parameters themselves.
    if (shardOptimizer && options.zeroStage >= 3)
      pm.addPass(createShardParameters({options.bucketBytes}));
  }
  if (options.fuseNormRope)
    pm.addPass(createFuseNormRope());
  // Last: every pass above sees plain GEMMs and adds.
  if (options.fuseAdds)
    pm.addPass(createFuseAdds());
  // Last: it stages and orders the finished step.
  if (options.ppSize > 1)
    pm.addPass(
        createPipelineSchedule({"pp", options.ppSchedule, options.ppChunks}));
  if (sharded)
    pm.addPass(createVerifyPlacements());
}

void sharc::buildDecodePipeline(OpPassManager &pm,
                                const PipelineOptions &options) {
  if (options.fuseProjections)
    pm.addPass(createFuseProjections({/*fuseAttentionProjections=*/false}));
  if (options.fuseAdds)
    pm.addPass(createFuseAdds());
}
