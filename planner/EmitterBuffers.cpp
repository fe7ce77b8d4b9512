//===- EmitterBuffers.cpp - the plan emitter: a buffer for every value ----===//
//
// Parameters, optimizer state and inputs get their own regions in argument
// order, step outputs the output region, and a data-parallel bucket one
// slab whose members are views. Every other value an op defines gets a
// buffer of the activation or gradient arena here and its offset later,
// from its lifetime (EmitterSchedule.cpp). Fused weights and dim-0 splits
// are views of one buffer's rows.
//
//===----------------------------------------------------------------------===//

#include "ir/ArgumentRoles.h"
#include "planner/BufferAssignment.h"
#include "planner/Emitter.h"
#include "planner/PlanRecords.h"
#include "planner/plan/DeviceWorkspace.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace sharc;

namespace {

int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace

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
    unsigned index = arg.getArgNumber();
    StringRef param = getArgString(func, index, kParamAttr);
    StringRef input = getArgString(func, index, kInputAttr);
    StringRef state = getArgString(func, index, kStateAttr);
    StringRef cache = getArgString(func, index, kCacheAttr);
    if (!cache.empty()) {
      // decode_attention writes the cache in place; no tensor file holds it.
      if (failed(addBuffer(arg, plan::Region::Cache, cache.str())))
        return failure();
    } else if (!param.empty()) {
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
      plan::ParamEntry &owner = result.params[it->second];
      owner.state.push_back(*id);
      // ZeRO-1 keeps the state of one block of the parameter a dp rank;
      // all of a parameter's state is split alike.
      plan::Sharding sharding =
          globalLayout(arg.getType(), mesh, balancedAxis).first;
      sharding.stage = owner.sharding.stage;
      std::optional<plan::Sharding> own;
      if (sharding.dimOfAxis != owner.sharding.dimOfAxis ||
          sharding.order != owner.sharding.order)
        own = sharding;
      if (owner.state.size() > 1 &&
          owner.stateLayout().dimOfAxis !=
              (own ? own->dimOfAxis : owner.sharding.dimOfAxis))
        return emitError(arg.getLoc())
               << "optimizer state '" << state
               << "' is split unlike the parameter's other state";
      owner.stateSharding = own;
    } else {
      return emitError(arg.getLoc())
             << "argument " << index
             << " is neither a parameter, an input, optimizer state nor a "
                "key/value cache";
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
      // An in-place update: the op writes the argument's own buffer. Under
      // ZeRO-1 (sharc-shard-optimizer) a parameter's update is the
      // all_gather of the updated blocks, which lands there.
      Value target = func.getArgument(updateOf.getInt());
      Operation *producer = value.getDefiningOp();
      Value block;
      // A decode step's key/value cache, written by its decode_attention.
      if (auto decode = dyn_cast_or_null<DecodeAttentionOp>(producer)) {
        unsigned slot = cast<OpResult>(value).getResultNumber() + 2;
        if (slot < 3 || decode->getOperand(slot) != target)
          return emitError(value.getLoc())
                 << "result '" << output << "' updates argument "
                 << updateOf.getInt()
                 << " but is not its decode_attention's update of it";
        bufferOf[value] = bufferOf.lookup(target);
        continue;
      }
      if (auto gather = dyn_cast_or_null<AllGatherOp>(producer))
        block = gather.getX();
      else if (auto bucket = dyn_cast_or_null<AllGatherCoalescedOp>(producer))
        block = bucket.getXs()[cast<OpResult>(value).getResultNumber()];
      if (!isa_and_nonnull<AdamWOp>(producer) &&
          !(block && block.getDefiningOp<AdamWOp>() &&
            value.getType() == target.getType()))
        return emitError(value.getLoc())
               << "result '" << output << "' updates argument "
               << updateOf.getInt()
               << " but is not made by sharc.adamw (or the all_gather of "
                  "its blocks)";
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
/// have theirs already (adamw's other results are its operands');
/// Megatron's f (replicate) is the identity and shares its operand's;
/// parameter gradients go to the gradient region and all else to the
/// activation arena, both placed later.
LogicalResult Emitter::createActivationBuffers() {
  llvm::DenseSet<Value> gradients = parameterGradients(ops);
  for (Operation *op : ops) {
    // adamw writes in place: a result no output claims (ZeRO-1's updated
    // block, which an all_gather reads) is its operand's bytes.
    if (auto adamw = dyn_cast<AdamWOp>(op)) {
      SmallVector<Value> updated{adamw.getParam(), adamw.getM(), adamw.getV(),
                                 adamw.getMaster()};
      for (auto [result, operand] : llvm::zip(adamw->getResults(), updated))
        if (!bufferOf.count(result))
          bufferOf[result] = bufferOf.lookup(operand);
      continue;
    }
    // decode_attention writes its caches in place: a prefill's updates,
    // which no output claims, are the caches' bytes too.
    if (auto decode = dyn_cast<DecodeAttentionOp>(op))
      for (auto [result, cache] :
           {std::pair{decode.getNewKCache(), decode.getKCache()},
            {decode.getNewVCache(), decode.getVCache()}})
        if (!bufferOf.count(result))
          bufferOf[result] = bufferOf.lookup(cache);
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
      if (ConcatOp concat = columnConcatOf.lookup(value)) {
        // Written in place into its columns of the joined tensor.
        if (!bufferOf.count(concat.getY())) {
          FailureOr<int64_t> id =
              addBuffer(concat.getY(), plan::Region::Activation,
                        "concat#" + std::to_string(activationIds.size()));
          if (failed(id))
            return failure();
          activationIds.push_back(*id);
        }
        int64_t column = 0;
        for (Value x : concat.getXs()) {
          if (x == value)
            break;
          column += cast<RankedTensorType>(x.getType()).getShape().back();
        }
        addColumnView(value, bufferOf.lookup(concat.getY()), column);
        continue;
      }
      if (ConcatOp concat = gatheredWeightOf.lookup(value)) {
        if (failed(addGatheredRows(value, concat)))
          return failure();
        continue;
      }
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
  return createColumnViews();
}

/// cuDNN's bf16 attention backward works in fp32 accumulators of dq and,
/// under GQA, of dk and dv per query head (planner/plan/DeviceWorkspace.h),
/// 50 MiB at MiniMind's batch 4. Held beside the plan for the whole run,
/// that is memory no tensor uses most of the step; as an activation buffer
/// that lives for its instruction alone, it takes bytes whose activations
/// are dead by then. Every bf16 attention_grad gets one, and every bf16
/// ring block gradient without dlse (which runs on cuDNN too).
LogicalResult Emitter::createWorkspaces() {
  for (Operation *op : ops) {
    plan::AttentionGradShape shape;
    StringAttr split;
    StringRef axis;
    Value q, k;
    std::string name;
    if (auto grad = dyn_cast<AttentionGradOp>(op)) {
      q = grad.getQ();
      k = grad.getK();
      split = grad.getPositionSplitAttr();
      axis = grad.getPositionAxis().value_or("");
      shape.headDim = static_cast<int64_t>(grad.getHeadDim());
      name = "attention_grad.workspace#";
    } else if (auto block = dyn_cast<AttentionBlockGradOp>(op);
               block && !block.getDlse()) {
      q = block.getQ();
      k = block.getK();
      split = block.getPositionSplitAttr();
      axis = block.getPositionAxis();
      shape.headDim = static_cast<int64_t>(block.getHeadDim());
      shape.kvShift = static_cast<int64_t>(block.getKvShift());
      shape.ringBlock = true;
      name = "attention_block_grad.workspace#";
    } else {
      continue;
    }
    auto qType = cast<RankedTensorType>(q.getType());
    auto kType = cast<RankedTensorType>(k.getType());
    if (!qType.getElementType().isBF16())
      continue;
    shape.q.assign(qType.getShape().begin(), qType.getShape().end());
    shape.k.assign(kType.getShape().begin(), kType.getShape().end());
    shape.axisSize = axis.empty() || !mesh ? 1 : mesh.getSize(axis);
    shape.balanced = split && split.getValue() == "balanced";
    int64_t bytes = plan::cudnnAttentionGradBytes(shape);
    if (bytes == 0) // no rank's queries see a key of this block
      continue;
    plan::Buffer buffer;
    buffer.id = static_cast<int64_t>(result.buffers.size());
    buffer.name = name + std::to_string(workspaceOf.size());
    buffer.region = plan::Region::Activation;
    buffer.dtype = DType::F32;
    buffer.shape = {(bytes + 3) / 4};
    buffer.numBytes = buffer.shape[0] * 4;
    result.buffers.push_back(buffer);
    activationIds.push_back(buffer.id);
    workspaceOf[op] = buffer.id;
  }
  return success();
}

int64_t Emitter::addColumnView(Value piece, int64_t base, int64_t column) {
  plan::Buffer view = result.buffers[base];
  auto type = cast<RankedTensorType>(piece.getType());
  view.id = static_cast<int64_t>(result.buffers.size());
  view.name = result.buffers[base].name + "[columns " + std::to_string(column) +
              "+" + std::to_string(type.getShape().back()) + "]";
  view.shape.assign(type.getShape().begin(), type.getShape().end());
  view.rowStride = result.buffers[base].shape.back();
  view.numBytes = view.extentBytes().value_or(0);
  view.viewOf = base;
  int64_t offset = column * dtypeSize(view.dtype);
  views.emplace_back(view.id, base, offset);
  result.buffers.push_back(view);
  bufferOf[piece] = view.id;
  return view.id;
}

/// Gives each piece of a column-view split a view of its columns of the
/// whole's buffer (an arena buffer of its own: the GEMM's output).
LogicalResult Emitter::createColumnViews() {
  for (SplitOp split : columnSplits) {
    int64_t whole = bufferOf.lookup(split.getX());
    if (result.buffers[whole].viewOf >= 0 ||
        result.buffers[whole].region != plan::Region::Activation)
      return split.emitError("columns of a view or of a non-activation are "
                             "not placed as views");
    int64_t column = 0;
    for (Value piece : split.getYs()) {
      addColumnView(piece, whole, column);
      column += cast<RankedTensorType>(piece.getType()).getShape().back();
    }
  }
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

/// Makes `piece`, a gathered member of a fused weight (ZeRO-3), a view of
/// its rows of the weight's activation buffer, which it creates with the
/// first member: the gathers write the weight, the concat copies nothing.
LogicalResult Emitter::addGatheredRows(Value piece, ConcatOp concat) {
  if (!bufferOf.count(concat.getY())) {
    FailureOr<int64_t> id =
        addBuffer(concat.getY(), plan::Region::Activation,
                  "gathered#" + std::to_string(activationIds.size()));
    if (failed(id))
      return failure();
    activationIds.push_back(*id);
  }
  int64_t base = bufferOf.lookup(concat.getY());
  plan::Buffer view = result.buffers[base];
  int64_t offset = 0, index = 0;
  for (Value x : concat.getXs()) {
    if (x == piece)
      break;
    offset += tensorBytes(x);
    ++index;
  }
  auto shape = cast<RankedTensorType>(piece.getType()).getShape();
  view.id = static_cast<int64_t>(result.buffers.size());
  view.name = result.buffers[base].name + "[" + std::to_string(index) + "]";
  view.shape.assign(shape.begin(), shape.end());
  view.numBytes = tensorBytes(piece);
  view.viewOf = base;
  views.emplace_back(view.id, base, offset);
  result.buffers.push_back(view);
  bufferOf[piece] = view.id;
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
