//===- PlanEmitter.cpp - from a train-step module to a plan ---------------===//
//
// The driver of the plan emitter (Emitter.h): collects the ops that become
// instructions, runs the phases that give them buffers
// (EmitterBuffers.cpp) and order them (EmitterSchedule.cpp), then writes
// the instructions and the plan's header fields.
//
//===----------------------------------------------------------------------===//

#include "planner/PlanEmitter.h"
#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "planner/ColumnViews.h"
#include "planner/Emitter.h"
#include "planner/PlanRecords.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace sharc;

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
    // decode_attention's output is new, its updated caches are not.
    if (auto decode = dyn_cast<DecodeAttentionOp>(op))
      instr.results.push_back(bufferOf.lookup(decode.getOut()));
    else if (!isa<AdamWOp>(op))
      for (Value value : op->getResults())
        instr.results.push_back(bufferOf.lookup(value));
    if (auto workspace = workspaceOf.find(op); workspace != workspaceOf.end())
      instr.results.push_back(workspace->second);
    instr.attrs = instructionAttrs(op);
    if (auto stage = op->getAttrOfType<IntegerAttr>(kStageAttr)) {
      instr.stage = stage.getInt();
      instr.attrs.erase(kStageAttr.str());
    }
    if (auto recompute = op->getAttrOfType<StringAttr>(kRecomputeAttr)) {
      instr.recompute = recompute.getValue().str();
      instr.attrs.erase(kRecomputeAttr.str());
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
/// splits along the last dimension are column views where their pieces'
/// kernels take row strides (planner/ColumnViews.h), else column copies.
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
      // Pieces read and written in place: column views, no copies.
      if (dim != 0 &&
          (split ? isColumnViewSplit(split) : isColumnViewConcat(concat))) {
        if (split)
          columnSplits.push_back(split);
        else
          for (Value x : concat.getXs())
            columnConcatOf[x] = concat;
        continue;
      }
    }
    if (concat && concat.isView() && llvm::all_of(concat.getXs(), [&](Value x) {
          return isa_and_nonnull<AllGatherOp, AllGatherCoalescedOp>(
                     x.getDefiningOp()) &&
                 x.hasOneUse();
        })) {
      // A fused weight gathered whole (ZeRO-3): the gathers write its rows.
      for (Value x : concat.getXs())
        gatheredWeightOf[x] = concat;
      continue;
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
    regionEnd[region] = 0; // the cache region only where a plan has one
  if (failed(assignArguments()) || failed(createSlabs()) ||
      failed(assignResults()) || failed(createActivationBuffers()) ||
      failed(createWorkspaces()) || failed(planSchedule()))
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
