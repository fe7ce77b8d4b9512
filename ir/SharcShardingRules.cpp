//===- SharcShardingRules.cpp - each op's rule on one mesh axis -----------===//
//
// ShardingRuleOpInterface of the forward ops. A rule sees one axis and the
// codes of the local operands there; it says which codes the op needs and
// which its results get. Ops whose results match their operands (rope,
// swiglu, add) keep the interface's elementwise default.
//
//===----------------------------------------------------------------------===//

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace sharc;
using namespace sharc::placement;

namespace {

LogicalResult setRule(AxisRule &rule, ArrayRef<int64_t> operands,
                      ArrayRef<int64_t> results) {
  rule.operands.assign(operands.begin(), operands.end());
  rule.results.assign(results.begin(), results.end());
  return success();
}

bool isPartial(int64_t code) { return code == kP || code == kPMax; }

} // namespace

/// A table split over the vocabulary gives partial sums (each rank's zero
/// rows for ids it does not hold), one split over the hidden dimension a
/// result split there; otherwise the rows follow the ids.
LogicalResult EmbeddingOp::getAxisRule(const AxisQuery &query, AxisRule &rule) {
  int64_t table = query.operands[0], ids = query.operands[1];
  if (ids != kI && ids != 0 && ids != 1)
    return failure(); // only a sequence or batch split passes through
  if (table == 0 && ids == kI)
    return setRule(rule, {0, kI}, {kP});
  if (table == 1 && ids == kI) // hidden split: each rank its columns
    return setRule(rule, {1, kI}, {2});
  if (table == kI || table == kR)
    return setRule(rule, {table, ids}, {ids});
  return failure();
}

FailureOr<SmallVector<Value>> EmbeddingOp::buildSharded(OpBuilder &builder,
                                                        ValueRange operands) {
  // The rank's rows start at its block of the vocabulary: the kernel reads
  // the offset from the rank's coordinate on the axis splitting the table.
  PlacementAttr table = getPlacement(operands[0].getType());
  StringAttr vocabAxis;
  for (auto [axis, code] : llvm::zip(table.getAxes(), table.getCodes()))
    if (code == 0) {
      if (vocabAxis)
        return emitOpError("vocabulary split over two axes (")
               << vocabAxis.getValue() << ", " << axis.getValue()
               << ") is not supported";
      vocabAxis = axis;
    }
  Value out = builder.create<EmbeddingOp>(getLoc(), operands[0], operands[1],
                                          getVocabStartAttr(), vocabAxis);
  return SmallVector<Value>{out};
}

/// A norm on whole rows (I) needs a weight every rank uses alike; on
/// token or head shards, a weight each rank uses on its own part (R).
LogicalResult RmsNormOp::getAxisRule(const AxisQuery &query, AxisRule &rule) {
  int64_t x = query.operands[0], w = query.operands[1];
  // A sum, or a whole value meeting a weight used per part, is brought to
  // where activations live on this axis (SP's sequence split).
  if (isPartial(x) || (w == kR && x == kI))
    x = query.activation;
  if (w == kI) // used alike everywhere: on whole rows, gathered or summed
    return setRule(rule, {kI, kI}, {kI});
  if (w == kR && x >= 0)
    return setRule(rule, {x, kR}, {x});
  return failure();
}

/// Column parallel (weight S(0)) needs its input R and gives S(last); row
/// parallel (weight S(1)) takes S(last) and gives a partial sum; a weight
/// used alike everywhere (I) needs its input I; a weight each rank uses on
/// its own batch or sequence block (R) passes that split through.
LogicalResult MatmulOp::getAxisRule(const AxisQuery &query, AxisRule &rule) {
  int64_t x = query.operands[0], w = query.operands[1];
  int64_t lastDim = cast<RankedTensorType>(getX().getType()).getRank() - 1;
  if (w == 0)
    return setRule(rule, {kR, 0}, {lastDim});
  if (w == 1)
    return setRule(rule, {lastDim, 1}, {kP});
  if (w == kI)
    return setRule(rule, {kI, kI}, {kI});
  if (w == kR && x >= 0 && x != lastDim)
    return setRule(rule, {x, kR}, {x});
  // Split over the features on an axis that splits tokens between layers
  // (heads after Ulysses attention): back to the tokens' split.
  int64_t act = query.activation;
  if (w == kR && x == lastDim && act >= 0 && act != lastDim)
    return setRule(rule, {act, kR}, {act});
  return failure();
}

FailureOr<SmallVector<Value>> MatmulOp::buildSharded(OpBuilder &builder,
                                                     ValueRange operands) {
  return SmallVector<Value>{
      builder.create<MatmulOp>(getLoc(), operands[0], operands[1])};
}

/// The module's context-parallel exchange (kContextParallelAttr), empty if
/// none.
static StringRef contextExchange(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  auto exchange = module
                      ? module->getAttrOfType<StringAttr>(kContextParallelAttr)
                      : StringAttr();
  return exchange ? exchange.getValue() : StringRef();
}

/// Heads split (S(2)) or batch split (S(1)) pass through. A sequence split
/// (S(0), context parallelism) takes the module's exchange: Ulysses brings
/// q, k and v to a heads split by all_to_all; the K/V all-gather keeps the
/// query block and gathers k and v to R (each rank uses all of them with its
/// own queries, so their gradients come back partial: reduce_scatter); the
/// ring keeps all three split and moves the K/V blocks (buildSharded).
LogicalResult AttentionOp::getAxisRule(const AxisQuery &query, AxisRule &rule) {
  int64_t q = query.operands[0];
  if (q == 0) {
    StringRef exchange = contextExchange(*this);
    if (exchange == "a2a")
      return setRule(rule, {2, 2, 2}, {2, 1});
    if (exchange == "all_gather")
      return setRule(rule, {0, kR, kR}, {0, 2});
    if (exchange == "ring")
      return setRule(rule, {0, 0, 0}, {0, 2});
    return failure();
  }
  if (q != kI && q != 1 && q != 2)
    return failure();
  const int64_t lseDimOf[] = {2, 0, 1}; // lse is [B, Hq, S]
  return setRule(rule, {q, q, q}, {q, q >= 0 ? lseDimOf[q] : q});
}

/// The one axis splitting dimension 0 of `value` (its block's position
/// comes from that axis's coordinate), null if none; an error for two.
static FailureOr<StringAttr> sequenceAxis(Operation *op, Value value) {
  PlacementAttr placement = getPlacement(value.getType());
  StringAttr found;
  for (auto [axis, code] : llvm::zip(placement.getAxes(), placement.getCodes()))
    if (code == 0) {
      if (found)
        return op->emitOpError("sequence split over two axes (")
               << found.getValue() << ", " << axis.getValue()
               << ") has no global positions";
      found = axis;
    }
  return found;
}

/// The module's balanced sequence axis (sharc.balanced_axis) and its size,
/// or null where there is none or it has one rank.
static std::pair<StringAttr, int64_t> balancedAxis(Operation *op) {
  auto module = op->getParentOfType<ModuleOp>();
  auto axis = module ? module->getAttrOfType<StringAttr>(kBalancedAxisAttr)
                     : StringAttr();
  int64_t size = axis ? getMesh(op).getSize(axis.getValue()) : 1;
  if (size <= 1)
    return {StringAttr(), 1};
  return {axis, size};
}

/// position_split of a sequence split over `axis`: "balanced" where the
/// module balances that axis, else absent (contiguous blocks).
static StringAttr positionSplit(Operation *op, StringAttr axis) {
  if (!axis || balancedAxis(op).first != axis)
    return {};
  return StringAttr::get(op->getContext(), "balanced");
}

/// Gathering a balanced split over its n ranks concatenates each rank's
/// chunks r and 2n-1-r in rank order: chunks 0, 2n-1, 1, 2n-2, ... This
/// permute_blocks order brings such a sequence into natural order
/// (`inverse`: natural order back into rank order).
static Value reorderChunks(OpBuilder &builder, Location loc, Value x, int64_t n,
                           bool inverse) {
  SmallVector<int64_t> order(2 * n);
  for (int64_t r = 0; r < n; ++r) {
    // Gathered blocks 2r and 2r+1 are natural chunks r and 2n-1-r.
    if (inverse) {
      order[2 * r] = r;
      order[2 * r + 1] = 2 * n - 1 - r;
    } else {
      order[r] = 2 * r;
      order[2 * n - 1 - r] = 2 * r + 1;
    }
  }
  return builder.create<PermuteBlocksOp>(loc, x,
                                         builder.getDenseI64ArrayAttr(order));
}

/// Under the balanced split, a sequence the exchange gathered over the
/// balanced axis is in rank order: the K/V all-gather permutes k and v
/// into natural order for the query chunks' global positions; Ulysses
/// permutes q, k and v, runs square causal attention, and permutes the
/// output back to rank order for the inverse all_to_all.
FailureOr<SmallVector<Value>> AttentionOp::buildSharded(OpBuilder &builder,
                                                        ValueRange operands) {
  FailureOr<StringAttr> queryAxis = sequenceAxis(*this, operands[0]);
  if (failed(queryAxis))
    return failure();
  Location loc = getLoc();
  Value q = operands[0], k = operands[1], v = operands[2];
  auto [balanced, n] = balancedAxis(*this);
  if (*queryAxis && contextExchange(*this) == "ring") {
    // The ring's positions come from the axis it moves over; rows balanced
    // over another axis would need both.
    if (balanced && balanced != *queryAxis)
      return emitOpError("ring attention over ")
             << queryAxis->getValue() << " needs the sequence balanced over it "
             << "or not at all, got it balanced over " << balanced.getValue();
    return buildRingAttention(builder, loc, q, k, v, getHeadDim(), *queryAxis,
                              getMesh(*this).getSize(queryAxis->getValue()),
                              /*balanced=*/bool(balanced));
  }
  // Without a balanced axis, or with the sequence split over it on every
  // operand, nothing arrives reordered.
  bool gathered = balanced && *queryAxis != balanced;
  bool keysGathered = balanced && *queryAxis == balanced;
  if (gathered)
    q = reorderChunks(builder, loc, q, n, /*inverse=*/false);
  if (gathered || keysGathered) {
    k = reorderChunks(builder, loc, k, n, /*inverse=*/false);
    v = reorderChunks(builder, loc, v, n, /*inverse=*/false);
  }
  auto rebuilt =
      builder.create<AttentionOp>(loc, q, k, v, getHeadDimAttr(), *queryAxis,
                                  positionSplit(*this, *queryAxis));
  Value out = rebuilt.getOut();
  if (gathered)
    out = reorderChunks(builder, loc, out, n, /*inverse=*/true);
  return SmallVector<Value>{out, rebuilt.getLse()};
}

/// RoPE on a sequence block rotates by the rows' global positions.
FailureOr<SmallVector<Value>> RopeOp::buildSharded(OpBuilder &builder,
                                                   ValueRange operands) {
  FailureOr<StringAttr> axis = sequenceAxis(*this, operands[0]);
  if (failed(axis))
    return failure();
  Value y = builder.create<RopeOp>(getLoc(), operands[0], getHeadDimAttr(),
                                   getThetaAttr(), getPositionOffsetAttr(),
                                   *axis, positionSplit(*this, *axis));
  return SmallVector<Value>{y};
}

/// Logits split over the vocabulary (S(last)) give the vocab-parallel loss,
/// invariant after its all-reduced row statistics; logits and labels split
/// over tokens give each rank's share of the mean over every rank's valid
/// labels (its mean times its count over the all-reduced count), partial.
LogicalResult CrossEntropyOp::getAxisRule(const AxisQuery &query,
                                          AxisRule &rule) {
  int64_t logits = query.operands[0], labels = query.operands[1];
  int64_t lastDim = 2;
  if (logits == lastDim && labels == kI)
    return setRule(rule, {lastDim, kI}, {kI});
  if (logits >= 0 && logits < lastDim && labels == logits)
    return setRule(rule, {logits, labels}, {kP});
  if (labels == kI)
    return setRule(rule, {kI, kI}, {kI});
  return failure();
}

FailureOr<SmallVector<Value>>
CrossEntropyOp::buildSharded(OpBuilder &builder, ValueRange operands) {
  Value logits = operands[0], labels = operands[1];
  Location loc = getLoc();
  MeshAttr mesh = getMesh(*this);
  PlacementAttr logitsPlace = getPlacement(logits.getType());
  PlacementAttr labelsPlace = getPlacement(labels.getType());
  StringAttr vocabAxis;
  for (auto [axis, code] :
       llvm::zip(logitsPlace.getAxes(), logitsPlace.getCodes()))
    if (code == 2) {
      if (vocabAxis)
        return emitOpError("vocabulary split over two axes (")
               << vocabAxis.getValue() << ", " << axis.getValue()
               << ") is not supported";
      vocabAxis = axis;
    }
  SmallVector<std::pair<StringRef, int64_t>> lossCodes;
  SmallVector<StringRef> labelAxes; // in mesh order, for one all_reduce
  for (StringAttr axis : mesh.getAxes())
    if (labelsPlace.getAxis(axis.getValue()) >= 0) {
      lossCodes.push_back({axis.getValue(), kP});
      labelAxes.push_back(axis.getValue());
    }
  auto lossType = withPlacement(RankedTensorType::get({}, builder.getF32Type()),
                                PlacementAttr::make(getContext(), lossCodes));
  Value loss;
  if (vocabAxis) {
    // The full logits are never gathered: three [S, B] row statistics are
    // all-reduced over the vocabulary axis instead.
    auto statType = [&](int64_t code) {
      return withPlacement(
          RankedTensorType::get(
              cast<RankedTensorType>(labels.getType()).getShape(),
              builder.getF32Type()),
          labelsPlace.withAxis(vocabAxis, code));
    };
    auto reduce = [&](Value partial, StringRef kind) -> Value {
      return builder.create<AllReduceOp>(loc, statType(kI), partial, vocabAxis,
                                         builder.getStringAttr(kind));
    };
    IntegerAttr valid = getValidVocabAttr();
    Value max = reduce(builder.create<VocabMaxOp>(loc, statType(kPMax), logits,
                                                  valid, vocabAxis),
                       "max");
    Value target =
        reduce(builder.create<TargetLogitOp>(loc, statType(kP), logits, labels,
                                             valid, vocabAxis),
               "sum");
    Value sumExp = reduce(builder.create<SumExpOp>(loc, statType(kP), logits,
                                                   max, valid, vocabAxis),
                          "sum");
    loss = builder.create<VocabParallelLossOp>(
        loc, lossType, logits, labels, max, target, sumExp, valid, vocabAxis);
  } else {
    loss = builder.create<CrossEntropyOp>(loc, lossType, logits, labels,
                                          getValidVocabAttr());
  }
  if (!labelAxes.empty()) {
    // Pieces may hold different numbers of valid labels (padding, ignored
    // positions): each mean is weighted by its count over the total.
    Value count = builder.create<ValidCountOp>(loc, lossType, labels,
                                               getValidVocabAttr());
    auto totalType =
        withPlacement(lossType, PlacementAttr::getInvariant(getContext()));
    Value total = builder.create<AllReduceOp>(
        loc, totalType, count, builder.getStringAttr(joinAxes(labelAxes)),
        builder.getStringAttr("sum"));
    loss = builder.create<CountScaleOp>(loc, lossType, loss, labels, total,
                                        getValidVocabAttr());
  }
  return SmallVector<Value>{loss};
}
