//===- Recompute.cpp - rematerialise values in the backward ---------------===//

#include "ir/SharcOps.h"
#include "passes/LayerUnits.h"
#include "passes/Layout.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <map>

namespace sharc {
#define GEN_PASS_DEF_RECOMPUTE
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// Megatron SP: a column-parallel input gathered over the sequence is used
/// by the forward GEMMs and by the weight-gradient GEMMs of the backward.
/// Re-gathering it right before the first weight gradient lets the gathered
/// tensor die after the forward; only the local shard lives across.
void regatherForWeightGradients(func::FuncOp func) {
  SmallVector<AllGatherOp> gathers;
  func.walk([&](AllGatherOp gather) {
    // A layer re-run whole gathers its inputs again already.
    if (auto mark = gather->getAttrOfType<StringAttr>(kRecomputeAttr);
        mark && mark.getValue() == "full")
      return;
    if (getPlacement(gather.getY().getType()).getAxis(gather.getAxis()) ==
            PlacementAttr::kReplicated &&
        gather.getDim() == 0)
      gathers.push_back(gather);
  });
  for (AllGatherOp gather : gathers) {
    SmallVector<OpOperand *> backwardUses;
    for (OpOperand &use : gather.getY().getUses())
      if (isa<MatmulWgradOp>(use.getOwner()))
        backwardUses.push_back(&use);
    if (backwardUses.empty())
      continue;
    Operation *first = backwardUses.front()->getOwner();
    for (OpOperand *use : backwardUses)
      if (use->getOwner()->isBeforeInBlock(first))
        first = use->getOwner();
    // Start the gather before the input-gradient GEMM of the same output
    // gradient, so that it runs while that GEMM does (Megatron's order).
    Value dy = cast<MatmulWgradOp>(first).getDy();
    for (Operation *user : dy.getUsers())
      if (isa<MatmulDgradOp>(user) && user->isBeforeInBlock(first))
        first = user;
    OpBuilder builder(first);
    Operation *regather = builder.clone(*gather.getOperation());
    regather->setAttr(kRecomputeAttr, builder.getStringAttr("sp-allgather"));
    for (OpOperand *use : backwardUses)
      use->set(regather->getResult(0));
  }
}

/// The ops the returned values that are not gradients (the loss, logits)
/// are computed from, in program order: the forward of a differentiated
/// step. Empty when the function returns no gradient.
SmallVector<Operation *> forwardOps(func::FuncOp func) {
  Block &body = func.getBody().front();
  llvm::DenseSet<Operation *> forward;
  SmallVector<Operation *> worklist;
  bool differentiated = false;
  for (auto [i, value] : llvm::enumerate(body.getTerminator()->getOperands())) {
    if (getResultString(func, i, kOutputAttr).starts_with("grad:")) {
      differentiated = true;
      continue;
    }
    if (Operation *def = value.getDefiningOp())
      worklist.push_back(def);
  }
  if (!differentiated)
    return {};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
  }
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (forward.contains(&op))
      ops.push_back(&op);
  return ops;
}

/// The cheap ops selective recompute re-runs: memory-bound kernels whose
/// inputs the backward keeps anyway (a norm's input for its gradient,
/// gate/up for SwiGLU's), and views (a split; Megatron's f, the identity in
/// the forward, which the planner makes a view). Re-running a GEMM, attention
/// or a collective costs what the full policy pays; re-running a residual add
/// would keep the GEMM output it adds instead of its own.
bool isCheap(Operation *op) {
  return isa<RmsNormOp, RopeOp, RmsNormRopeOp, SwigluOp, SwigluPackedOp,
             SplitOp, ReplicateOp>(op);
}

/// Context parallelism's exchange of attention's inputs: the ring's
/// shifts of k and v, the K/V all-gather (with the balanced split's
/// reordering) and Ulysses' all-to-alls of q, k and v, where only
/// attention reads what they made. Selective recompute exchanges them
/// again in the backward, as it gathers sequence-parallel inputs again:
/// the communication stream does it beside the backward's compute, and
/// each layer's exchanged inputs need not live from the forward to the
/// backward.
bool isAttentionExchange(Operation *op) {
  if (isa<RingShiftOp>(op))
    return true;
  if (!isa<AllGatherOp, AllToAllOp, PermuteBlocksOp>(op) || op->use_empty())
    return false;
  return llvm::all_of(op->getUsers(), [](Operation *user) {
    return isa<AttentionOp, AttentionGradOp>(user) ||
           (isa<PermuteBlocksOp>(user) && isAttentionExchange(user));
  });
}

/// Full recompute (Megatron's "full" policy, every layer): of a layer's
/// forward only its input lives on into the backward. Right before the
/// first backward op that reads anything else the layer computed, the
/// layer's forward runs again, and the backward reads the copies. A copy
/// runs the same kernel on the same inputs as its original, so losses and
/// gradients are those without recompute, bit for bit.
///
/// What is not re-run: a value another unit's forward reads (the residual
/// stream leaving the layer) or the step returns; what does not depend on
/// the batch (a fused weight's concat); pipeline transfers; the embedding
/// and the head. Only layers in [firstLayer, endLayer) are re-run (the
/// first N: under 1F1B the first stage keeps the most microbatches in
/// flight).
///
/// Selective recompute re-runs only the cheap ops (isCheap) and keeps what
/// the others computed; each copy goes right before its own first reader,
/// so it lives no longer than it must, and is no barrier to the planner's
/// deferral of weight gradients (kRecomputeAttr "selective").
///
/// Runs before sharc-microbatch, which copies each microbatch's forward,
/// recompute and backward alike.
void recomputeLayers(func::FuncOp func, int64_t numLayers, int64_t firstLayer,
                     int64_t endLayer, bool selective) {
  SmallVector<Operation *> forward = forwardOps(func);
  if (forward.empty())
    return;
  llvm::DenseSet<Operation *> isForward(forward.begin(), forward.end());
  llvm::DenseMap<Operation *, int64_t> unitOf =
      forwardUnits(func, forward, numLayers);
  Operation *returnOp = func.getBody().front().getTerminator();

  // Activations: what the batch flows into.
  llvm::DenseSet<Operation *> variant;
  for (Operation *op : forward)
    for (Value operand : op->getOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (arg ? !getArgString(func, arg.getArgNumber(), kInputAttr).empty()
              : variant.contains(operand.getDefiningOp())) {
        variant.insert(op);
        break;
      }
    }
  auto recomputable = [&](Operation *op) {
    int64_t unit = unitOf.lookup(op);
    if (!variant.contains(op) || unit < firstLayer || unit >= endLayer ||
        isa<TransferOp>(op) ||
        (selective && !isCheap(op) && !isAttentionExchange(op)))
      return false;
    for (Operation *user : op->getUsers())
      if (user == returnOp ||
          (isForward.contains(user) && unitOf.lookup(user) != unit))
        return false;
    return true;
  };
  // Newest first, so each op's users are decided before it is.
  llvm::DenseSet<Operation *> rerun;
  for (Operation *op : llvm::reverse(forward)) {
    if (!recomputable(op))
      continue;
    if (llvm::any_of(op->getUsers(), [&](Operation *user) {
          return !isForward.contains(user) || rerun.contains(user);
        }))
      rerun.insert(op);
  }
  // Where each copy goes: before the first backward op that reads it, and
  // before the copies that read it.
  llvm::DenseMap<Operation *, Operation *> placeOf;
  auto moveUp = [&](Operation *op, Operation *place) {
    Operation *&at = placeOf[op];
    if (!at || place->isBeforeInBlock(at))
      at = place;
  };
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (isForward.contains(&op))
      continue;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp(); def && rerun.contains(def))
        moveUp(def, &op);
  }
  for (Operation *op : llvm::reverse(forward))
    if (rerun.contains(op))
      for (Operation *user : op->getUsers())
        if (rerun.contains(user))
          moveUp(op, placeOf.lookup(user));
  // The full policy re-runs a layer at once, before its first reader.
  if (!selective) {
    std::map<int64_t, Operation *> layerPlace;
    for (Operation *op : forward)
      if (rerun.contains(op)) {
        Operation *&at = layerPlace[unitOf.lookup(op)];
        if (!at || placeOf.lookup(op)->isBeforeInBlock(at))
          at = placeOf.lookup(op);
      }
    for (Operation *op : forward)
      if (rerun.contains(op))
        placeOf[op] = layerPlace[unitOf.lookup(op)];
  }
  IRMapping copies;
  for (Operation *op : forward) {
    if (!rerun.contains(op))
      continue;
    OpBuilder builder(placeOf.lookup(op));
    Operation *copy = builder.clone(*op, copies);
    // Under a pipeline schedule the copies run in the backward's slot.
    copy->removeAttr(kForwardAttr);
    copy->setAttr(kRecomputeAttr,
                  builder.getStringAttr(selective ? "selective" : "full"));
    for (auto [result, copied] :
         llvm::zip(op->getResults(), copy->getResults()))
      result.replaceUsesWithIf(copied, [&](OpOperand &use) {
        return !isForward.contains(use.getOwner());
      });
  }
}

struct RecomputePass : sharc::impl::RecomputeBase<RecomputePass> {
  using RecomputeBase::RecomputeBase;
  void runOnOperation() override {
    if (policy == "none")
      return;
    if (policy == "full" || policy == "selective") {
      if (rest != "none" && (rest != "selective" || policy != "full")) {
        getOperation().emitError("recompute rest '")
            << rest << "' needs policy full and is none or selective";
        return signalPassFailure();
      }
      int64_t numLayers = ModelSizes(getOperation()).get("num_hidden_layers");
      int64_t rerun =
          layers < 0 ? numLayers : std::min<int64_t>(layers, numLayers);
      for (auto func : getOperation().getOps<func::FuncOp>()) {
        recomputeLayers(func, numLayers, 0, rerun, policy == "selective");
        // The layers past the first N keep what selective keeps: their
        // copies read only their own layer's forward, so the two runs
        // touch disjoint ops.
        if (rest == "selective")
          recomputeLayers(func, numLayers, rerun, numLayers, true);
      }
      return;
    }
    if (policy != "sp-allgather") {
      getOperation().emitError("unknown recompute policy '")
          << policy << "' (expected full, selective, sp-allgather or none)";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      regatherForWeightGradients(func);
  }
};

} // namespace
