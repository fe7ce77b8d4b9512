//===- Spmdize.cpp - a layout as a per-rank program -----------------------===//
//
// Walks the dense forward once, in order. Arguments get their local types
// from the placements the layout passes requested; each op is rebuilt on
// local operands with its result placement given by its rule, after the
// collectives that bring its operands to the placements the rule needs.
// Conversions are cached per (value, placement), so a value feeding
// several consumers is gathered or replicated once.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/Layout.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace sharc {
#define GEN_PASS_DEF_SPMDIZE
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

using namespace sharc::placement;

namespace {

int64_t tpOf(Value value) {
  return getPlacement(value.getType()).getAxis("tp");
}
int64_t dpOf(Value value) {
  return getPlacement(value.getType()).getAxis("dp");
}
ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}
Type elementOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

class Spmdizer {
public:
  Spmdizer(func::FuncOp func, const Layout &layout, const ModelSizes &sizes)
      : func(func), layout(layout), sizes(sizes), builder(func.getContext()) {}
  LogicalResult run();

private:
  RankedTensorType makeType(ArrayRef<int64_t> shape, Type element, int64_t dp,
                            int64_t tp) {
    return withPlacement(
        RankedTensorType::get(shape, element),
        PlacementAttr::make(func.getContext(), {{"dp", dp}, {"tp", tp}}));
  }
  /// The dp placement of a tensor whose batch dimension is `batchDim`.
  int64_t batchSharded(int64_t batchDim) const {
    return layout.size("dp") > 1 ? batchDim : kI;
  }
  LogicalResult retypeArguments();
  Value convert(Value value, int64_t tpTarget, Location loc);
  /// The local value standing for a dense one.
  Value local(Value dense) { return localOf.lookup(dense); }
  LogicalResult rewrite(Operation *op);
  Value rewriteEmbedding(EmbeddingOp op);
  Value rewriteMatmul(MatmulOp op);
  Value rewriteLoss(CrossEntropyOp op);

  func::FuncOp func;
  const Layout &layout;
  const ModelSizes &sizes;
  OpBuilder builder;
  llvm::DenseMap<Value, Value> localOf;
  llvm::DenseMap<std::pair<Value, int64_t>, Value> conversions;
};

LogicalResult Spmdizer::retypeArguments() {
  int64_t vocab = sizes.get("vocab_size");
  int64_t paddedVocab = vocab;
  if (layout.vocabParallel && vocab % layout.size("tp") != 0)
    paddedVocab = (vocab / layout.size("tp") + 1) * layout.size("tp");
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    SmallVector<int64_t> shape(shapeOf(arg));
    PlacementAttr placement;
    if (!getArgString(func, index, kParamAttr).empty()) {
      placement = getParamPlacement(func, index);
      StringRef role = getArgString(func, index, kRoleAttr);
      // Megatron pads the vocabulary to a multiple of tp; the padded rows
      // are never looked up and their logits are masked out of the loss.
      if (role == kRoleEmbedding || role == kRoleLmHead)
        shape[0] = paddedVocab;
    } else {
      placement =
          PlacementAttr::make(func.getContext(), {{"dp", batchSharded(1)}});
    }
    for (StringAttr axisName : layout.mesh.getAxes()) {
      StringRef axis = axisName.getValue();
      int64_t code = placement.getAxis(axis), size = layout.size(axis);
      if (code < 0)
        continue;
      if (shape[code] % size != 0)
        return emitError(arg.getLoc())
               << axis << " (" << size << ") must divide dimension " << code
               << " (" << shape[code] << ") of argument " << index;
      shape[code] /= size;
    }
    arg.setType(
        withPlacement(RankedTensorType::get(shape, elementOf(arg)), placement));
    localOf[arg] = arg;
  }
  return success();
}

Value Spmdizer::convert(Value value, int64_t target, Location loc) {
  int64_t current = tpOf(value);
  if (current == target)
    return value;
  auto key = std::make_pair(value, target);
  if (Value cached = conversions.lookup(key))
    return cached;
  PlacementAttr placement = getPlacement(value.getType());
  SmallVector<int64_t> shape(shapeOf(value));
  auto typeWith = [&](int64_t code) {
    return makeType(shape, elementOf(value), placement.getAxis("dp"), code);
  };
  StringAttr axis = builder.getStringAttr("tp");
  Value result;
  if (current == kI && target == kR) {
    result = builder.create<ReplicateOp>(loc, typeWith(kR), value, axis);
  } else if (current >= 0 && (target == kR || target == kI)) {
    shape[current] *= layout.size("tp");
    result = builder.create<AllGatherOp>(loc, typeWith(target), value, axis,
                                         builder.getI64IntegerAttr(current));
  } else if (current == kP && target == kI) {
    result = builder.create<AllReduceOp>(loc, typeWith(kI), value, axis,
                                         builder.getStringAttr("sum"));
  } else if (current == kP && target >= 0) {
    shape[target] /= layout.size("tp");
    result = builder.create<ReduceScatterOp>(loc, typeWith(target), value, axis,
                                             builder.getI64IntegerAttr(target));
  } else if (current == kI && target >= 0) {
    shape[target] /= layout.size("tp");
    result = builder.create<SliceToRankOp>(loc, typeWith(target), value, axis,
                                           builder.getI64IntegerAttr(target));
  } else {
    return Value();
  }
  conversions[key] = result;
  return result;
}

/// The lookup; under vocab parallelism each rank holds a block of rows and
/// the zero rows of the others sum to the dense result.
Value Spmdizer::rewriteEmbedding(EmbeddingOp op) {
  Value table = local(op.getTable()), ids = local(op.getIds());
  bool vocabSharded = tpOf(table) == 0;
  auto type =
      makeType({shapeOf(ids)[0], shapeOf(ids)[1], shapeOf(table)[1]},
               elementOf(table), batchSharded(1), vocabSharded ? kP : kI);
  Value out = builder.create<EmbeddingOp>(
      op.getLoc(), type, table, ids, op.getVocabStartAttr(),
      vocabSharded ? builder.getStringAttr("tp") : StringAttr());
  int64_t target = layout.sequenceParallel ? 0 : kI;
  return layout.size("tp") > 1 ? convert(out, target, op.getLoc()) : out;
}

/// Column parallel (weight S(0)) needs its input R and gives S(last); row
/// parallel (weight S(1)) takes S(last) and gives a partial sum, reduced
/// right away (reduce_scatter over the sequence under SP); a whole weight
/// needs its input invariant.
Value Spmdizer::rewriteMatmul(MatmulOp op) {
  Value x = local(op.getX()), w = local(op.getW());
  int64_t lastDim = static_cast<int64_t>(shapeOf(x).size()) - 1;
  int64_t weightCode = tpOf(w);
  int64_t inputCode = weightCode == 0 ? kR : weightCode == 1 ? lastDim : kI;
  x = convert(x, inputCode, op.getLoc());
  if (!x)
    return Value();
  std::optional<int64_t> resultCode =
      matmulRule(inputCode, weightCode, lastDim);
  if (!resultCode)
    return Value();
  SmallVector<int64_t> shape(shapeOf(x));
  shape.back() = shapeOf(w)[0];
  Value y = builder.create<MatmulOp>(
      op.getLoc(), makeType(shape, elementOf(x), dpOf(x), *resultCode), x, w);
  if (*resultCode == kP)
    y = convert(y, layout.sequenceParallel ? 0 : kI, op.getLoc());
  return y;
}

/// The loss; under vocab parallelism from all-reduced row statistics (the
/// full logits are never gathered), and under data parallelism the mean
/// of the per-rank means.
Value Spmdizer::rewriteLoss(CrossEntropyOp op) {
  Value logits = local(op.getLogits()), labels = local(op.getLabels());
  Location loc = op.getLoc();
  int64_t lossDp = layout.size("dp") > 1 ? kP : kI;
  auto lossType = makeType({}, builder.getF32Type(), lossDp, kI);
  Value loss;
  if (tpOf(logits) == 2) {
    auto statType = [&](int64_t tpCode) {
      return makeType(shapeOf(labels), builder.getF32Type(), dpOf(labels),
                      tpCode);
    };
    StringAttr tp = builder.getStringAttr("tp");
    auto reduce = [&](Value partial, StringRef kind) -> Value {
      return builder.create<AllReduceOp>(loc, statType(kI), partial, tp,
                                         builder.getStringAttr(kind));
    };
    IntegerAttr valid = op.getValidVocabAttr();
    Value max = reduce(
        builder.create<VocabMaxOp>(loc, statType(kPMax), logits, valid, tp),
        "max");
    Value target = reduce(builder.create<TargetLogitOp>(
                              loc, statType(kP), logits, labels, valid, tp),
                          "sum");
    Value sumExp = reduce(
        builder.create<SumExpOp>(loc, statType(kP), logits, max, valid, tp),
        "sum");
    loss = builder.create<VocabParallelLossOp>(loc, lossType, logits, labels,
                                               max, target, sumExp, valid, tp);
  } else {
    logits = convert(logits, kI, loc);
    loss = builder.create<CrossEntropyOp>(loc, lossType, logits, labels,
                                          op.getValidVocabAttr());
  }
  if (layout.size("dp") > 1) {
    loss = builder.create<ScaleOp>(
        loc, lossType, loss, builder.getF64FloatAttr(1.0 / layout.size("dp")));
    loss = builder.create<AllReduceOp>(
        loc, makeType({}, builder.getF32Type(), kI, kI), loss,
        builder.getStringAttr("dp"), builder.getStringAttr("sum"));
  }
  return loss;
}

LogicalResult Spmdizer::rewrite(Operation *op) {
  builder.setInsertionPoint(op);
  SmallVector<Value> results;
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    results.push_back(rewriteEmbedding(embedding));
  } else if (auto matmul = dyn_cast<MatmulOp>(op)) {
    results.push_back(rewriteMatmul(matmul));
  } else if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
    results.push_back(rewriteLoss(loss));
  } else if (auto norm = dyn_cast<RmsNormOp>(op)) {
    Value x = local(norm.getX()), w = local(norm.getW());
    // A norm on whole rows (I) needs a weight every rank uses alike; on
    // sequence or head shards, a weight each rank uses on its own part.
    int64_t weightCode = tpOf(x) == kI ? kI : kR;
    if (tpOf(w) != weightCode)
      return norm.emitOpError("weight placement on tp does not fit its "
                              "input's (the layout passes disagree)");
    results.push_back(builder.create<RmsNormOp>(norm.getLoc(), x.getType(), x,
                                                w, norm.getEpsAttr()));
  } else if (auto rope = dyn_cast<RopeOp>(op)) {
    Value x = local(rope.getX());
    results.push_back(builder.create<RopeOp>(
        rope.getLoc(), x.getType(), x, rope.getHeadDimAttr(),
        rope.getThetaAttr(), rope.getPositionOffsetAttr()));
  } else if (auto attention = dyn_cast<AttentionOp>(op)) {
    Value q = local(attention.getQ()), k = local(attention.getK()),
          v = local(attention.getV());
    auto qShape = shapeOf(q);
    int64_t heads = qShape[2] / attention.getHeadDim();
    auto lseType = makeType({qShape[1], heads, qShape[0]}, builder.getF32Type(),
                            batchSharded(0), tpOf(q) == 2 ? 1 : kI);
    auto rebuilt =
        builder.create<AttentionOp>(attention.getLoc(), q.getType(), lseType, q,
                                    k, v, attention.getHeadDimAttr());
    results.append({rebuilt.getOut(), rebuilt.getLse()});
  } else if (isa<AddOp, SwigluOp>(op)) {
    Value a = local(op->getOperand(0)), b = local(op->getOperand(1));
    b = convert(b, tpOf(a), op->getLoc());
    if (!b)
      return op->emitOpError("operands have incompatible placements");
    OperationState state(op->getLoc(), op->getName());
    state.addOperands({a, b});
    state.addTypes(a.getType());
    results.push_back(builder.create(state)->getResult(0));
  } else {
    return op->emitOpError("has no sharding rule");
  }
  for (auto [dense, rebuilt] : llvm::zip(op->getResults(), results)) {
    if (!rebuilt)
      return op->emitOpError("operands cannot be brought to the placements "
                             "its rule needs");
    localOf[dense] = rebuilt;
  }
  return success();
}

LogicalResult Spmdizer::run() {
  if (failed(retypeArguments()))
    return failure();
  SmallVector<Operation *> denseOps;
  for (Operation &op : func.getBody().front().without_terminator())
    denseOps.push_back(&op);
  for (Operation *op : denseOps)
    if (failed(rewrite(op)))
      return failure();
  SmallVector<Value> results;
  for (Value dense : func.getBody().front().getTerminator()->getOperands())
    results.push_back(local(dense));
  SmallVector<DictionaryAttr> resultAttrs;
  func.getAllResultAttrs(resultAttrs);
  setResults(func, results, resultAttrs);
  for (Operation *op : llvm::reverse(denseOps))
    op->erase();
  return success();
}

struct SpmdizePass : sharc::impl::SpmdizeBase<SpmdizePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    Layout layout = readLayout(module);
    if (layout.size("dp") == 1 && layout.size("tp") == 1)
      return; // dense: nothing to do
    ModelSizes sizes(module);
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(Spmdizer(func, layout, sizes).run()))
        return signalPassFailure();
  }
};

} // namespace
