//===- PlanRecords.cpp - plan records of IR values and ops ----------------===//

#include "planner/PlanRecords.h"
#include "ir/ArgumentRoles.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace sharc {

FailureOr<DType> dtypeOf(Type type, Location loc) {
  Type element = cast<RankedTensorType>(type).getElementType();
  if (element.isF32())
    return DType::F32;
  if (element.isBF16())
    return DType::BF16;
  if (element.isInteger(32))
    return DType::I32;
  return emitError(loc) << "no plan element type for " << type;
}

/// The plan's sharding and global shape of a value with local `type`.
std::pair<plan::Sharding, std::vector<int64_t>>
globalLayout(Type type, MeshAttr mesh, StringRef balancedAxis) {
  auto tensor = cast<RankedTensorType>(type);
  std::vector<int64_t> shape(tensor.getShape().begin(),
                             tensor.getShape().end());
  plan::Sharding sharding;
  PlacementAttr placement = getPlacement(type);
  for (auto [axis, size] : llvm::zip(mesh.getAxes(), mesh.getSizes())) {
    int64_t code = placement.getAxis(axis);
    if (code >= 0 && size > 1) {
      sharding.dimOfAxis[axis.getValue().str()] = code;
      shape[code] *= size;
      if (code == 0 && axis.getValue() == balancedAxis)
        sharding.balancedAxis = balancedAxis.str();
    }
  }
  // Where the placement nests a dimension's axes unlike the mesh's order
  // (ZeRO's dp block inside a tp shard), the plan says so.
  for (int64_t dim = 0; dim < tensor.getRank(); ++dim) {
    SmallVector<StringRef> stated = placement.splitOrder(dim);
    SmallVector<StringRef> meshOrder;
    for (StringAttr axis : mesh.getAxes())
      if (llvm::is_contained(stated, axis.getValue()))
        meshOrder.push_back(axis.getValue());
    if (stated != meshOrder)
      for (StringRef axis : stated)
        sharding.order.push_back(axis.str());
  }
  return {sharding, shape};
}

std::string locationString(Location loc) {
  if (auto fileLoc = dyn_cast<FileLineColLoc>(loc))
    return (fileLoc.getFilename().str() + ":" +
            std::to_string(fileLoc.getLine()) + ":" +
            std::to_string(fileLoc.getColumn()));
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string text = locationString(inner); !text.empty())
        return text;
  if (auto named = dyn_cast<NameLoc>(loc))
    return locationString(named.getChildLoc());
  return "";
}

FailureOr<std::vector<int64_t>> pipelineStages(ArrayRef<Operation *> ops,
                                               MeshAttr mesh) {
  std::vector<int64_t> stageOf;
  int64_t numStages = mesh.getSize(plan::kStageAxis);
  if (numStages <= 1)
    return stageOf;
  for (Operation *op : ops) {
    auto stage = op->getAttrOfType<IntegerAttr>(kStageAttr);
    if (!stage)
      return op->emitOpError("has no pipeline stage on a mesh with ")
             << plan::kStageAxis << " (" << numStages << ")";
    stageOf.push_back(stage.getInt());
  }
  return stageOf;
}

/// The pipeline stage that holds `value`: its producer's, or for an
/// argument the one stage that reads it; -1 when every stage does.
int64_t stageOfValue(Value value) {
  if (Operation *producer = value.getDefiningOp()) {
    auto stage = producer->getAttrOfType<IntegerAttr>(kStageAttr);
    return stage ? stage.getInt() : -1;
  }
  int64_t found = -1;
  for (Operation *user : value.getUsers()) {
    auto stage = user->getAttrOfType<IntegerAttr>(kStageAttr);
    if (!stage || (found >= 0 && found != stage.getInt()))
      return -1;
    found = stage.getInt();
  }
  return found;
}

/// Converts the op's attributes to plan attributes, adding what a kernel
/// needs that the IR keeps in types (rms_norm's group size) and flags
/// (ring_shift's wrap).
std::map<std::string, plan::AttrValue> instructionAttrs(Operation *op) {
  std::map<std::string, plan::AttrValue> attrs;
  for (NamedAttribute attr : op->getAttrs()) {
    std::string key = attr.getName().str();
    if (auto value = dyn_cast<IntegerAttr>(attr.getValue()))
      attrs[key] = value.getValue().getSExtValue();
    else if (auto value = dyn_cast<FloatAttr>(attr.getValue()))
      attrs[key] = value.getValueAsDouble();
    else if (auto value = dyn_cast<StringAttr>(attr.getValue()))
      attrs[key] = value.getValue().str();
    else if (auto value = dyn_cast<DenseI64ArrayAttr>(attr.getValue()))
      attrs[key] = std::vector<int64_t>(value.asArrayRef());
  }
  if (isa<RmsNormOp, RmsNormGradOp, RmsNormGradAddOp>(op))
    attrs["group_size"] =
        cast<RankedTensorType>(op->getOperand(1).getType()).getShape()[0];
  // A unit attribute is a flag the plan writes as 1 (absent: 0).
  if (auto shift = dyn_cast<RingShiftOp>(op); shift && shift.getWrap())
    attrs["wrap"] = int64_t(1);
  return attrs;
}

/// Where a bucket's slab goes, or nothing when the bucket keeps separate
/// operands and results. In place, operand i and result i are one buffer,
/// the slot that the gradient's producer writes: so the bucket must be that
/// value's only reader, of one element type (one collective call), and no
/// result may be returned twice. A plan that keeps its gradients returns
/// them: then the slab goes to the output region, with the members that
/// feed another collective first (tensor-parallel norms).
std::optional<plan::Region>
slabRegion(AllReduceCoalescedOp bucket, Operation *returnOp,
           const llvm::DenseSet<Value> &outputBases) {
  auto elementOf = [](Value value) {
    return cast<RankedTensorType>(value.getType()).getElementType();
  };
  Type element = elementOf(bucket.getXs().front());
  int64_t numReturned = 0;
  for (auto [x, y] : llvm::zip(bucket.getXs(), bucket.getYs())) {
    // replicate and adamw results share another value's buffer.
    Operation *producer = x.getDefiningOp();
    if (!producer || isa<ReplicateOp, AdamWOp>(producer) || !x.hasOneUse() ||
        elementOf(x) != element)
      return std::nullopt;
    int64_t returns = llvm::count_if(y.getUses(),
                                     [&](OpOperand &use) {
                                       return use.getOwner() == returnOp;
                                     }) +
                      outputBases.count(y);
    if (returns > 1)
      return std::nullopt;
    numReturned += returns;
  }
  return numReturned > 0 ? plan::Region::Output : plan::Region::Gradient;
}

/// A readable name for a bucket member: its step output, else the
/// parameter its update reads it for.
std::string memberName(func::FuncOp func, Value result, Operation *returnOp,
                       const std::string &fallback) {
  for (OpOperand &use : result.getUses()) {
    if (use.getOwner() == returnOp)
      return getResultString(func, use.getOperandNumber(), kOutputAttr).str();
    if (auto adamw = dyn_cast<AdamWOp>(use.getOwner()))
      if (auto param = dyn_cast<BlockArgument>(adamw.getParam()))
        return "grad:" +
               getArgString(func, param.getArgNumber(), kParamAttr).str();
  }
  return fallback;
}

/// The parameter gradients: what each adamw reads, and the partial
/// gradients its synchronisation (all_reduce, a dp bucket, or ZeRO-1's
/// reduce_scatter) or accumulation (a tied table's two uses) is made from.
llvm::DenseSet<Value> parameterGradients(ArrayRef<Operation *> ops) {
  llvm::DenseSet<Value> gradients;
  SmallVector<Value> work;
  for (Operation *op : ops)
    if (auto adamw = dyn_cast<AdamWOp>(op))
      work.push_back(adamw.getGrad());
  while (!work.empty()) {
    Value grad = work.pop_back_val();
    if (!gradients.insert(grad).second)
      continue;
    Operation *producer = grad.getDefiningOp();
    if (isa_and_nonnull<AllReduceOp, ReduceScatterOp, AddOp>(producer))
      llvm::append_range(work, producer->getOperands());
    else if (auto bucket = dyn_cast_or_null<AllReduceCoalescedOp>(producer))
      work.push_back(bucket.getXs()[cast<OpResult>(grad).getResultNumber()]);
    else if (auto blocks = dyn_cast_or_null<ReduceScatterCoalescedOp>(producer))
      work.push_back(blocks.getXs()[cast<OpResult>(grad).getResultNumber()]);
    else if (auto split = dyn_cast_or_null<SplitOp>(producer))
      work.push_back(split.getX());
  }
  return gradients;
}

/// A concat or split along the last dimension: one column_insert or
/// column_slice per piece, `offset` columns into the whole.
std::vector<plan::Instruction>
columnCopies(Operation *op, const plan::Instruction &instr,
             const llvm::DenseMap<Value, int64_t> &bufferOf) {
  bool isConcat = isa<ConcatOp>(op);
  ValueRange pieces =
      isConcat ? ValueRange(op->getOperands()) : ValueRange(op->getResults());
  Value whole = isConcat ? op->getResult(0) : op->getOperand(0);
  std::vector<plan::Instruction> copies;
  int64_t offset = 0;
  for (Value piece : pieces) {
    plan::Instruction copy = instr;
    copy.op = isConcat ? "column_insert" : "column_slice";
    copy.operands = {bufferOf.lookup(isConcat ? piece : whole)};
    copy.results = {bufferOf.lookup(isConcat ? whole : piece)};
    copy.attrs = {{"offset", offset}};
    copy.waits.clear();
    copy.signals.clear();
    copies.push_back(std::move(copy));
    offset += cast<RankedTensorType>(piece.getType()).getShape().back();
  }
  copies.front().waits = instr.waits;
  copies.back().signals = instr.signals;
  return copies;
}

} // namespace sharc
