//===- ShardParameters.cpp - parameters kept as dp blocks (ZeRO-3) --------===//
//
// sharc-shard-optimizer leaves each shardable update as
//   %wb = slice_to_rank %w ; %wb2 = adamw %wb ... ; %w2 = all_gather %wb2
// with %w2 returned as the parameter's update. Here the parameter itself
// becomes the block: the slice and the update's gather go, and every other
// reader of the whole parameter reads an all_gather of the block made just
// for it, grouped with its neighbours' and issued one group ahead.
//
//===----------------------------------------------------------------------===//

#include "passes/OptimizerShards.h"

#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"
#include "passes/ParameterStages.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <tuple>

namespace sharc {
#define GEN_PASS_DEF_SHARDPARAMETERS
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

/// A parameter sharc-shard-optimizer updates on a block.
struct BlockParameter {
  BlockArgument param;
  SliceToRankOp slice;
  AdamWOp update;
  Operation *gather;    ///< all_gather(_coalesced) of the updated block
  unsigned gatherIndex; ///< the update's operand and result in it
};

/// One op's read of a whole parameter or of a fused weight of them.
struct Need {
  Operation *user;
  unsigned operand;
  Value source; ///< the parameter, or the fused weight's concat
};

class ParameterSharder {
public:
  ParameterSharder(func::FuncOp func, int64_t bucketBytes)
      : func(func), mesh(getMesh(func)), bucketBytes(bucketBytes) {}

  void run();

private:
  /// The block updates whose parameter can be kept as the block: every
  /// reader other than its slice is an op that takes a whole tensor, or a
  /// fused weight all of whose members qualify.
  void findBlockParameters();
  /// The parameter's argument becomes its block and the update's result
  /// the step's output; the slice and the returned gather go.
  void keepBlock(BlockParameter &block);
  /// Each reader of a whole parameter reads a gather of its own, in
  /// groups of about bucketBytes, each issued before the group before it.
  void gatherForReaders(ArrayRef<Need> needs);
  /// The parameters a need gathers: itself, or a fused weight's members.
  SmallVector<Value> membersOf(Value source) const;
  /// What a group's needs share: one element type (a collective call takes
  /// one) and, on pipeline stages, one stage, model chunk and step of the
  /// schedule (a forward or backward of one microbatch), as the group runs
  /// on that stage's ranks and in that step, which its first reader's
  /// attributes give it.
  using GroupKey = std::tuple<int64_t, int64_t, int64_t, bool, const void *>;
  GroupKey groupKey(const Need &need) const;

  func::FuncOp func;
  MeshAttr mesh;
  int64_t bucketBytes;
  llvm::MapVector<Value, BlockParameter> blocks;
  /// The whole type of each kept parameter, before it became the block.
  llvm::DenseMap<Value, Type> wholeType;
  /// Each parameter's pipeline stage and model chunk by name (empty
  /// without stages).
  llvm::StringMap<int64_t> stages, chunks;
};

void ParameterSharder::findBlockParameters() {
  Operation *returnOp = func.getBody().back().getTerminator();
  func.walk([&](SliceToRankOp slice) {
    auto param = dyn_cast<BlockArgument>(slice.getX());
    if (!param ||
        getArgString(func, param.getArgNumber(), kParamAttr).empty() ||
        slice.getAxis() != kOptimizerShardAxis || slice.getDim() != 0 ||
        !slice.getY().hasOneUse())
      return;
    auto update = dyn_cast<AdamWOp>(*slice.getY().getUsers().begin());
    if (!update || update.getParam() != slice.getY() ||
        !update.getNewParam().hasOneUse())
      return;
    OpOperand &use = *update.getNewParam().getUses().begin();
    Operation *gather = use.getOwner();
    if (!isa<AllGatherOp, AllGatherCoalescedOp>(gather))
      return;
    Value whole = gather->getResult(use.getOperandNumber());
    if (!whole.hasOneUse() || *whole.getUsers().begin() != returnOp)
      return;
    blocks[param] = {param, slice, update, gather, use.getOperandNumber()};
  });
  // A reader that is a fused weight keeps its members whole unless all of
  // them are blocks; dropping one may drop another fused weight's, so
  // repeat until nothing changes.
  bool changed = true;
  while (changed) {
    SmallVector<Value> whole;
    for (auto &[param, block] : blocks)
      if (llvm::any_of(param.getUsers(), [&](Operation *user) {
            auto concat = dyn_cast<ConcatOp>(user);
            return concat && (!concat.isView() ||
                              !llvm::all_of(concat.getXs(), [&](Value x) {
                                return blocks.count(x) > 0;
                              }));
          }))
        whole.push_back(param);
    for (Value param : whole)
      blocks.erase(param);
    changed = !whole.empty();
  }
}

void ParameterSharder::keepBlock(BlockParameter &block) {
  Value param = block.param;
  wholeType[param] = param.getType();
  Type blockType = block.slice.getY().getType();
  param.setType(blockType);
  func.setArgAttr(block.param.getArgNumber(), kPlacementAttr,
                  getPlacement(blockType));
  block.slice.getY().replaceAllUsesWith(param);
  block.slice.erase();
  // The step returns the updated block, written in place over the
  // argument's bytes as any update is.
  Value whole = block.gather->getResult(block.gatherIndex);
  whole.replaceAllUsesWith(block.update.getNewParam());
}

SmallVector<Value> ParameterSharder::membersOf(Value source) const {
  if (auto concat = source.getDefiningOp<ConcatOp>())
    return SmallVector<Value>(concat.getXs());
  return {source};
}

ParameterSharder::GroupKey ParameterSharder::groupKey(const Need &need) const {
  Value member = membersOf(need.source).front();
  const void *element = cast<RankedTensorType>(member.getType())
                            .getElementType()
                            .getAsOpaquePointer();
  if (stages.empty())
    return {-1, -1, -1, false, element};
  StringRef name = getArgString(
      func, cast<BlockArgument>(member).getArgNumber(), kParamAttr);
  auto lookup = [&](const llvm::StringMap<int64_t> &map) {
    auto it = map.find(name);
    return it == map.end() ? int64_t{-1} : it->second;
  };
  auto microbatch = need.user->getAttrOfType<IntegerAttr>(kMicrobatchAttr);
  return {lookup(stages), lookup(chunks), microbatch ? microbatch.getInt() : -1,
          need.user->hasAttr(kForwardAttr), element};
}

void ParameterSharder::gatherForReaders(ArrayRef<Need> needs) {
  // Groups of needs in program order, about bucketBytes of whole
  // parameters each, one open per key (groupKey).
  struct Group {
    SmallVector<Need> needs;
    int64_t bytes = 0;
    llvm::SmallPtrSet<Value, 16> members;
    int64_t previous = -1; ///< the group of the same key before, or -1
  };
  SmallVector<Group> groups;
  std::map<GroupKey, int64_t> open;
  for (const Need &need : needs) {
    GroupKey key = groupKey(need);
    auto it = open.find(key);
    int64_t bytes = 0;
    for (Value member : membersOf(need.source))
      if (it == open.end() || !groups[it->second].members.contains(member))
        bytes += tensorBytes(member) * mesh.getSize(kOptimizerShardAxis);
    if (it == open.end() || (groups[it->second].bytes > 0 &&
                             groups[it->second].bytes + bytes > bucketBytes)) {
      Group next;
      next.previous = it == open.end() ? -1 : it->second;
      groups.push_back(std::move(next));
      it = open.insert_or_assign(key, static_cast<int64_t>(groups.size()) - 1)
               .first;
    }
    Group &group = groups[it->second];
    group.needs.push_back(need);
    group.bytes += bytes;
    for (Value member : membersOf(need.source))
      group.members.insert(member);
  }

  OpBuilder builder(func.getContext());
  StringAttr axis = builder.getStringAttr(kOptimizerShardAxis);
  for (const Group &current : groups) {
    ArrayRef<Need> group = current.needs;
    // Issued before the first reader of the group before it of its key,
    // so that it arrives while that group computes. It takes its first
    // reader's stage and step of a pipeline schedule
    // (sharc-pipeline-schedule orders by them), where it waits for
    // nothing and so comes first: were a group to span two steps, a
    // schedule that runs the second first (1F1B's forward of microbatch 1
    // before the backward of 0) would wait on a gather keyed to the later
    // step, and the stages' transfers on one in-order stream deadlock.
    Operation *anchor = current.previous >= 0
                            ? groups[current.previous].needs.front().user
                            : group.front().user;
    builder.setInsertionPoint(anchor);
    llvm::SetVector<Value> members;
    for (const Need &need : group)
      for (Value member : membersOf(need.source))
        members.insert(member);
    SmallVector<Value> xs(members.begin(), members.end());
    SmallVector<Type> types;
    for (Value member : xs)
      types.push_back(wholeType.lookup(member));
    Location loc = group.front().user->getLoc();
    Operation *gather =
        xs.size() == 1
            ? builder
                  .create<AllGatherOp>(loc, types.front(), xs.front(), axis,
                                       builder.getI64IntegerAttr(0))
                  .getOperation()
            : builder.create<AllGatherCoalescedOp>(loc, types, xs, axis)
                  .getOperation();
    gather->setDiscardableAttrs(
        group.front().user->getDiscardableAttrDictionary());
    llvm::DenseMap<Value, Value> gathered;
    for (auto [member, result] : llvm::zip(xs, gather->getResults()))
      gathered[member] = result;
    // A fused weight is concatenated again from its gathered members once
    // a group (the planner makes them rows of one buffer: no copy).
    llvm::DenseMap<Value, Value> fused;
    for (const Need &need : group) {
      auto concat = need.source.getDefiningOp<ConcatOp>();
      if (!concat || fused.count(concat))
        continue;
      SmallVector<Value> pieces;
      for (Value member : concat.getXs())
        pieces.push_back(gathered.lookup(member));
      auto again = builder.create<ConcatOp>(concat.getLoc(), concat.getType(),
                                            pieces, concat.getDimAttr());
      again->setDiscardableAttrs(concat->getDiscardableAttrDictionary());
      fused[concat] = again.getY();
    }
    for (const Need &need : group)
      need.user->setOperand(need.operand, fused.count(need.source)
                                              ? fused.lookup(need.source)
                                              : gathered.lookup(need.source));
  }
}

void ParameterSharder::run() {
  stages = parameterStages(func);
  chunks = parameterChunks(func);
  findBlockParameters();
  if (blocks.empty())
    return;
  // The readers of whole parameters, in program order: each a need.
  SmallVector<Need> needs;
  SmallVector<ConcatOp> fusedWeights;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (auto concat = dyn_cast<ConcatOp>(op);
        concat && !concat.getXs().empty() && blocks.count(concat.getXs()[0])) {
      fusedWeights.push_back(concat);
      continue;
    }
    for (OpOperand &operand : op.getOpOperands()) {
      Value source = operand.get();
      auto concat = source.getDefiningOp<ConcatOp>();
      bool fused = concat && llvm::is_contained(fusedWeights, concat);
      auto it = blocks.find(source);
      if (!fused && (it == blocks.end() || &op == it->second.slice))
        continue;
      needs.push_back({&op, operand.getOperandNumber(), source});
    }
  }
  // The updates' gathers go: a coalesced one keeps the members of
  // parameters that stay whole.
  llvm::SetVector<Operation *> gathers;
  for (auto &[param, block] : blocks) {
    gathers.insert(block.gather);
    keepBlock(block);
  }
  for (Operation *gather : gathers) {
    auto bucket = dyn_cast<AllGatherCoalescedOp>(gather);
    SmallVector<Value> xs;
    SmallVector<Type> types;
    SmallVector<Value> kept;
    if (bucket)
      for (auto [x, y] : llvm::zip(bucket.getXs(), bucket.getYs()))
        if (!y.use_empty()) {
          xs.push_back(x);
          types.push_back(y.getType());
          kept.push_back(y);
        }
    if (!xs.empty()) {
      OpBuilder builder(gather);
      auto rest = builder.create<AllGatherCoalescedOp>(
          gather->getLoc(), types, xs, bucket.getAxisAttr());
      rest->setDiscardableAttrs(gather->getDiscardableAttrDictionary());
      for (auto [old, result] : llvm::zip(kept, rest.getYs()))
        old.replaceAllUsesWith(result);
    }
    gather->erase();
  }
  gatherForReaders(needs);
  for (ConcatOp concat : fusedWeights)
    concat.erase();
  auto returnOp = cast<func::ReturnOp>(func.getBody().back().getTerminator());
  func.setType(FunctionType::get(func.getContext(),
                                 func.getBody().getArgumentTypes(),
                                 returnOp.getOperandTypes()));
}

struct ShardParametersPass
    : sharc::impl::ShardParametersBase<ShardParametersPass> {
  using ShardParametersBase::ShardParametersBase;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      ParameterSharder(func, bucketBytes).run();
  }
};

} // namespace
