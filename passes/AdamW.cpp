//===- AdamW.cpp - add the optimizer update to a train step ---------------===//

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "passes/ParameterStages.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <map>

namespace sharc {
#define GEN_PASS_DEF_ADAMW
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

struct Hyperparameters {
  FloatAttr lr, beta1, beta2, eps, weightDecay;
  FloatAttr gradClip; ///< the largest global gradient norm; 0: no clipping
  /// bf16-mixed: an fp32 master and fp32 moments for every parameter of
  /// another float type.
  bool masterWeights = false;
};

/// Reads the module's optimizer settings, with the original's defaults.
Hyperparameters readHyperparameters(ModuleOp module, Builder &builder) {
  auto dict = module->getAttrOfType<DictionaryAttr>(kOptimizerAttr);
  auto get = [&](StringRef key, double fallback) {
    if (dict)
      if (auto value = dict.getAs<FloatAttr>(key))
        return value;
    return builder.getF64FloatAttr(fallback);
  };
  return {get("lr", 5e-4),
          get("beta1", 0.9),
          get("beta2", 0.999),
          get("eps", 1e-8),
          get("weight_decay", 0.01),
          get("grad_clip", 0.0),
          dict && dict.get("master_weights")};
}

/// The parameter's type with f32 elements (its placement kept): the type of
/// its master and moments under bf16-mixed.
Type asF32(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(),
                               Float32Type::get(type.getContext()),
                               tensor.getEncoding());
}

bool needsMaster(const Hyperparameters &hp, Value param) {
  return hp.masterWeights &&
         !cast<RankedTensorType>(param.getType()).getElementType().isF32();
}

/// The op after which both the gradient is ready and every other reader of
/// the parameter has run, counting readers of a fused weight the parameter
/// is a view of (sharc-fuse-projections); null when none (update at the
/// block start).
Operation *lastOf(Value grad, Value param, Operation *returnOp) {
  Operation *last = grad.getDefiningOp();
  SmallVector<Value> readers{param};
  while (!readers.empty())
    for (Operation *user : readers.pop_back_val().getUsers()) {
      if (user != returnOp && (!last || last->isBeforeInBlock(user)))
        last = user;
      if (auto concat = dyn_cast<ConcatOp>(user); concat && concat.isView())
        readers.push_back(concat.getY());
    }
  return last;
}

/// The step's squared global gradient norm: each rank's sum_squares, in
/// which a gradient that k ranks hold alike (R or I over axes of k ranks
/// together) counts 1/k, then one all_reduce over every axis of more than
/// one rank, so that each parameter's elements count once whatever the
/// layout. Placed after the last gradient is final.
///
/// Under pipeline parallelism `grads` are stage `stage`'s and `stageAxis`
/// the pipeline axis: the stages hold different parameters (each value is I
/// there only because a rank runs its own stage's ops), so that axis adds
/// no replica, and the all_reduce over it sums the stages' shares. Each
/// stage builds its own; together they are one collective. The stage's
/// grads may come from several model chunks (interleaved schedule), so its
/// sum and all_reduce are staged here, marked as all of the stage's
/// chunks': sharc-pipeline-schedule would otherwise find the chunks (apart
/// virtual stages) meeting in them.
FailureOr<Value> buildGradNormSq(func::FuncOp func, ArrayRef<Value> grads,
                                 StringRef stageAxis, int64_t stage,
                                 OpBuilder &builder) {
  MeshAttr mesh = getMesh(func);
  SmallVector<StringRef> axes;
  for (auto [axis, size] : llvm::zip(mesh.getAxes(), mesh.getSizes()))
    if (size > 1)
      axes.push_back(axis.getValue());
  SmallVector<int64_t> replicas;
  Operation *last = nullptr;
  for (Value grad : grads) {
    PlacementAttr placement = getPlacement(grad.getType());
    int64_t count = 1;
    for (StringRef axis : axes) {
      if (axis == stageAxis)
        continue;
      int64_t code = placement.getAxis(axis);
      if (code == placement::kP || code == placement::kPMax)
        return emitError(grad.getLoc())
               << "a gradient partial on " << axis
               << " cannot enter the global norm; it must be summed first";
      if (code < 0)
        count *= mesh.getSize(axis);
    }
    replicas.push_back(count);
    Operation *producer = grad.getDefiningOp();
    if (producer && (!last || last->isBeforeInBlock(producer)))
      last = producer;
  }
  OpBuilder::InsertionGuard guard(builder);
  if (last)
    builder.setInsertionPointAfter(last);
  else
    builder.setInsertionPointToStart(&func.getBody().front());
  MLIRContext *context = builder.getContext();
  PlacementAttr partial = PlacementAttr::getInvariant(context);
  for (StringRef axis : axes)
    partial = partial.withAxis(axis, placement::kP);
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  Location loc = func.getLoc();
  auto onStage = [&](Operation *op) {
    if (stageAxis.empty())
      return;
    op->setAttr(kStageAttr, builder.getI64IntegerAttr(stage));
    op->setAttr(kAllChunksAttr, builder.getUnitAttr());
  };
  Value sum =
      builder.create<SumSquaresOp>(loc, withPlacement(scalar, partial), grads,
                                   builder.getDenseI64ArrayAttr(replicas));
  onStage(sum.getDefiningOp());
  if (axes.empty())
    return sum;
  auto reduce = builder.create<AllReduceOp>(
      loc, withPlacement(scalar, PlacementAttr::getInvariant(context)), sum,
      builder.getStringAttr(joinAxes(axes)), builder.getStringAttr("sum"));
  onStage(reduce);
  return reduce.getResult();
}

/// Gathers the updates (in block order) into runs of about `groupBytes` of
/// gradients, or an eighth of all of them where that is less: each run's
/// updates move down to just before its last one, so they are consecutive
/// and the device backend updates them in one launch (executor
/// findAdamWRuns). A model's updates are otherwise one launch each (91 for
/// MiniMind, a third of them on 96 or 768 elements), at a few microseconds
/// of launch and ramp apiece; a run's gradients live until its last
/// update, so the gradient arena grows by at most the smaller bound (an
/// eighth keeps a small model's from holding every gradient at once).
/// Moving an update later is safe: its results feed only the return, and
/// every reader of the parameter already ran before its first place.
void groupUpdates(MutableArrayRef<AdamWOp> updates, int64_t groupBytes) {
  llvm::sort(updates, [](AdamWOp a, AdamWOp b) {
    return a->isBeforeInBlock(b.getOperation());
  });
  int64_t total = 0;
  for (AdamWOp update : updates)
    total += tensorBytes(update.getGrad());
  int64_t runBytes = std::min(groupBytes, total / 8);
  size_t first = 0;
  int64_t bytes = 0;
  for (size_t i = 0; i < updates.size(); ++i) {
    bytes += tensorBytes(updates[i].getGrad());
    if (bytes < runBytes && i + 1 < updates.size())
      continue;
    for (size_t k = first; k < i; ++k)
      updates[k]->moveBefore(updates[i]);
    first = i + 1;
    bytes = 0;
  }
}

LogicalResult addOptimizer(func::FuncOp func, const Hyperparameters &hp,
                           bool keepGradients, int64_t groupBytes) {
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  // A second run would update every kept gradient's parameter twice a step
  // (with fresh moments each time); sharc-opt lets a user ask for that.
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    StringRef state = getArgString(func, i, kStateAttr);
    if (!state.empty())
      return func.emitOpError("already has its optimizer: argument ")
             << i << " is state '" << state << "'; run sharc-adamw once";
  }
  llvm::StringMap<unsigned> paramIndex;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    StringRef name = getArgString(func, i, kParamAttr);
    if (!name.empty())
      paramIndex[name] = i;
  }

  OpBuilder builder(returnOp);
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  auto outputAttrs = [&](StringRef output, std::optional<unsigned> updateOf) {
    SmallVector<NamedAttribute> attrs{
        builder.getNamedAttr(kOutputAttr, builder.getStringAttr(output))};
    if (updateOf)
      attrs.push_back(builder.getNamedAttr(
          kUpdateOfAttr, builder.getI64IntegerAttr(*updateOf)));
    return builder.getDictionaryAttr(attrs);
  };

  // Moments keep the parameter's element type: pure bf16 training keeps
  // bf16 moments, as the original does; bf16-mixed adds an f32 master
  // ("master:<name>", after the moments) and makes the moments f32. They
  // are added in one call: each
  // insertion makes a FunctionType of every argument, which the context
  // keeps for good, so one call per moment took time and memory quadratic
  // in the parameter count (400 layers: 8.5 s and 1.8 GB to compile).
  SmallVector<unsigned> stateIndices;
  SmallVector<Type> stateTypes;
  SmallVector<DictionaryAttr> stateAttrs;
  SmallVector<Location> stateLocs;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    StringRef output = getResultString(func, i, kOutputAttr);
    if (!output.starts_with("grad:"))
      continue;
    auto it = paramIndex.find(output.drop_front(5));
    if (it == paramIndex.end())
      return func.emitOpError("gradient result '")
             << output << "' names no parameter argument";
    Value param = func.getArgument(it->second);
    bool master = needsMaster(hp, param);
    Type stateType = master ? asF32(param.getType()) : param.getType();
    for (StringRef prefix : {"m:", "v:", "master:"}) {
      if (prefix == "master:" && !master)
        continue;
      stateIndices.push_back(func.getNumArguments());
      stateTypes.push_back(stateType);
      stateAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
          kStateAttr, builder.getStringAttr(prefix + output.drop_front(5)))));
      stateLocs.push_back(param.getLoc());
    }
  }
  unsigned nextState = func.getNumArguments();
  func.insertArguments(stateIndices, stateTypes, stateAttrs, stateLocs);

  // Clipping: the squared global norm, one per pipeline stage (key -1
  // without stages), each followed by its stage's updates.
  struct StageNorm {
    Value normSq;
    Operation *tail; ///< the norm, then the last update after it
  };
  std::map<int64_t, StageNorm> norms;
  llvm::StringMap<int64_t> stages = parameterStages(func);
  auto stageOf = [&](StringRef name) {
    auto it = stages.find(name);
    return it == stages.end() ? int64_t{-1} : it->second;
  };
  FloatAttr maxNorm;
  // The updates placed where their gradient is final (not after a norm).
  SmallVector<AdamWOp> eager;
  if (hp.gradClip.getValueAsDouble() > 0) {
    std::map<int64_t, SmallVector<Value>> gradsOf;
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      StringRef output = getResultString(func, i, kOutputAttr);
      if (output.consume_front("grad:"))
        gradsOf[stageOf(output)].push_back(returnOp.getOperand(i));
    }
    if (gradsOf.empty())
      return func.emitOpError("grad_clip needs gradients to clip");
    StringRef stageAxis = stages.empty() ? "" : pipelineAxis(func);
    // Every stage's ranks join the norm's all_reduce: one without
    // gradients (or a gradient of no stage) would leave the others waiting.
    int64_t numStages =
        stageAxis.empty() ? 1 : getMesh(func).getSize(stageAxis);
    if (!stages.empty() && (gradsOf.count(-1) ||
                            static_cast<int64_t>(gradsOf.size()) != numStages))
      return func.emitOpError("grad_clip needs gradients on each of the ")
             << numStages << " pipeline stages, found them on "
             << gradsOf.size() << (gradsOf.count(-1) ? " (one unstaged)" : "");
    for (auto &[stage, grads] : gradsOf) {
      FailureOr<Value> norm =
          buildGradNormSq(func, grads, stageAxis, stage, builder);
      if (failed(norm))
        return failure();
      norms[stage] = {*norm, norm->getDefiningOp()};
    }
    maxNorm = hp.gradClip;
  }

  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    StringRef output = getResultString(func, i, kOutputAttr);
    Value value = returnOp.getOperand(i);
    if (!output.starts_with("grad:")) {
      results.push_back(value);
      resultAttrs.push_back(func.getResultAttrDict(i));
      continue;
    }
    StringRef name = output.drop_front(5);
    if (keepGradients) {
      results.push_back(value);
      resultAttrs.push_back(func.getResultAttrDict(i));
    }
    unsigned paramArg = paramIndex.find(name)->second;
    Value param = func.getArgument(paramArg);
    unsigned mArg = nextState++, vArg = nextState++;
    std::optional<unsigned> masterArg;
    if (needsMaster(hp, param))
      masterArg = nextState++;
    Value master = masterArg ? func.getArgument(*masterArg) : Value();
    // Update as soon as the gradient is final and nothing else reads the
    // parameter: the gradient dies at once instead of living until the end
    // of the backward (the in-place write needs no later reader). Clipping
    // waits for the global norm, which every gradient feeds.
    OpBuilder::InsertionGuard guard(builder);
    Operation *last = lastOf(value, param, returnOp);
    StageNorm *norm = nullptr;
    if (maxNorm)
      norm = &norms.at(stageOf(name));
    Value gradNormSq = norm ? norm->normSq : Value();
    bool atNorm = norm && (!last || last == norm->tail ||
                           last->isBeforeInBlock(norm->tail));
    if (atNorm)
      last = norm->tail;
    if (last)
      builder.setInsertionPointAfter(last);
    else
      builder.setInsertionPointToStart(returnOp->getBlock());
    auto adamw = builder.create<AdamWOp>(
        value.getLoc(), param.getType(), func.getArgument(mArg).getType(),
        func.getArgument(vArg).getType(), master ? master.getType() : Type(),
        param, value, func.getArgument(mArg), func.getArgument(vArg), master,
        gradNormSq, hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weightDecay, maxNorm);
    // The updates after the norm keep the parameters' order.
    if (atNorm)
      norm->tail = adamw;
    else
      eager.push_back(adamw);
    results.append({adamw.getNewParam(), adamw.getNewM(), adamw.getNewV()});
    resultAttrs.append({outputAttrs(("param:" + name).str(), paramArg),
                        outputAttrs(("m:" + name).str(), mArg),
                        outputAttrs(("v:" + name).str(), vArg)});
    if (master) {
      results.push_back(adamw.getNewMaster());
      resultAttrs.push_back(outputAttrs(("master:" + name).str(), masterArg));
    }
  }
  if (!norms.empty()) {
    // The runtime prints its square root, the pre-clip global norm (every
    // stage has it; the last stage's goes out, beside the loss).
    results.push_back(norms.rbegin()->second.normSq);
    resultAttrs.push_back(outputAttrs("grad_norm_sq", std::nullopt));
  }
  // Pipeline stages order their own updates (sharc-pipeline-schedule).
  if (groupBytes > 0 && stages.empty())
    groupUpdates(eager, groupBytes);
  setResults(func, results, resultAttrs);
  return success();
}

struct AdamWPass : sharc::impl::AdamWBase<AdamWPass> {
  using AdamWBase::AdamWBase;
  void runOnOperation() override {
    Builder builder(&getContext());
    Hyperparameters hp = readHyperparameters(getOperation(), builder);
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(addOptimizer(func, hp, keepGradients, groupBytes)))
        return signalPassFailure();
  }
};

} // namespace
