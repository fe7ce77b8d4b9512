//===- PlanEmitter.cpp - from a train-step module to a plan ---------------===//

#include "planner/PlanEmitter.h"
#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "planner/BufferAssignment.h"
#include "planner/ListSchedule.h"
#include "planner/PlanRecords.h"
#include "planner/Schedule.h"
#include "planner/ScheduleBuilder.h"
#include "planner/StageSchedule.h"

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

class Emitter {
public:
  Emitter(func::FuncOp func, const EmitOptions &options)
      : func(func), options(options) {}
  FailureOr<plan::Plan> emit();

private:
  FailureOr<int64_t> addBuffer(Value value, plan::Region region,
                               std::string name);
  LogicalResult collectOps();
  LogicalResult assignArguments();
  LogicalResult createSlabs();
  LogicalResult assignResults();
  LogicalResult createActivationBuffers();
  LogicalResult createFusedWeight(ConcatOp concat);
  void createSplitViews();
  LogicalResult planSchedule();
  void emitInstructions();

  func::FuncOp func;
  const EmitOptions &options;
  plan::Plan result;
  llvm::DenseMap<Value, int64_t> bufferOf;
  SmallVector<Operation *> ops; ///< program order
  std::vector<int64_t> activationIds;
  std::map<plan::Region, int64_t> regionEnd;
  /// Pipeline stages: each (region, stage)'s end, and the end of the
  /// buffers every stage holds, which no stage's may overlap.
  std::map<std::pair<plan::Region, int64_t>, int64_t> stageEnd;
  std::map<plan::Region, int64_t> sharedEnd;
  /// In-place buckets: the coalesced op -> its slab buffer.
  llvm::DenseMap<Operation *, int64_t> slabOf;
  /// Per view, its slab and its offset from the slab's start.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> views;
  llvm::DenseSet<Value> slabOutputs;  ///< step outputs that are views
  llvm::DenseSet<int64_t> arenaSlabs; ///< slabs in the gradient arena
  /// Fused weights (sharc-fuse-projections): the parameters they join.
  llvm::DenseMap<Value, ConcatOp> fusedWeightOf;
  /// Values split into views whose pieces are step outputs: the output
  /// region holds them, and the outputs table gets the views afterwards.
  llvm::DenseSet<Value> outputBases;
  std::vector<std::pair<size_t, Value>> viewOutputs;
  MeshAttr mesh;
  /// The module's sharc.balanced_axis ("" when the sequence splits are
  /// contiguous).
  StringRef balancedAxis;

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
  // A pipeline stage's parameters and optimizer state sit in that stage's
  // stretch of the region: the stages' stretches overlap, as each rank
  // holds one stage's (docs/plan-format.md, "Pipeline stages").
  int64_t stage =
      region == plan::Region::Param || region == plan::Region::OptState
          ? stageOfValue(value)
          : -1;
  if (stage >= 0) {
    int64_t &end = stageEnd[{region, stage}];
    buffer.offset = std::max(end, sharedEnd[region]);
    end = alignTo(buffer.offset + buffer.numBytes, options.alignment);
    regionEnd[region] = std::max(regionEnd[region], end);
  } else if (region != plan::Region::Activation &&
             region != plan::Region::Gradient) {
    buffer.offset = regionEnd[region];
    regionEnd[region] =
        alignTo(buffer.offset + buffer.numBytes, options.alignment);
    sharedEnd[region] = regionEnd[region];
  }
  result.buffers.push_back(buffer);
  bufferOf[value] = buffer.id;
  return buffer.id;
}

LogicalResult Emitter::assignArguments() {
  llvm::StringMap<size_t> paramIndex;
  for (BlockArgument arg : func.getArguments()) {
    if (failed(checkMeshNesting(arg)))
      return failure();
    unsigned index = arg.getArgNumber();
    StringRef param = getArgString(func, index, kParamAttr);
    StringRef input = getArgString(func, index, kInputAttr);
    StringRef state = getArgString(func, index, kStateAttr);
    if (!param.empty()) {
      if (auto concat = fusedWeightOf.lookup(arg))
        if (failed(createFusedWeight(concat)))
          return failure();
      FailureOr<int64_t> id =
          bufferOf.count(arg)
              ? FailureOr<int64_t>(bufferOf.lookup(arg))
              : addBuffer(arg, plan::Region::Param, param.str());
      if (failed(id))
        return failure();
      plan::ParamEntry entry;
      entry.name = param.str();
      entry.buffer = *id;
      std::tie(entry.sharding, entry.globalShape) =
          globalLayout(arg.getType(), mesh, balancedAxis);
      entry.sharding.stage = stageOfValue(arg);
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
          globalLayout(arg.getType(), mesh, balancedAxis);
      result.inputs.push_back({input.str(), *id, globalShape, sharding});
    } else if (!state.empty()) {
      FailureOr<int64_t> id =
          addBuffer(arg, plan::Region::OptState, state.str());
      if (failed(id))
        return failure();
      // "m:<param>", "v:<param>", "master:<param>" (bf16-mixed).
      auto it = paramIndex.find(state.substr(state.find(':') + 1));
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
    if (failed(checkMeshNesting(value)))
      return failure();
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
        globalLayout(value.getType(), mesh, balancedAxis);
    globalSharding.stage = stageOfValue(value);
    if (auto split = value.getDefiningOp<SplitOp>(); split && split.isView()) {
      viewOutputs.emplace_back(result.outputs.size(), value);
      result.outputs.push_back({output, -1, globalShape, globalSharding});
      continue;
    }
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
    std::optional<plan::Region> region =
        slabRegion(bucket, returnOp, outputBases);
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
      plan::Region region = outputBases.contains(value) ? plan::Region::Output
                            : gradients.contains(value)
                                ? plan::Region::Gradient
                                : plan::Region::Activation;
      FailureOr<int64_t> id = addBuffer(value, region, name);
      if (failed(id))
        return failure();
      if (region != plan::Region::Output)
        activationIds.push_back(*id);
    }
  }
  createSplitViews();
  return success();
}

/// Makes a fused weight (a dim-0 concat of parameters) one buffer of the
/// parameter region with each parameter a view of its rows, so that the
/// parameter table, checkpoints and updates keep one entry per parameter.
LogicalResult Emitter::createFusedWeight(ConcatOp concat) {
  if (bufferOf.count(concat.getY()))
    return success();
  std::string name = "fused:";
  for (auto [index, x] : llvm::enumerate(concat.getXs()))
    name +=
        (index ? "," : "") +
        getArgString(func, cast<BlockArgument>(x).getArgNumber(), kParamAttr)
            .str();
  FailureOr<int64_t> fused =
      addBuffer(concat.getY(), plan::Region::Param, name);
  if (failed(fused))
    return failure();
  int64_t offset = result.buffers[*fused].offset;
  for (Value x : concat.getXs()) {
    plan::Buffer view = result.buffers[*fused];
    auto shape = cast<RankedTensorType>(x.getType()).getShape();
    view.id = static_cast<int64_t>(result.buffers.size());
    view.name =
        getArgString(func, cast<BlockArgument>(x).getArgNumber(), kParamAttr)
            .str();
    view.shape.assign(shape.begin(), shape.end());
    view.numBytes = cast<RankedTensorType>(x.getType()).getNumElements() *
                    dtypeSize(view.dtype);
    view.offset = offset;
    view.viewOf = *fused;
    offset += view.numBytes;
    result.buffers.push_back(view);
    bufferOf[x] = view.id;
  }
  return success();
}

/// Gives each piece of a dim-0 split (a fused weight gradient) a view of
/// its rows of the operand's buffer; a piece of a slab member views the
/// slab. Step outputs among the pieces then enter the outputs table.
void Emitter::createSplitViews() {
  Operation *returnOp = func.getBody().back().getTerminator();
  llvm::DenseMap<int64_t, int64_t> offsetInBase;
  for (auto [view, base, offset] : views)
    offsetInBase[view] = offset;
  for (Operation &op : func.getBody().front().without_terminator()) {
    auto split = dyn_cast<SplitOp>(op);
    if (!split || !split.isView())
      continue;
    int64_t whole = bufferOf.lookup(split.getX());
    int64_t base = result.buffers[whole].viewOf >= 0
                       ? result.buffers[whole].viewOf
                       : whole;
    int64_t offset = offsetInBase.lookup(whole);
    for (auto [index, y] : llvm::enumerate(split.getYs())) {
      plan::Buffer view = result.buffers[whole];
      auto shape = cast<RankedTensorType>(y.getType()).getShape();
      view.id = static_cast<int64_t>(result.buffers.size());
      view.name = memberName(func, y, returnOp,
                             view.name + "[" + std::to_string(index) + "]");
      view.region = result.buffers[base].region;
      view.shape.assign(shape.begin(), shape.end());
      view.numBytes = cast<RankedTensorType>(y.getType()).getNumElements() *
                      dtypeSize(view.dtype);
      view.viewOf = base;
      result.buffers.push_back(view);
      views.emplace_back(view.id, base, offset);
      bufferOf[y] = view.id;
      offset += view.numBytes;
    }
  }
  for (auto [index, value] : viewOutputs)
    result.outputs[index].buffer = bufferOf.lookup(value);
}

/// Orders the ops (deferring weight gradients past the next collective),
/// puts collectives on their own stream with events, and places the
/// activation buffers with lifetimes that respect both streams.
LogicalResult Emitter::planSchedule() {
  schedule.graph = buildScheduleGraph(ops, bufferOf, mesh);
  for (auto [index, op] : llvm::enumerate(ops))
    if (slabOf.count(op))
      schedule.graph[index].op = "all_reduce";
  bool async = options.asyncCollectives &&
               llvm::any_of(schedule.graph, [](const ScheduleNode &node) {
                 return node.kind == NodeKind::Collective;
               });
  PlanOne planOne = [&](const ScheduleGraph &graph, std::vector<int64_t> &order,
                        StreamAssignment &streams) {
    if (async && options.scheduleMachine) {
      std::vector<double> seconds;
      for (const ScheduleNode &node : graph)
        seconds.push_back(nodeSeconds(*options.scheduleMachine, node));
      order = latencyHidingOrder(graph, seconds);
      streams = assignStreams(graph, order);
    } else if (async) {
      order = scheduleOrder(graph);
      streams = assignStreams(graph, order);
    } else {
      size_t n = graph.size();
      order.resize(n);
      for (size_t i = 0; i < n; ++i)
        order[i] = static_cast<int64_t>(i);
      streams.stream.assign(n, kComputeStream);
      streams.waits.assign(n, {});
      streams.signals.assign(n, {});
      streams.position = order;
    }
  };
  // Pipeline stages: each planned on its own (StageSchedule.h).
  FailureOr<std::vector<int64_t>> stageOf = pipelineStages(ops, mesh);
  if (failed(stageOf))
    return failure();
  std::vector<StagePlan> stages =
      planByStage(schedule.graph, *stageOf, mesh.getSize(plan::kStageAxis),
                  planOne, schedule.order, schedule.streams);

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
    if (stages.empty())
      extendLifetimes(touches, schedule.streams, requests);
    else
      extendStageLifetimes(touches, stages, requests);
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
    BufferAssignment ownSizes = assignBuffers(inRegion, options.alignment);
    for (BufferRequest &request : inRegion)
      if (arenaSlabs.contains(request.id))
        request.numBytes = slotBytes;
    BufferAssignment assignment = assignBuffers(inRegion, options.alignment);
    // Slabs that never take turns (gradient clipping keeps every gradient
    // until the norm is known) gain nothing from equal slots.
    if (ownSizes.peakBytes < assignment.peakBytes)
      assignment = std::move(ownSizes);
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
    // The plan names the bf16-mixed update apart: its operands differ.
    if (auto adamw = dyn_cast<AdamWOp>(op); adamw && adamw.getMaster())
      instr.op = "adamw_master";
    for (Value operand : op->getOperands())
      instr.operands.push_back(bufferOf.lookup(operand));
    // adamw updates its operands in place; its results name no new bytes.
    if (!isa<AdamWOp>(op))
      for (Value value : op->getResults())
        instr.results.push_back(bufferOf.lookup(value));
    instr.attrs = instructionAttrs(op);
    if (auto stage = op->getAttrOfType<IntegerAttr>(kStageAttr)) {
      instr.stage = stage.getInt();
      instr.attrs.erase(kStageAttr.str());
    }
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
    if (isa<ConcatOp, SplitOp>(op)) {
      for (plan::Instruction &copy : columnCopies(op, instr, bufferOf))
        result.instructions.push_back(std::move(copy));
      continue;
    }
    result.instructions.push_back(std::move(instr));
  }
}

/// The ops that become instructions, in program order. Dim-0 concats and
/// splits (sharc-fuse-projections) are views and become none; concats and
/// splits along the last dimension become column copies.
LogicalResult Emitter::collectOps() {
  Operation *returnOp = func.getBody().back().getTerminator();
  for (Operation &op : func.getBody().front().without_terminator()) {
    auto concat = dyn_cast<ConcatOp>(op);
    auto split = dyn_cast<SplitOp>(op);
    if (concat || split) {
      Value whole = concat ? concat.getY() : split.getX();
      auto dim =
          static_cast<int64_t>(concat ? concat.getDim() : split.getDim());
      if (dim != 0 &&
          dim + 1 != cast<RankedTensorType>(whole.getType()).getRank())
        return op.emitError("the planner places a concat or split along dim 0 "
                            "or the last dimension only");
    }
    if (concat && concat.isView()) {
      for (Value x : concat.getXs()) {
        auto arg = dyn_cast<BlockArgument>(x);
        if (!arg ||
            getArgString(func, arg.getArgNumber(), kParamAttr).empty() ||
            !fusedWeightOf.try_emplace(x, concat).second)
          return op.emitError("a dim-0 concat must join parameters, each "
                              "into one fused weight");
      }
      continue;
    }
    if (split && split.isView()) {
      if (llvm::any_of(split.getYs(), [&](Value y) {
            return llvm::is_contained(y.getUsers(), returnOp);
          }))
        outputBases.insert(split.getX());
      continue;
    }
    ops.push_back(&op);
  }
  return success();
}

FailureOr<plan::Plan> Emitter::emit() {
  auto module = func->getParentOfType<ModuleOp>();
  mesh = getMesh(module);
  if (auto axis = module->getAttrOfType<StringAttr>(kBalancedAxisAttr))
    balancedAxis = axis.getValue();
  if (failed(collectOps()))
    return failure();
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
  result.mesh.clear();
  for (auto [axis, size] : llvm::zip(mesh.getAxes(), mesh.getSizes()))
    result.mesh.push_back({axis.getValue().str(), size});
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
