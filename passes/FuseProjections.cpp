//===- FuseProjections.cpp - one GEMM for projections of one input --------===//

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace sharc {
#define GEN_PASS_DEF_FUSEPROJECTIONS
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// A parameter's forward GEMM and the two GEMMs autodiff made for it.
struct Projection {
  MatmulOp forward;
  MatmulDgradOp dgrad;
  MatmulWgradOp wgrad;
};

RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// `type` with dimension `dim` set to `extent`.
RankedTensorType withExtent(RankedTensorType type, int64_t dim,
                            int64_t extent) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = extent;
  return RankedTensorType::get(shape, type.getElementType(),
                               type.getEncoding());
}

/// The projection of `forward`, when its weight is a parameter read by
/// nothing but this GEMM and its input-gradient GEMM, and autodiff made
/// both gradient GEMMs from one output gradient.
std::optional<Projection> projectionOf(MatmulOp forward) {
  auto weight = dyn_cast<BlockArgument>(forward.getW());
  if (!weight)
    return std::nullopt;
  auto func = cast<func::FuncOp>(weight.getOwner()->getParentOp());
  if (getArgString(func, weight.getArgNumber(), kParamAttr).empty())
    return std::nullopt;
  Projection projection{forward, nullptr, nullptr};
  for (Operation *user : weight.getUsers()) {
    auto dgrad = dyn_cast<MatmulDgradOp>(user);
    if (user == forward.getOperation())
      continue;
    if (!dgrad || projection.dgrad)
      return std::nullopt;
    projection.dgrad = dgrad;
  }
  if (!projection.dgrad)
    return std::nullopt;
  for (Operation *user : projection.dgrad.getDy().getUsers())
    if (auto wgrad = dyn_cast<MatmulWgradOp>(user))
      if (wgrad.getX() == forward.getX())
        projection.wgrad = wgrad;
  if (!projection.wgrad)
    return std::nullopt;
  return projection;
}

/// Whether the projections can share one GEMM: weights, outputs and output
/// gradients each of one element type and placement.
bool compatible(ArrayRef<Projection> group) {
  auto sameKind = [](Value a, Value b) {
    RankedTensorType ta = tensorOf(a), tb = tensorOf(b);
    return ta.getElementType() == tb.getElementType() &&
           ta.getEncoding() == tb.getEncoding() && ta.getRank() == tb.getRank();
  };
  Projection first = group.front();
  return llvm::all_of(group, [&](Projection p) {
    return sameKind(p.forward.getW(), first.forward.getW()) &&
           sameKind(p.forward.getY(), first.forward.getY()) &&
           sameKind(p.dgrad.getDy(), first.dgrad.getDy()) &&
           sameKind(p.wgrad.getDw(), first.wgrad.getDw()) &&
           p.dgrad.getDx().getType() == first.dgrad.getDx().getType();
  });
}

/// The sum autodiff built from `terms` (one add per term after the first,
/// in any association: autodiff accumulates a value's gradients in the
/// order it meets their uses, v before q), when each term and partial sum
/// feeds that sum alone; its adds are appended to `adds`, each after the
/// adds it reads.
Value sumOf(ArrayRef<Value> terms, SmallVectorImpl<Operation *> &adds) {
  SmallVector<Value> pending(terms);
  while (pending.size() > 1) {
    AddOp joined = nullptr;
    for (Value term : pending) {
      if (!term.hasOneUse())
        return nullptr;
      auto add = dyn_cast<AddOp>(*term.getUsers().begin());
      if (!add)
        return nullptr;
      Value other = add.getA() == term ? add.getB() : add.getA();
      if (other != term && other.hasOneUse() &&
          llvm::is_contained(pending, other)) {
        joined = add;
        break;
      }
    }
    if (!joined)
      return nullptr;
    llvm::erase(pending, joined.getA());
    llvm::erase(pending, joined.getB());
    pending.push_back(joined.getY());
    adds.push_back(joined);
  }
  return pending.front();
}

/// The gradients' synchronisation, one level: the all_reduce each gradient
/// alone feeds, when every gradient has one of the same kind.
SmallVector<AllReduceOp> syncsOf(ArrayRef<Value> grads) {
  SmallVector<AllReduceOp> syncs;
  for (Value grad : grads) {
    auto sync = grad.hasOneUse()
                    ? dyn_cast<AllReduceOp>(*grad.getUsers().begin())
                    : nullptr;
    if (!sync || (!syncs.empty() && (sync.getAxis() != syncs[0].getAxis() ||
                                     sync.getReduce() != syncs[0].getReduce())))
      return {};
    syncs.push_back(sync);
  }
  return syncs;
}

/// `made` runs on the pipeline stage (and model chunk) `from` runs on, in
/// the same half of the step (sharc.forward: PipelineSchedule keys an op
/// without it as backward, which put a fused forward GEMM after the
/// gradients it waits for), so a fused op keeps its layer's place
/// (passes/PipelinePartition.cpp).
template <typename OpT> OpT onStageOf(OpT made, Operation *from) {
  for (StringRef name : {kStageAttr, kChunkAttr, kForwardAttr})
    if (Attribute attr = from->getAttr(name))
      made->setAttr(name, attr);
  return made;
}

void fuse(ArrayRef<Projection> group) {
  Projection first = group.front();
  Value input = first.forward.getX();
  MLIRContext *context = input.getContext();
  Location loc =
      FusedLoc::get(context, llvm::map_to_vector(group, [](Projection p) {
                      return p.forward.getLoc();
                    }));
  SmallVector<Value> weights, outputs, outputGrads, inputGrads, weightGrads;
  int64_t numOutputs = 0;
  for (Projection p : group) {
    weights.push_back(p.forward.getW());
    outputs.push_back(p.forward.getY());
    outputGrads.push_back(p.dgrad.getDy());
    inputGrads.push_back(p.dgrad.getDx());
    weightGrads.push_back(p.wgrad.getDw());
    numOutputs += tensorOf(p.forward.getW()).getShape()[0];
  }
  int64_t lastDim = tensorOf(outputs[0]).getRank() - 1;

  // Forward: one GEMM over the rows of every weight, split by columns.
  Operation *firstForward = first.forward;
  for (Projection p : group)
    if (p.forward->isBeforeInBlock(firstForward))
      firstForward = p.forward;
  OpBuilder builder(firstForward);
  Value weight =
      onStageOf(builder.create<ConcatOp>(
                    loc, withExtent(tensorOf(weights[0]), 0, numOutputs),
                    weights, uint64_t{0}),
                firstForward);
  Value output =
      onStageOf(builder.create<MatmulOp>(loc, input, weight), firstForward);
  auto split =
      onStageOf(builder.create<SplitOp>(loc, ValueRange(outputs).getTypes(),
                                        output, lastDim),
                firstForward);
  for (auto [old, piece] : llvm::zip(outputs, split.getYs()))
    old.replaceAllUsesWith(piece);

  // Backward: the output gradients side by side feed one input-gradient
  // GEMM (replacing the sum of the separate ones) and one weight-gradient
  // GEMM, whose rows are the weights' gradients.
  Operation *lastGrad = outputGrads[0].getDefiningOp();
  for (Value grad : outputGrads)
    if (lastGrad->isBeforeInBlock(grad.getDefiningOp()))
      lastGrad = grad.getDefiningOp();
  builder.setInsertionPointAfter(lastGrad);
  Value outputGrad = onStageOf(
      builder.create<ConcatOp>(
          loc, withExtent(tensorOf(outputGrads[0]), lastDim, numOutputs),
          outputGrads, lastDim),
      first.dgrad);
  // Where the separate input gradients are not one sum, they stay apart.
  // The replaced ops go last, users first: the builder may point at one.
  SmallVector<Operation *> adds, dead;
  if (Value sum = sumOf(inputGrads, adds)) {
    Value inputGrad = onStageOf(
        builder.create<MatmulDgradOp>(loc, sum.getType(), outputGrad, weight),
        first.dgrad);
    sum.replaceAllUsesWith(inputGrad);
    dead.append(adds.rbegin(), adds.rend());
    for (Projection p : group)
      dead.push_back(p.dgrad);
  }
  Value weightGrad =
      onStageOf(builder.create<MatmulWgradOp>(
                    loc, withExtent(tensorOf(weightGrads[0]), 0, numOutputs),
                    outputGrad, input),
                first.wgrad);
  // Synchronise the fused gradient once: all_reduce commutes with the split.
  SmallVector<Value> finals(weightGrads);
  SmallVector<Operation *> replacedSyncs;
  for (SmallVector<AllReduceOp> syncs = syncsOf(finals); !syncs.empty();
       syncs = syncsOf(finals)) {
    weightGrad = onStageOf(
        builder.create<AllReduceOp>(
            loc, withExtent(tensorOf(syncs[0].getY()), 0, numOutputs),
            weightGrad, syncs[0].getAxisAttr(), syncs[0].getReduceAttr()),
        syncs[0]);
    for (auto [index, sync] : llvm::enumerate(syncs)) {
      finals[index] = sync.getY();
      replacedSyncs.push_back(sync);
    }
  }
  auto gradSplit =
      onStageOf(builder.create<SplitOp>(loc, ValueRange(finals).getTypes(),
                                        weightGrad, uint64_t{0}),
                first.wgrad);
  for (auto [old, piece] : llvm::zip(finals, gradSplit.getYs()))
    old.replaceAllUsesWith(piece);
  dead.append(replacedSyncs.rbegin(), replacedSyncs.rend());
  for (Projection p : group)
    dead.append({p.wgrad, p.forward});
  for (Operation *op : dead)
    op->erase();
}

/// Whether the group is gate and up: two projections whose outputs one
/// swiglu reads as its gate and its up, in that order.
bool feedsSwiglu(ArrayRef<Projection> group) {
  if (group.size() != 2)
    return false;
  Projection first = group[0], second = group[1];
  Value gate = first.forward.getY(), up = second.forward.getY();
  return llvm::any_of(gate.getUsers(), [&](Operation *user) {
    auto swiglu = dyn_cast<SwigluOp>(user);
    return swiglu && swiglu.getGate() == gate && swiglu.getUp() == up;
  });
}

/// The fused gate/up GEMM's output read in place: where a split by columns
/// into two equal halves feeds nothing but swiglu (gate, up) and its
/// gradient, and each gradient's halves are joined by columns for the
/// fused backward GEMMs, swiglu_packed and swiglu_packed_grad take the
/// packed tensors themselves, so neither the split nor the join copies
/// columns (on a device they cost more than the fused GEMM saves).
void packSwiglu(SplitOp split) {
  auto packed = tensorOf(split.getX());
  int64_t lastDim = packed.getRank() - 1;
  if (split.getYs().size() != 2 ||
      static_cast<int64_t>(split.getDim()) != lastDim ||
      tensorOf(split.getYs()[0]) != tensorOf(split.getYs()[1]))
    return;
  Value gate = split.getYs()[0], up = split.getYs()[1];
  SmallVector<SwigluOp> forwards;
  SmallVector<std::pair<SwigluGradOp, ConcatOp>> backwards;
  for (Value half : {gate, up})
    for (Operation *user : half.getUsers()) {
      if (auto forward = dyn_cast<SwigluOp>(user);
          forward && forward.getGate() == gate && forward.getUp() == up) {
        if (half == gate)
          forwards.push_back(forward);
        continue;
      }
      auto backward = dyn_cast<SwigluGradOp>(user);
      if (!backward || backward.getGate() != gate || backward.getUp() != up)
        return;
      if (half == up)
        continue;
      Value dgate = backward.getDgate(), dup = backward.getDup();
      auto join = dgate.hasOneUse()
                      ? dyn_cast<ConcatOp>(*dgate.getUsers().begin())
                      : nullptr;
      if (!join || !dup.hasOneUse() || join.getXs().size() != 2 ||
          join.getXs()[0] != dgate || join.getXs()[1] != dup ||
          static_cast<int64_t>(join.getDim()) != lastDim)
        return;
      backwards.push_back({backward, join});
    }
  for (SwigluOp forward : forwards) {
    OpBuilder builder(forward);
    Value y =
        onStageOf(builder.create<SwigluPackedOp>(
                      forward.getLoc(), forward.getY().getType(), split.getX()),
                  forward);
    forward.getY().replaceAllUsesWith(y);
    forward.erase();
  }
  for (auto [backward, join] : backwards) {
    OpBuilder builder(join);
    Value dgu = onStageOf(builder.create<SwigluPackedGradOp>(
                              backward.getLoc(), join.getY().getType(),
                              split.getX(), backward.getDy()),
                          backward);
    join.getY().replaceAllUsesWith(dgu);
    join.erase();
    backward.erase();
  }
  if (split->use_empty())
    split.erase();
}

void fuseProjections(func::FuncOp func, bool attention) {
  // Projections by input, in program order.
  llvm::MapVector<Value, SmallVector<Projection>> byInput;
  func.walk([&](MatmulOp forward) {
    if (std::optional<Projection> p = projectionOf(forward))
      byInput[forward.getX()].push_back(*p);
  });
  for (auto &[input, group] : byInput)
    if (group.size() > 1 && compatible(group) &&
        (attention || feedsSwiglu(group)))
      fuse(group);
  SmallVector<SplitOp> splits;
  func.walk([&](SplitOp split) { splits.push_back(split); });
  for (SplitOp split : splits)
    packSwiglu(split);
}

struct FuseProjectionsPass
    : sharc::impl::FuseProjectionsBase<FuseProjectionsPass> {
  using FuseProjectionsBase::FuseProjectionsBase;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      fuseProjections(func, attention);
  }
};

} // namespace
