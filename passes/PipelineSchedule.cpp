//===- PipelineSchedule.cpp - stage every op, order each stage ------------===//
//
// After sharc-pipeline-partition staged the forward, autodiff, microbatches
// and the optimizer added ops without a stage. Stages meet only at
// transfers, so an op is on the stage of the ops it shares values with
// (union-find over def-use edges, transfers cut, forward stages seed). An
// op reading only inputs (a token slice, a label count, a constant) joins
// no component and is cloned onto every stage that uses it. An op staged
// for all of its stage's chunks (sharc.all_chunks: clipping's norm, which
// sums every chunk's gradients and which every chunk's updates read) keeps
// its stage and cuts its edges too, so that a rank's chunks, which are
// apart virtual stages, do not meet through it.
//
// Each op then gets a key, its step's place in its stage's schedule: a
// forward op (F m) or a backward op (B m) of microbatch m, or for an op of
// no microbatch (the running gradient sums, the optimizer) the latest key
// of what it reads. A list schedule always runs the ready op of the
// smallest key, so each stage's ops come in schedule order.
//
//===----------------------------------------------------------------------===//

#include "ir/SharcOps.h"
#include "passes/Passes.h"
#include "passes/PipelineStages.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SmallSet.h"

#include <map>
#include <queue>
#include <tuple>

namespace sharc {
#define GEN_PASS_DEF_PIPELINESCHEDULE
#include "passes/Passes.h.inc"
} // namespace sharc

using namespace mlir;
using namespace sharc;

namespace {

class Scheduler {
public:
  Scheduler(func::FuncOp func, StringRef axis, StringRef schedule,
            int64_t numStages, int64_t numChunks)
      : func(func), axis(axis), schedule(schedule), numStages(numStages),
        numChunks(numChunks), builder(func.getContext()) {}
  LogicalResult run();

private:
  bool isLeaf(Operation *op) const;
  static bool isAllChunks(Operation *op) { return op->hasAttr(kAllChunksAttr); }
  LogicalResult assignStages();
  LogicalResult checkAllChunks();
  /// Interleaved: each link's sends and recvs chained in the order of the
  /// sends' keys, so NCCL's in-order matching pairs them.
  void chainLinksInSendOrder(ArrayRef<Operation *> ops,
                             llvm::DenseMap<Operation *, int64_t> &keyOf,
                             llvm::DenseMap<Operation *, int64_t> &indexOf,
                             SmallVectorImpl<SmallVector<Operation *>> &usersOf,
                             llvm::DenseMap<Operation *, int64_t> &pending);
  void cloneLeaves();
  void splitTransfers();
  void reorder();
  int64_t stageOf(Operation *op) const {
    return op->getAttrOfType<IntegerAttr>(kStageAttr).getInt();
  }
  void setStage(Operation *op, int64_t stage) {
    op->setAttr(kStageAttr, builder.getI64IntegerAttr(stage));
  }
  /// The model chunk of a staged op (0 without chunks).
  static int64_t chunkOf(Operation *op, StringRef attr = kChunkAttr) {
    auto chunk = op->getAttrOfType<IntegerAttr>(attr);
    return chunk ? chunk.getInt() : 0;
  }
  /// Virtual stage v: chunk v / P of stage v % P.
  void setVirtualStage(Operation *op, int64_t virtualStage) {
    setStage(op, virtualStage % numStages);
    if (numChunks > 1)
      op->setAttr(kChunkAttr,
                  builder.getI64IntegerAttr(virtualStage / numStages));
  }

  func::FuncOp func;
  StringRef axis, schedule;
  int64_t numStages, numChunks;
  OpBuilder builder;
};

bool Scheduler::isLeaf(Operation *op) const {
  return !op->hasAttr(kStageAttr) && !isa<TransferOp>(op) &&
         llvm::all_of(op->getOperands(),
                      [](Value v) { return isa<BlockArgument>(v); });
}

LogicalResult Scheduler::assignStages() {
  Block &body = func.getBody().front();
  // Stage s is the op-less node (s + 1) << 3 (aligned like a pointer).
  auto stageNode = [](int64_t stage) {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(stage + 1) << 3);
  };
  // Nodes are virtual stages: with chunks, one rank runs several.
  int64_t numVirtual = numStages * numChunks;
  llvm::EquivalenceClasses<void *> classes;
  for (int64_t s = 0; s < numVirtual; ++s)
    classes.insert(stageNode(s));
  for (Operation &op : body.without_terminator()) {
    classes.insert(&op);
    if (isAllChunks(&op))
      continue;
    if (auto stage = op.getAttrOfType<IntegerAttr>(kStageAttr))
      classes.unionSets(&op,
                        stageNode(stage.getInt() + chunkOf(&op) * numStages));
    auto transfer = dyn_cast<TransferOp>(op);
    for (Value operand : op.getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || isLeaf(producer) || isAllChunks(producer))
        continue;
      if (transfer) {
        classes.unionSets(
            producer, stageNode(transfer.getFrom() +
                                chunkOf(transfer, kFromChunkAttr) * numStages));
        continue;
      }
      if (auto from = dyn_cast<TransferOp>(producer))
        classes.unionSets(
            &op,
            stageNode(from.getTo() + chunkOf(from, kToChunkAttr) * numStages));
      else
        classes.unionSets(&op, producer);
    }
  }
  llvm::DenseMap<void *, int64_t> stageOfLeader;
  for (int64_t s = 0; s < numVirtual; ++s) {
    void *leader = classes.getLeaderValue(stageNode(s));
    if (!stageOfLeader.try_emplace(leader, s).second)
      return func.emitError("stages ")
             << stageOfLeader[leader] << " and " << s
             << " exchange a value without a transfer";
  }
  for (Operation &op : body.without_terminator()) {
    if (isa<TransferOp>(op) || isLeaf(&op) || isAllChunks(&op))
      continue;
    auto it = stageOfLeader.find(classes.getLeaderValue(&op));
    if (it == stageOfLeader.end())
      return op.emitOpError("feeds no pipeline stage");
    setVirtualStage(&op, it->second);
  }
  return checkAllChunks();
}

/// An op for all of a stage's chunks exchanges values only with ops on its
/// own ranks (its stage, any chunk): the edges the union-find did not
/// follow must not cross stages, which only a transfer may.
LogicalResult Scheduler::checkAllChunks() {
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (!isAllChunks(&op))
      continue;
    int64_t stage = stageOf(&op);
    auto check = [&](int64_t peer) -> LogicalResult {
      if (peer == stage)
        return success();
      return op.emitOpError("runs on stage ")
             << stage << " for all of its chunks but exchanges a value with "
             << "stage " << peer << " without a transfer";
    };
    // A transfer's end on this side: the destination of one it reads, the
    // source of one reading it.
    for (Value operand : op.getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || isLeaf(producer))
        continue;
      auto transfer = dyn_cast<TransferOp>(producer);
      if (failed(check(transfer ? transfer.getTo() : stageOf(producer))))
        return failure();
    }
    for (Operation *user : op.getUsers()) {
      if (isa<func::ReturnOp>(user))
        continue;
      auto transfer = dyn_cast<TransferOp>(user);
      if (failed(check(transfer ? transfer.getFrom() : stageOf(user))))
        return failure();
    }
  }
  return success();
}

void Scheduler::cloneLeaves() {
  Block &body = func.getBody().front();
  SmallVector<Operation *> leaves;
  for (Operation &op : body.without_terminator())
    if (isLeaf(&op))
      leaves.push_back(&op);
  for (Operation *leaf : leaves) {
    llvm::SmallSet<int64_t, 4> stages;
    std::map<int64_t, int64_t> chunkOnStage; // its first user's there
    for (Operation *user : leaf->getUsers())
      if (user->hasAttr(kStageAttr)) {
        stages.insert(stageOf(user));
        chunkOnStage.try_emplace(stageOf(user), chunkOf(user));
      }
    if (stages.empty()) {
      setStage(leaf, 0);
      continue;
    }
    SmallVector<int64_t> order(stages.begin(), stages.end());
    llvm::sort(order);
    setVirtualStage(leaf,
                    order.front() + chunkOnStage[order.front()] * numStages);
    builder.setInsertionPointAfter(leaf);
    for (int64_t stage : llvm::drop_begin(order)) {
      Operation *copy = builder.clone(*leaf);
      setVirtualStage(copy, stage + chunkOnStage[stage] * numStages);
      for (auto [result, copied] :
           llvm::zip(leaf->getResults(), copy->getResults()))
        result.replaceUsesWithIf(copied, [&](OpOperand &use) {
          Operation *user = use.getOwner();
          return user->hasAttr(kStageAttr) && stageOf(user) == stage;
        });
    }
  }
}

void Scheduler::splitTransfers() {
  Block &body = func.getBody().front();
  int64_t tag = 0;
  for (auto transfer : llvm::make_early_inc_range(body.getOps<TransferOp>())) {
    builder.setInsertionPoint(transfer);
    IntegerAttr tagAttr = builder.getI64IntegerAttr(tag++);
    auto send = builder.create<SendOp>(transfer.getLoc(), transfer.getX(),
                                       transfer.getAxisAttr(),
                                       transfer.getToAttr(), tagAttr);
    auto recv = builder.create<RecvOp>(transfer.getLoc(), transfer.getType(),
                                       transfer.getAxisAttr(),
                                       transfer.getFromAttr(), tagAttr);
    for (Operation *op : {send.getOperation(), recv.getOperation()})
      for (StringRef name : {kMicrobatchAttr, kForwardAttr})
        if (Attribute attr = transfer->getAttr(name))
          op->setAttr(name, attr);
    setVirtualStage(send, transfer.getFrom() +
                              chunkOf(transfer, kFromChunkAttr) * numStages);
    setVirtualStage(recv, transfer.getTo() +
                              chunkOf(transfer, kToChunkAttr) * numStages);
    transfer.getY().replaceAllUsesWith(recv.getY());
    transfer.erase();
  }
}

void Scheduler::chainLinksInSendOrder(
    ArrayRef<Operation *> ops, llvm::DenseMap<Operation *, int64_t> &keyOf,
    llvm::DenseMap<Operation *, int64_t> &indexOf,
    SmallVectorImpl<SmallVector<Operation *>> &usersOf,
    llvm::DenseMap<Operation *, int64_t> &pending) {
  llvm::DenseMap<int64_t, RecvOp> recvOfTag;
  for (Operation *op : ops)
    if (auto recv = dyn_cast<RecvOp>(op))
      recvOfTag[recv.getTag()] = recv;
  // (from, to) -> (send's key, tag, send, recv), sorted per link.
  std::map<std::pair<int64_t, int64_t>,
           std::vector<std::tuple<int64_t, int64_t, Operation *, Operation *>>>
      links;
  for (Operation *op : ops)
    if (auto send = dyn_cast<SendOp>(op))
      if (RecvOp recv = recvOfTag.lookup(send.getTag()))
        links[{stageOf(send), send.getPeer()}].push_back(
            {keyOf[send], send.getTag(), send, recv});
  auto chain = [&](Operation *before, Operation *after) {
    usersOf[indexOf[before]].push_back(after);
    ++pending[after];
  };
  for (auto &[link, pairs] : links) {
    llvm::sort(pairs);
    for (size_t i = 1; i < pairs.size(); ++i) {
      chain(std::get<2>(pairs[i - 1]), std::get<2>(pairs[i]));
      chain(std::get<3>(pairs[i - 1]), std::get<3>(pairs[i]));
    }
  }
}

void Scheduler::reorder() {
  Block &body = func.getBody().front();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  // slotIndex[stage][(backward, m, chunk)]: the step's place in that stage.
  std::vector<std::map<std::tuple<bool, int64_t, int64_t>, int64_t>> slotIndex(
      numStages);
  int64_t numMicrobatches = 1;
  for (Operation *op : ops)
    if (auto m = op->getAttrOfType<IntegerAttr>(kMicrobatchAttr))
      numMicrobatches = std::max(numMicrobatches, m.getInt() + 1);
  for (int64_t s = 0; s < numStages; ++s)
    for (auto [index, slot] : llvm::enumerate(
             pipelineSlots(schedule, numStages, s, numMicrobatches, numChunks)))
      slotIndex[s][{slot.backward, slot.microbatch, slot.chunk}] =
          static_cast<int64_t>(index);
  bool microbatched = numMicrobatches > 1;
  llvm::DenseMap<Operation *, int64_t> keyOf, indexOf, pending;
  SmallVector<SmallVector<Operation *>> usersOf(ops.size());
  for (auto [index, op] : llvm::enumerate(ops))
    indexOf[op] = static_cast<int64_t>(index);
  for (auto [index, op] : llvm::enumerate(ops)) {
    auto m = op->getAttrOfType<IntegerAttr>(kMicrobatchAttr);
    int64_t key = 0;
    if (m || !microbatched)
      key = slotIndex[stageOf(op)][{!op->hasAttr(kForwardAttr),
                                    m ? m.getInt() : 0, chunkOf(op)}];
    int64_t numPending = 0;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp()) {
        if (!m && microbatched)
          key = std::max(key, keyOf[producer]);
        usersOf[indexOf[producer]].push_back(op);
        ++numPending;
      }
    keyOf[op] = key;
    pending[op] = numPending;
  }
  // Without tags (NCCL) the n-th recv from a peer gets its n-th send:
  // between two stages, both keep program order (the same on both sides,
  // as each pair was made from one transfer), however the schedule
  // interleaves them with compute. Interleaving reorders microbatches
  // across chunks against program order, so there each link's pairs go in
  // the order their sends' steps come on the sending stage (ties by tag),
  // chained so on both sides.
  if (schedule == "interleaved")
    chainLinksInSendOrder(ops, keyOf, indexOf, usersOf, pending);
  std::map<std::tuple<StringRef, int64_t, int64_t>, Operation *> lastOnLink;
  for (Operation *op : ops) {
    if (schedule == "interleaved")
      break;
    auto send = dyn_cast<SendOp>(op);
    auto recv = dyn_cast<RecvOp>(op);
    if (!send && !recv)
      continue;
    int64_t peer = send ? send.getPeer() : recv.getPeer();
    Operation *&last =
        lastOnLink[{op->getName().getStringRef(), stageOf(op), peer}];
    if (last) {
      usersOf[indexOf[last]].push_back(op);
      ++pending[op];
    }
    last = op;
  }
  // A collective over the pipeline axis (clipping's norm, summed over the
  // stages) shares the axis' ranks with the stage's sends and recvs: on
  // NCCL ranks must issue the calls of a group in one order, so each stage
  // issues it after all of its transfers (it follows its last gradient
  // anyway; this makes the order not depend on the keys' ties).
  for (Operation *op : ops) {
    auto reduce = dyn_cast<AllReduceOp>(op);
    if (!reduce || !llvm::is_contained(splitAxes(reduce.getAxis()), axis))
      continue;
    for (Operation *transfer : ops)
      if (isa<SendOp, RecvOp>(transfer) && stageOf(transfer) == stageOf(op)) {
        usersOf[indexOf[transfer]].push_back(op);
        ++pending[op];
      }
  }
  using Entry = std::pair<int64_t, int64_t>; // (key, program index)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (Operation *op : ops)
    if (pending[op] == 0)
      ready.push({keyOf[op], indexOf[op]});
  Operation *returnOp = body.getTerminator();
  while (!ready.empty()) {
    Operation *op = ops[ready.top().second];
    ready.pop();
    op->moveBefore(returnOp);
    for (Operation *user : usersOf[indexOf[op]])
      if (--pending[user] == 0)
        ready.push({keyOf[user], indexOf[user]});
  }
  for (Operation *op : ops) {
    op->removeAttr(kMicrobatchAttr);
    op->removeAttr(kForwardAttr);
    op->removeAttr(kChunkAttr);
    op->removeAttr(kAllChunksAttr);
  }
}

LogicalResult Scheduler::run() {
  if (failed(assignStages()))
    return failure();
  cloneLeaves();
  splitTransfers();
  reorder();
  return success();
}

struct PipelineSchedulePass
    : sharc::impl::PipelineScheduleBase<PipelineSchedulePass> {
  using PipelineScheduleBase::PipelineScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t numStages = getMesh(module).getSize(axis);
    if (numStages <= 1)
      return;
    if (schedule != "gpipe" && schedule != "1f1b" &&
        schedule != "interleaved") {
      emitError(module.getLoc(), "pipeline schedule must be gpipe, 1f1b or "
                                 "interleaved, got '")
          << schedule << "'";
      return signalPassFailure();
    }
    if ((schedule == "interleaved") != (chunks > 1)) {
      emitError(module.getLoc(), "the interleaved schedule and only it takes "
                                 "2 or more chunks a stage, got ")
          << static_cast<int64_t>(chunks) << " for " << schedule;
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(Scheduler(func, axis, schedule, numStages, chunks).run()))
        return signalPassFailure();
  }
};

} // namespace
