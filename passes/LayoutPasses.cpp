//===- LayoutPasses.cpp - the passes that request a parallel layout -------===//
//
// data-parallel, tensor-parallel, sequence-parallel, vocab-parallel and
// context-parallel annotate the dense program with the layout they ask for
// (mesh sizes and parameter placements) and check that it divides the model;
// spmdize then rewrites the program once, as MLIR's mesh dialect separates
// sharding annotation from spmdization.
//
//===----------------------------------------------------------------------===//

#include "passes/Layout.h"
#include "passes/Passes.h"

namespace sharc {
#define GEN_PASS_DEF_DECLAREAXIS
#define GEN_PASS_DEF_DATAPARALLEL
#define GEN_PASS_DEF_TENSORPARALLEL
#define GEN_PASS_DEF_SEQUENCEPARALLEL
#define GEN_PASS_DEF_VOCABPARALLEL
#define GEN_PASS_DEF_CONTEXTPARALLEL
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

using namespace sharc::placement;

namespace {

LogicalResult requirePositive(ModuleOp module, StringRef axis, int64_t size) {
  if (size >= 1)
    return success();
  return emitError(module.getLoc())
         << axis << " must be at least 1, got " << size;
}

struct DeclareAxisPass : sharc::impl::DeclareAxisBase<DeclareAxisPass> {
  using DeclareAxisBase::DeclareAxisBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (axisName.empty() || StringRef(axisName).contains(',')) {
      module.emitError("axis name must be one non-empty name, got '")
          << axisName << "'";
      return signalPassFailure();
    }
    if (failed(requirePositive(module, axisName, axisSize)))
      return signalPassFailure();
    setMeshSize(module, axisName, axisSize);
  }
};

struct DataParallelPass : sharc::impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ModelSizes sizes(module);
    if (failed(requirePositive(module, "dp", dpSize)) ||
        failed(sizes.requireDivides("dp", dpSize, "batch")))
      return signalPassFailure();
    // Each microbatch is split over the dp ranks.
    if (sizes.get("num_microbatches") > 1 &&
        failed(sizes.requireDivides("dp", dpSize, "micro_batch_size")))
      return signalPassFailure();
    setMeshSize(module, "dp", dpSize);
    if (dpSize == 1)
      return;
    forEachParam(module, [](func::FuncOp func, unsigned i, StringRef) {
      setParamPlacement(func, i, "dp", kR);
    });
    // Tokens and labels, [S, B], are split along the batch.
    for (auto func : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (!getArgString(func, i, kInputAttr).empty())
          setParamPlacement(func, i, "dp", 1);
  }
};

struct TensorParallelPass
    : sharc::impl::TensorParallelBase<TensorParallelPass> {
  using TensorParallelBase::TensorParallelBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ModelSizes sizes(module);
    if (failed(requirePositive(module, "tp", tpSize)))
      return signalPassFailure();
    for (StringRef key : {"hidden_size", "intermediate_size",
                          "num_attention_heads", "num_key_value_heads"})
      if (failed(sizes.requireDivides("tp", tpSize, key)))
        return signalPassFailure();
    setMeshSize(module, "tp", tpSize);
    if (tpSize == 1)
      return;
    forEachParam(module, [](func::FuncOp func, unsigned i, StringRef role) {
      int64_t code = kI;
      if (role == kRoleColumn)
        code = 0;
      else if (role == kRoleRow)
        code = 1;
      else if (role == kRoleHeadNorm)
        code = kR;
      setParamPlacement(func, i, "tp", code);
    });
  }
};

struct SequenceParallelPass
    : sharc::impl::SequenceParallelBase<SequenceParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Layout layout = readLayout(module);
    if (layout.size("tp") == 1)
      return; // nothing to split the sequence over
    if (failed(ModelSizes(module).requireDivides("tp", layout.size("tp"),
                                                 "seq_len")))
      return signalPassFailure();
    // The axis whose ranks split the sequence between layers: Megatron's
    // sequence parallelism reuses the tensor-parallel ranks.
    module->setAttr(kSequenceParallelAttr,
                    StringAttr::get(&getContext(), "tp"));
    forEachParam(module, [](func::FuncOp func, unsigned i, StringRef role) {
      if (role == kRoleNorm)
        setParamPlacement(func, i, "tp", kR);
    });
  }
};

struct VocabParallelPass : sharc::impl::VocabParallelBase<VocabParallelPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (readLayout(module).size("tp") == 1)
      return;
    module->setAttr(kVocabParallelAttr, UnitAttr::get(&getContext()));
    forEachParam(module, [](func::FuncOp func, unsigned i, StringRef role) {
      if (role == kRoleEmbedding || role == kRoleLmHead)
        setParamPlacement(func, i, "tp", 0);
    });
  }
};

/// Marks every parameter `R` on `axis` (held whole, used on different data)
/// and every token input split along dimension `inputDim`.
void splitInputs(ModuleOp module, StringRef axis, int64_t inputDim) {
  forEachParam(module, [&](func::FuncOp func, unsigned i, StringRef) {
    setParamPlacement(func, i, axis, kR);
  });
  for (auto func : module.getOps<func::FuncOp>())
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (!getArgString(func, i, kInputAttr).empty())
        setParamPlacement(func, i, axis, inputDim);
}

struct ContextParallelPass
    : sharc::impl::ContextParallelBase<ContextParallelPass> {
  using ContextParallelBase::ContextParallelBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t cpSize = this->cpSize; // the option, as a number for messages
    if (failed(requirePositive(module, "cp", cpSize)) ||
        failed(checkSizes(module, cpSize)))
      return signalPassFailure();
    setMeshSize(module, "cp", cpSize);
    if (cpSize == 1)
      return;
    module->setAttr(kContextParallelAttr,
                    StringAttr::get(&getContext(), exchange));
    // Tokens and labels, [S, B], are split along the sequence: rank r
    // holds the contiguous block r, or under the balanced split chunks r
    // and 2 cp - 1 - r of 2 cp.
    if (split == "balanced")
      module->setAttr(kBalancedAxisAttr, StringAttr::get(&getContext(), "cp"));
    splitInputs(module, "cp", 0);
  }

  /// The original's rules (seed-system.md 3.2 and 5), each naming sizes;
  /// the balanced split's chunks are half a rank's block.
  LogicalResult checkSizes(ModuleOp module, int64_t cpSize) {
    if (exchange != "a2a" && exchange != "all_gather" && exchange != "ring")
      return module.emitError(
                 "cp exchange must be a2a, all_gather or ring, got '")
             << exchange << "'";
    if (split != "balanced" && split != "contiguous")
      return module.emitError("cp split must be balanced or contiguous, got '")
             << split << "'";
    ModelSizes sizes(module);
    Layout layout = readLayout(module);
    int64_t tpSize = layout.size("tp");
    int64_t seqLen = sizes.get("seq_len");
    bool sequenceParallel = layout.sequenceParallelAxis == "tp" && tpSize > 1;
    if (sequenceParallel && seqLen % (cpSize * tpSize) != 0)
      return emitError(sizes.loc("seq_len"))
             << "cp * tp (" << cpSize << " * " << tpSize
             << ") must divide seq_len (" << seqLen
             << ") under sequence parallelism";
    if (failed(sizes.requireDivides("cp", cpSize, "seq_len")))
      return failure();
    // The balanced split's 2 cp chunks are half a rank's block; under SP
    // tp splits each rank's two chunks again.
    int64_t pieces = 2 * cpSize * (sequenceParallel ? tpSize : 1);
    if (split == "balanced" && cpSize > 1 && seqLen % pieces != 0) {
      InFlightDiagnostic error = emitError(sizes.loc("seq_len"));
      error << "2 * cp" << (sequenceParallel ? " * tp" : "") << " (2 * "
            << cpSize;
      if (sequenceParallel)
        error << " * " << tpSize;
      return error << ") must divide seq_len (" << seqLen
                   << ") for the balanced cp split (2 cp chunks; "
                      "--cp-split contiguous needs only cp"
                   << (sequenceParallel ? " * tp" : "") << ")";
    }
    if (exchange != "a2a")
      return success();
    // Ulysses gives each rank 1/cp of the heads its tp rank holds; a GQA
    // group stays with its KV head when both counts divide.
    for (StringRef key : {"num_attention_heads", "num_key_value_heads"}) {
      int64_t local = sizes.get(key) / tpSize;
      if (local % cpSize != 0)
        return emitError(sizes.loc(key))
               << "cp (" << cpSize << ") must divide the " << key
               << " each tp rank holds (" << sizes.get(key) << " / tp "
               << tpSize << " = " << local << ") for --cp-comm a2a";
    }
    return success();
  }
};

} // namespace
