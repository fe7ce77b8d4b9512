//===- PlanEmitter.cpp - from a train-step module to a plan ---------------===//

#include "planner/PlanEmitter.h"
#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "planner/BufferAssignment.h"
#include "planner/Schedule.h"
#include "planner/ScheduleBuilder.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace sharc;

namespace {

int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

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
globalLayout(Type type, int64_t dpSize, int64_t tpSize) {
  auto tensor = cast<RankedTensorType>(type);
  std::vector<int64_t> shape(tensor.getShape().begin(),
                             tensor.getShape().end());
  plan::Sharding sharding;
  PlacementAttr placement = getPlacement(type);
  for (auto [axis, size] :
       {std::pair<StringRef, int64_t>{"dp", dpSize}, {"tp", tpSize}}) {
    int64_t code = placement.getAxis(axis);
    if (code >= 0 && size > 1) {
      sharding.dimOfAxis[axis.str()] = code;
      shape[code] *= size;
    }
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

/// Converts the op's attributes to plan attributes, adding what a kernel
/// needs that the IR keeps in types (rms_norm's group size).
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
  }
  if (isa<RmsNormOp, RmsNormGradOp>(op))
    attrs["group_size"] =
        cast<RankedTensorType>(op->getOperand(1).getType()).getShape()[0];
  return attrs;
}

class Emitter {
public:
  Emitter(func::FuncOp func, const EmitOptions &options)
      : func(func), options(options) {}
  FailureOr<plan::Plan> emit();

private:
  FailureOr<int64_t> addBuffer(Value value, plan::Region region,
                               std::string name);
  LogicalResult assignArguments();
  LogicalResult createSlabs();
  LogicalResult assignResults();
  LogicalResult createActivationBuffers();
  LogicalResult planSchedule();
  void emitInstructions();

  func::FuncOp func;
  const EmitOptions &options;
  plan::Plan result;
  llvm::DenseMap<Value, int64_t> bufferOf;
  SmallVector<Operation *> ops; ///< program order
  std::vector<int64_t> activationIds;
  std::map<plan::Region, int64_t> regionEnd;
  /// In-place buckets: the coalesced op -> its slab buffer.
  llvm::DenseMap<Operation *, int64_t> slabOf;
  /// Per view, its slab and its offset from the slab's start.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> views;
  llvm::DenseSet<Value> slabOutputs;  ///< step outputs that are views
  llvm::DenseSet<int64_t> arenaSlabs; ///< slabs in the gradient arena
  int64_t dpSize = 1, tpSize = 1;

public:
  PlanSchedule schedule;
};

FailureOr<int64_t> Emitter::addBuffer(Value value, plan::Region region,
                                      std::string name) {
  auto type = cast<RankedTensorType>(value.getType());
  FailureOr<DType> dtype = dtypeOf(type, value.getLoc());
  if (failed(dtype))
    return failure();
  plan::Buffer buffer;
  buffer.id = static_cast<int64_t>(result.buffers.size());
  buffer.name = std::move(name);
  buffer.region = region;
  buffer.dtype = *dtype;
  buffer.shape.assign(type.getShape().begin(), type.getShape().end());
  buffer.numBytes = type.getNumElements() * dtypeSize(*dtype);
  if (region != plan::Region::Activation && region != plan::Region::Gradient) {
    buffer.offset = regionEnd[region];
    regionEnd[region] =
        alignTo(buffer.offset + buffer.numBytes, options.alignment);
  }
  result.buffers.push_back(buffer);
  bufferOf[value] = buffer.id;
  return buffer.id;
}

LogicalResult Emitter::assignArguments() {
  llvm::StringMap<size_t> paramIndex;
  for (BlockArgument arg : func.getArguments()) {
    unsigned index = arg.getArgNumber();
    StringRef param = getArgString(func, index, kParamAttr);
    StringRef input = getArgString(func, index, kInputAttr);
    StringRef state = getArgString(func, index, kStateAttr);
    if (!param.empty()) {
      FailureOr<int64_t> id = addBuffer(arg, plan::Region::Param, param.str());
      if (failed(id))
        return failure();
      plan::ParamEntry entry;
      entry.name = param.str();
      entry.buffer = *id;
      std::tie(entry.sharding, entry.globalShape) =
          globalLayout(arg.getType(), dpSize, tpSize);
      entry.init.kind = getArgString(func, index, kInitAttr).str();
      if (auto std = func.getArgAttrOfType<FloatAttr>(index, kInitStdAttr))
        entry.init.stddev = std.getValueAsDouble();
      paramIndex[param] = result.params.size();
      result.params.push_back(entry);
    } else if (!input.empty()) {
      FailureOr<int64_t> id = addBuffer(arg, plan::Region::Input, input.str());
      if (failed(id))
        return failure();
      auto [sharding, globalShape] =
          globalLayout(arg.getType(), dpSize, tpSize);
      result.inputs.push_back({input.str(), *id, globalShape, sharding});
    } else if (!state.empty()) {
      FailureOr<int64_t> id =
          addBuffer(arg, plan::Region::OptState, state.str());
      if (failed(id))
        return failure();
      auto it = paramIndex.find(state.substr(2));
      if (it == paramIndex.end())
        return emitError(arg.getLoc())
               << "optimizer state '" << state << "' names no parameter";
      result.params[it->second].state.push_back(*id);
    } else {
      return emitError(arg.getLoc())
             << "argument " << index
             << " is neither a parameter, an input nor optimizer state";
    }
  }
  return success();
}

LogicalResult Emitter::assignResults() {
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
    std::string output = getResultString(func, index, kOutputAttr).str();
    if (auto updateOf =
            func.getResultAttrOfType<IntegerAttr>(index, kUpdateOfAttr)) {
      // An in-place update: the op writes the argument's own buffer.
      Value target = func.getArgument(updateOf.getInt());
      if (!isa_and_nonnull<AdamWOp>(value.getDefiningOp()))
        return emitError(value.getLoc())
               << "result '" << output << "' updates argument "
               << updateOf.getInt() << " but is not made by sharc.adamw";
      bufferOf[value] = bufferOf.lookup(target);
      continue;
    }
    auto [globalSharding, globalShape] =
        globalLayout(value.getType(), dpSize, tpSize);
    if (slabOutputs.erase(value)) {
      result.outputs.push_back(
          {output, bufferOf.lookup(value), globalShape, globalSharding});
      continue;
    }
    if (isa<BlockArgument>(value) || bufferOf.count(value))
      return emitError(value.getLoc())
             << "result '" << output
             << "' is an argument or another result; the plan cannot "
                "alias outputs";
    FailureOr<int64_t> id = addBuffer(value, plan::Region::Output, output);
    if (failed(id))
      return failure();
    result.outputs.push_back({output, *id, globalShape, globalSharding});
  }
  return success();
}

/// Where a bucket's slab goes, or nothing when the bucket keeps separate
/// operands and results. In place, operand i and result i are one buffer,
/// the slot that the gradient's producer writes: so the bucket must be that
/// value's only reader, of one element type (one collective call), and no
/// result may be returned twice. A plan that keeps its gradients returns
/// them: then the slab goes to the output region, with the members that
/// feed another collective first (tensor-parallel norms).
std::optional<plan::Region> slabRegion(AllReduceCoalescedOp bucket,
                                       Operation *returnOp) {
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
    int64_t returns = llvm::count_if(y.getUses(), [&](OpOperand &use) {
      return use.getOwner() == returnOp;
    });
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
/// gradients its synchronisation (all_reduce, a dp bucket) or accumulation
/// (a tied table's two uses) is made from.
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
    if (isa_and_nonnull<AllReduceOp, AddOp>(producer))
      llvm::append_range(work, producer->getOperands());
    else if (auto bucket = dyn_cast_or_null<AllReduceCoalescedOp>(producer))
      work.push_back(bucket.getXs()[cast<OpResult>(grad).getResultNumber()]);
  }
  return gradients;
}

/// Gives each in-place bucket one slab buffer and its members views into
/// it, side by side in operand order: the producers write their slots, one
/// all_reduce sums the slab in place, and the updates read the slots. A
/// gradient-region slab is placed with the arena; its views follow it.
LogicalResult Emitter::createSlabs() {
  Operation *returnOp = func.getBody().back().getTerminator();
  for (Operation *op : ops) {
    auto bucket = dyn_cast<AllReduceCoalescedOp>(op);
    if (!bucket)
      continue;
    std::optional<plan::Region> region = slabRegion(bucket, returnOp);
    if (!region)
      continue;
    auto type = cast<RankedTensorType>(bucket.getXs().front().getType());
    FailureOr<DType> dtype = dtypeOf(type, bucket.getLoc());
    if (failed(dtype))
      return failure();
    std::vector<int64_t> memberBytes;
    for (Value x : bucket.getXs())
      memberBytes.push_back(
          cast<RankedTensorType>(x.getType()).getNumElements() *
          dtypeSize(*dtype));
    SlabLayout layout = layoutSlab(memberBytes, options.alignment);

    plan::Buffer slab;
    slab.id = static_cast<int64_t>(result.buffers.size());
    slab.name = "bucket#" + std::to_string(slabOf.size());
    slab.region = *region;
    slab.dtype = *dtype;
    slab.numBytes = layout.numBytes;
    slab.shape = {layout.numBytes / dtypeSize(*dtype)};
    if (*region == plan::Region::Output) {
      slab.offset = regionEnd[*region];
      regionEnd[*region] =
          alignTo(slab.offset + slab.numBytes, options.alignment);
    } else {
      activationIds.push_back(slab.id);
      arenaSlabs.insert(slab.id);
    }
    result.buffers.push_back(slab);
    slabOf[op] = slab.id;

    for (auto [index, x, y] : llvm::enumerate(bucket.getXs(), bucket.getYs())) {
      plan::Buffer view;
      view.id = static_cast<int64_t>(result.buffers.size());
      view.name = memberName(func, y, returnOp,
                             slab.name + "[" + std::to_string(index) + "]");
      view.region = *region;
      view.dtype = *dtype;
      auto shape = cast<RankedTensorType>(x.getType()).getShape();
      view.shape.assign(shape.begin(), shape.end());
      view.numBytes = memberBytes[index];
      view.viewOf = slab.id;
      result.buffers.push_back(view);
      views.emplace_back(view.id, slab.id, layout.offsets[index]);
      bufferOf[x] = bufferOf[y] = view.id;
      if (llvm::is_contained(returnOp->getOperands(), y))
        slabOutputs.insert(y);
    }
  }
  return success();
}

/// Gives every value an op defines a buffer: outputs and in-place updates
/// have theirs already; Megatron's f (replicate) is the identity and shares
/// its operand's; parameter gradients go to the gradient region and all
/// else to the activation arena, both placed later.
LogicalResult Emitter::createActivationBuffers() {
  llvm::DenseSet<Value> gradients = parameterGradients(ops);
  for (Operation *op : ops) {
    if (auto replicate = dyn_cast<ReplicateOp>(op))
      if (!bufferOf.count(replicate.getY()) &&
          result.buffers[bufferOf.lookup(replicate.getX())].region ==
              plan::Region::Activation) {
        bufferOf[replicate.getY()] = bufferOf.lookup(replicate.getX());
        continue;
      }
    for (Value value : op->getResults()) {
      if (bufferOf.count(value))
        continue;
      std::string name = op->getName().stripDialect().str() + "#" +
                         std::to_string(activationIds.size());
      FailureOr<int64_t> id =
          addBuffer(value,
                    gradients.contains(value) ? plan::Region::Gradient
                                              : plan::Region::Activation,
                    name);
      if (failed(id))
        return failure();
      activationIds.push_back(*id);
    }
  }
  return success();
}

/// Orders the ops (deferring weight gradients past the next collective),
/// puts collectives on their own stream with events, and places the
/// activation buffers with lifetimes that respect both streams.
LogicalResult Emitter::planSchedule() {
  schedule.graph = buildScheduleGraph(ops, bufferOf, dpSize, tpSize);
  for (auto [index, op] : llvm::enumerate(ops))
    if (slabOf.count(op))
      schedule.graph[index].op = "all_reduce";
  bool async = options.asyncCollectives &&
               llvm::any_of(schedule.graph, [](const ScheduleNode &node) {
                 return node.kind == NodeKind::Collective;
               });
  if (async) {
    schedule.order = scheduleOrder(schedule.graph);
    schedule.streams = assignStreams(schedule.graph, schedule.order);
  } else {
    size_t n = schedule.graph.size();
    schedule.order.resize(n);
    for (size_t i = 0; i < n; ++i)
      schedule.order[i] = static_cast<int64_t>(i);
    schedule.streams.stream.assign(n, kComputeStream);
    schedule.streams.waits.assign(n, {});
    schedule.streams.signals.assign(n, {});
    schedule.streams.position = schedule.order;
  }

  // Each activation buffer lives from the first to the last position of a
  // node that touches it; a slab, from its first member's producer to its
  // last member's update, as a touch of a view is a touch of its slab.
  auto baseOf = [&](int64_t id) {
    int64_t base = result.buffers[id].viewOf;
    return base >= 0 ? base : id;
  };
  llvm::DenseMap<int64_t, size_t> requestOf;
  std::vector<BufferRequest> requests;
  for (int64_t id : activationIds) {
    requestOf[id] = requests.size();
    requests.push_back({id, result.buffers[id].numBytes, -1, -1});
  }
  for (size_t position = 0; position < schedule.order.size(); ++position) {
    const ScheduleNode &node = schedule.graph[schedule.order[position]];
    for (const auto *ids : {&node.reads, &node.writes})
      for (int64_t id : *ids)
        if (auto it = requestOf.find(baseOf(id)); it != requestOf.end()) {
          BufferRequest &request = requests[it->second];
          int64_t step = static_cast<int64_t>(position);
          request.firstStep =
              request.firstStep < 0 ? step : std::min(request.firstStep, step);
          request.lastStep = std::max(request.lastStep, step);
        }
  }
  if (async) {
    ScheduleGraph touches = schedule.graph;
    for (ScheduleNode &node : touches)
      for (auto *ids : {&node.reads, &node.writes})
        for (int64_t &id : *ids)
          id = baseOf(id);
    extendLifetimes(touches, schedule.streams, requests);
  }
  // Slabs take turns in equal slots: sized alike, best fit places them in
  // time order, which needs only as many slots as slabs live at once. With
  // their own sizes, a small slab in a large one's slot pushes the next
  // large one on top (minimind ddp: 70.5 MiB against 49.5 MiB live).
  int64_t slotBytes = 0;
  for (const BufferRequest &request : requests)
    if (arenaSlabs.contains(request.id))
      slotBytes = std::max(slotBytes, request.numBytes);
  // Activations and gradients each get an arena of their own.
  for (plan::Region region :
       {plan::Region::Activation, plan::Region::Gradient}) {
    std::vector<BufferRequest> inRegion;
    for (const BufferRequest &request : requests)
      if (result.buffers[request.id].region == region)
        inRegion.push_back(request);
    for (BufferRequest &request : inRegion)
      if (arenaSlabs.contains(request.id))
        request.numBytes = slotBytes;
    BufferAssignment assignment = assignBuffers(inRegion, options.alignment);
    for (auto [index, request] : llvm::enumerate(inRegion))
      result.buffers[request.id].offset = assignment.offsets[index];
    regionEnd[region] = assignment.peakBytes;
  }
  for (auto [view, slab, offset] : views)
    result.buffers[view].offset = result.buffers[slab].offset + offset;
  result.numStreams = async ? 2 : 1;
  result.numEvents = schedule.streams.numEvents;
  return success();
}

void Emitter::emitInstructions() {
  for (int64_t index : schedule.order) {
    Operation *op = ops[index];
    plan::Instruction instr;
    instr.op = op->getName().stripDialect().str();
    for (Value operand : op->getOperands())
      instr.operands.push_back(bufferOf.lookup(operand));
    // adamw updates its operands in place; its results name no new bytes.
    if (!isa<AdamWOp>(op))
      for (Value value : op->getResults())
        instr.results.push_back(bufferOf.lookup(value));
    instr.attrs = instructionAttrs(op);
    if (auto slab = slabOf.find(op); slab != slabOf.end()) {
      // The whole bucket in one call, in place.
      instr.op = "all_reduce";
      instr.operands = instr.results = {slab->second};
      instr.attrs["reduce"] = std::string("sum");
    }
    instr.loc = locationString(op->getLoc());
    instr.stream = schedule.streams.stream[index];
    instr.waits = schedule.streams.waits[index];
    instr.signals = schedule.streams.signals[index];
    result.instructions.push_back(std::move(instr));
  }
}

FailureOr<plan::Plan> Emitter::emit() {
  auto module = func->getParentOfType<ModuleOp>();
  if (auto mesh = module->getAttrOfType<DictionaryAttr>(kMeshAttr)) {
    if (auto dp = mesh.getAs<IntegerAttr>("dp"))
      dpSize = dp.getInt();
    if (auto tp = mesh.getAs<IntegerAttr>("tp"))
      tpSize = tp.getInt();
  }
  for (Operation &op : func.getBody().front().without_terminator())
    ops.push_back(&op);
  for (plan::Region region :
       {plan::Region::Param, plan::Region::OptState, plan::Region::Input,
        plan::Region::Output, plan::Region::Activation, plan::Region::Gradient})
    regionEnd[region] = 0;
  if (failed(assignArguments()) || failed(createSlabs()) ||
      failed(assignResults()) || failed(createActivationBuffers()) ||
      failed(planSchedule()))
    return failure();
  emitInstructions();

  if (auto model = module->getAttrOfType<DictionaryAttr>(kModelAttr)) {
    if (auto name = model.getAs<StringAttr>("name"))
      result.modelName = name.getValue().str();
    auto getInt = [&](StringRef key) -> int64_t {
      auto attr = model.getAs<IntegerAttr>(key);
      return attr ? attr.getInt() : 0;
    };
    result.seqLen = getInt("seq_len");
    result.batchSize = getInt("batch");
    result.vocabSize = getInt("vocab_size");
  }
  result.mode = options.mode;
  result.mesh = {{"dp", dpSize}, {"tp", tpSize}};
  result.computeDType = DType::F32;
  for (const plan::ParamEntry &param : result.params)
    result.computeDType = result.buffers[param.buffer].dtype;
  result.regionBytes = regionEnd;
  return result;
}

} // namespace

FailureOr<plan::Plan> sharc::emitPlan(ModuleOp module,
                                      const EmitOptions &options,
                                      PlanSchedule *schedule) {
  auto func = module.lookupSymbol<func::FuncOp>("train_step");
  if (!func)
    return module.emitError("no @train_step function to plan");
  Emitter emitter(func, options);
  FailureOr<plan::Plan> plan = emitter.emit();
  if (succeeded(plan) && schedule)
    *schedule = std::move(emitter.schedule);
  return plan;
}
