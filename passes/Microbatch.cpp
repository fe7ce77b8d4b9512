//===- Microbatch.cpp - gradient accumulation over microbatches -----------===//
//
// The train step after autodiff, run once per microbatch on its slice of
// the batch, one microbatch after the other (so the activations of one are
// dead before the next starts), with the gradients summed and each
// gradient's synchronisation hoisted out to run once on the sum. The loss
// is the mean over every valid label of the step: each microbatch's mean
// is weighted by its count of valid labels over the step's (valid_count of
// the whole batch), so the loss and gradients are the whole batch's for
// any labels, not only when every microbatch has as many.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/Layout.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace sharc {
#define GEN_PASS_DEF_MICROBATCH
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// What the step returns, per result: the value each microbatch produces
/// (summed over them), then the all_reduce, and the split of a fused
/// gradient into its parameters' (sharc-fuse-projections), applied once to
/// the sum.
struct Output {
  Value perMicrobatch;
  AllReduceOp sync;   ///< null when the result is returned as summed
  SplitOp split;      ///< the fused gradient's split after the sync, or null
  unsigned piece = 0; ///< which of the split's results
  bool isLoss = false;
  bool isInvariant = false; ///< independent of the tokens: returned as is
};

class Accumulator {
public:
  Accumulator(func::FuncOp func, int64_t count, Location countLoc,
              int64_t validVocab)
      : func(func), count(count), countLoc(countLoc), validVocab(validVocab),
        builder(func.getContext()) {}
  /// `count` microbatches of the program, which was built for one.
  LogicalResult run();

private:
  LogicalResult collectOutputs();
  /// Makes the loss a share of the step's mean (see the file comment).
  LogicalResult normaliseOverStep();
  /// valid_count of a token input: it counts the whole step's labels.
  bool countsStep(Operation *op) const;
  /// Marks the ops that depend on a token input; the rest run once.
  void findVariantOps();
  FailureOr<SmallVector<SmallVector<Value>>> splitInputs();

  func::FuncOp func;
  int64_t count;
  Location countLoc;
  int64_t validVocab;
  OpBuilder builder;
  SmallVector<Output> outputs;
  llvm::DenseSet<Operation *> variant;
  llvm::SetVector<Operation *> hoisted; ///< a sync before its split
  SmallVector<BlockArgument> inputs;
};

LogicalResult Accumulator::collectOutputs() {
  Operation *returnOp = func.getBody().front().getTerminator();
  for (auto [index, value] : llvm::enumerate(returnOp->getOperands())) {
    StringRef output = getResultString(func, index, kOutputAttr);
    if (output != "loss" && !output.starts_with("grad:"))
      return emitError(countLoc)
             << "num_microbatches (" << count
             << ") > 1 returns only the loss and gradients, not '" << output
             << "'";
    Output entry;
    entry.isLoss = output == "loss";
    entry.perMicrobatch = value;
    if (auto split = value.getDefiningOp<SplitOp>();
        split && split.isView() && split.getX().getDefiningOp<AllReduceOp>()) {
      entry.split = split;
      entry.piece = cast<OpResult>(value).getResultNumber();
      entry.perMicrobatch = split.getX();
    }
    // A sum over ranks commutes with the sum over microbatches: run it
    // once, on the accumulated value (DDP's reduction once per step).
    if (auto sync = entry.perMicrobatch.getDefiningOp<AllReduceOp>();
        sync && sync.getReduce() == "sum" && sync.getX().hasOneUse() &&
        sync.getY().hasOneUse()) {
      entry.sync = sync;
      entry.perMicrobatch = sync.getX();
      hoisted.insert(sync);
      if (entry.split)
        hoisted.insert(entry.split);
    } else {
      entry.split = nullptr;
      entry.perMicrobatch = value;
    }
    outputs.push_back(entry);
  }
  return success();
}

bool Accumulator::countsStep(Operation *op) const {
  auto countOp = dyn_cast<ValidCountOp>(op);
  return countOp && llvm::is_contained(inputs, countOp.getLabels());
}

LogicalResult Accumulator::normaliseOverStep() {
  Block &body = func.getBody().front();
  // A program whose labels are split over ranks already weighs each rank's
  // mean by its count over a valid_count of the labels input (the
  // cross-entropy rule); that count, hoisted, becomes the step's.
  if (llvm::any_of(body.getOps<ValidCountOp>(),
                   [&](ValidCountOp op) { return countsStep(op); }))
    return success();
  Value labels;
  for (BlockArgument input : inputs)
    if (getArgString(func, input.getArgNumber(), kInputAttr) == "labels")
      labels = input;
  Output *loss = llvm::find_if(outputs, [](const Output &output) {
    return output.isLoss && !output.isInvariant;
  });
  if (loss == outputs.end())
    return success();
  if (!labels || loss->sync)
    return emitError(countLoc)
           << "num_microbatches (" << count
           << ") > 1 needs the labels' valid count to weigh the loss";
  // Whole labels here: the microbatch's mean is its share of the step's
  // mean, and the gradient of each microbatch starts from that weight.
  builder.setInsertionPointToStart(&body);
  Value total = builder.create<ValidCountOp>(
      loss->perMicrobatch.getLoc(),
      RankedTensorType::get({}, builder.getF32Type()), labels,
      builder.getI64IntegerAttr(validVocab));
  auto weigh = [&](Value value) -> Value {
    return builder.create<CountScaleOp>(value.getLoc(), value.getType(), value,
                                        labels, total,
                                        builder.getI64IntegerAttr(validVocab));
  };
  for (auto fill : llvm::make_early_inc_range(body.getOps<FillOp>()))
    if (fill.getValue().convertToDouble() == 1.0 &&
        cast<RankedTensorType>(fill.getType()).getRank() == 0) {
      builder.setInsertionPointAfter(fill);
      Value seed = weigh(fill);
      fill.getOut().replaceAllUsesExcept(seed, seed.getDefiningOp());
    }
  builder.setInsertionPointAfterValue(loss->perMicrobatch);
  loss->perMicrobatch = weigh(loss->perMicrobatch);
  return success();
}

void Accumulator::findVariantOps() {
  variant.clear();
  llvm::DenseSet<Value> tokenDependent(inputs.begin(), inputs.end());
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (hoisted.contains(&op) || countsStep(&op))
      continue;
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return tokenDependent.contains(v); })) {
      variant.insert(&op);
      tokenDependent.insert(op.getResults().begin(), op.getResults().end());
    }
  }
  for (Output &output : outputs)
    output.isInvariant = !tokenDependent.contains(output.perMicrobatch);
}

FailureOr<SmallVector<SmallVector<Value>>> Accumulator::splitInputs() {
  // The program was built for one microbatch: its inputs take the whole
  // step's batch, M microbatches side by side along dim 1, and each
  // microbatch's copy of the program reads its slice.
  SmallVector<SmallVector<Value>> pieces(count);
  for (BlockArgument input : inputs) {
    auto type = cast<RankedTensorType>(input.getType());
    if (type.getRank() != 2)
      return emitError(input.getLoc())
             << "a token input must be [S, B], got " << type;
    SmallVector<int64_t> shape(type.getShape());
    shape[1] *= count;
    input.setType(RankedTensorType::get(shape, type.getElementType(),
                                        type.getEncoding()));
    SmallVector<Type> types(count, type);
    auto split = builder.create<SplitOp>(input.getLoc(), types, input,
                                         builder.getI64IntegerAttr(1));
    for (int64_t m = 0; m < count; ++m)
      pieces[m].push_back(split.getResult(m));
  }
  return pieces;
}

LogicalResult Accumulator::run() {
  Block &body = func.getBody().front();
  for (BlockArgument arg : func.getArguments())
    if (!getArgString(func, arg.getArgNumber(), kInputAttr).empty())
      inputs.push_back(arg);
  if (inputs.empty())
    return success(); // nothing reads a batch: every microbatch is alike
  if (failed(collectOutputs()))
    return failure();
  findVariantOps();
  if (failed(normaliseOverStep()))
    return failure();
  findVariantOps();
  Operation *returnOp = body.getTerminator();
  builder.setInsertionPoint(returnOp);
  FailureOr<SmallVector<SmallVector<Value>>> pieces = splitInputs();
  if (failed(pieces))
    return failure();
  SmallVector<Operation *> perMicrobatch;
  for (Operation &op : body.without_terminator())
    if (variant.contains(&op))
      perMicrobatch.push_back(&op);
  // Split pieces of one fused gradient share what is summed.
  llvm::SetVector<Value> summed;
  for (const Output &output : outputs)
    if (!output.isInvariant)
      summed.insert(output.perMicrobatch);
  llvm::DenseMap<Value, Value> sums;
  // A pipeline schedule orders the copies by microbatch (PipelineStages.h).
  bool staged = llvm::any_of(
      perMicrobatch, [](Operation *op) { return op->hasAttr(kForwardAttr); });
  for (int64_t m = 0; m < count; ++m) {
    IRMapping mapping;
    for (auto [input, piece] : llvm::zip(inputs, (*pieces)[m]))
      mapping.map(input, piece);
    for (Operation *op : perMicrobatch) {
      Operation *copy = builder.clone(*op, mapping);
      if (staged)
        copy->setAttr(kMicrobatchAttr, builder.getI64IntegerAttr(m));
    }
    for (Value value : summed) {
      Value piece = mapping.lookup(value);
      Value &sum = sums[value];
      if (m == 0) {
        sum = piece;
        continue;
      }
      // Right after the piece is final: it dies at once, and in the last
      // microbatch the sum is ready for its sync (a dp bucket) while the
      // rest of the backward runs.
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointAfterValue(piece);
      sum = builder.create<AddOp>(piece.getLoc(), piece.getType(), sum, piece);
    }
  }
  SmallVector<Value> results;
  llvm::DenseMap<Operation *, Value> synced;
  llvm::DenseMap<Operation *, Operation *> resplit;
  for (Output &output : outputs) {
    Value result =
        output.isInvariant ? output.perMicrobatch : sums[output.perMicrobatch];
    if (output.sync) {
      Value &once = synced[output.sync];
      if (!once)
        once = builder.create<AllReduceOp>(
            output.sync.getLoc(), output.sync.getY().getType(), result,
            output.sync.getAxisAttr(), output.sync.getReduceAttr());
      result = once;
    }
    if (output.split) {
      Operation *&once = resplit[output.split];
      if (!once)
        once = builder.create<SplitOp>(output.split.getLoc(),
                                       output.split.getResultTypes(), result,
                                       output.split.getDimAttr());
      result = once->getResult(output.piece);
    }
    results.push_back(result);
  }
  returnOp->setOperands(results);
  func.setType(builder.getFunctionType(body.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
  // Users first: the hoisted syncs read the originals' results.
  for (Operation *op : llvm::reverse(hoisted))
    op->erase();
  for (Operation *op : llvm::reverse(perMicrobatch))
    op->erase();
  return success();
}

struct MicrobatchPass : sharc::impl::MicrobatchBase<MicrobatchPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ModelSizes sizes(module);
    int64_t count = sizes.get("num_microbatches");
    if (count <= 1)
      return;
    for (auto func : module.getOps<func::FuncOp>()) {
      bool isTrainStep = false;
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        isTrainStep |= getResultString(func, i, kOutputAttr) == "loss";
      if (isTrainStep &&
          failed(Accumulator(func, count, sizes.loc("num_microbatches"),
                             sizes.get("vocab_size"))
                     .run()))
        return signalPassFailure();
    }
  }
};

} // namespace
