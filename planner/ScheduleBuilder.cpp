//===- ScheduleBuilder.cpp - schedule records of a train step -------------===//

#include "planner/ScheduleBuilder.h"
#include "ir/ArgumentRoles.h"
#include "ir/SharcOps.h"

using namespace mlir;
using namespace sharc;

namespace {

std::string dtypeOf(Operation *op) {
  for (Value value : op->getOperands())
    if (auto type = dyn_cast<RankedTensorType>(value.getType())) {
      if (type.getElementType().isBF16())
        return "bf16";
      if (type.getElementType().isF32())
        return "f32";
    }
  return "f32";
}

/// Bytes one rank sends and the axis, for a collective; {0, ""} otherwise.
std::pair<int64_t, std::string> communication(Operation *op, MeshAttr mesh) {
  // A reduction over several axes ("dp,tp") spans their product.
  auto sizeOf = [&](StringRef axisList) {
    int64_t size = 1;
    for (StringRef axis : splitAxes(axisList))
      size *= mesh.getSize(axis);
    return size;
  };
  if (auto coalesced = dyn_cast<AllReduceCoalescedOp>(op)) {
    int64_t n = sizeOf(coalesced.getAxis()), bytes = 0;
    for (Value x : coalesced.getXs())
      bytes += 2 * (n - 1) * tensorBytes(x) / n;
    return {bytes, coalesced.getAxis().str()};
  }
  // ZeRO-1's buckets: (n-1) blocks of each member, as their single ops.
  if (auto scatter = dyn_cast<ReduceScatterCoalescedOp>(op)) {
    int64_t n = sizeOf(scatter.getAxis()), bytes = 0;
    for (Value y : scatter.getYs())
      bytes += (n - 1) * tensorBytes(y);
    return {bytes, scatter.getAxis().str()};
  }
  if (auto gather = dyn_cast<AllGatherCoalescedOp>(op)) {
    int64_t n = sizeOf(gather.getAxis()), bytes = 0;
    for (Value x : gather.getXs())
      bytes += (n - 1) * tensorBytes(x);
    return {bytes, gather.getAxis().str()};
  }
  auto axis = op->getAttrOfType<StringAttr>("axis");
  if (!axis)
    return {0, ""};
  int64_t n = sizeOf(axis.getValue());
  if (auto reduce = dyn_cast<AllReduceOp>(op))
    return {reduce.getNumBytesSent(n), axis.str()};
  if (auto gather = dyn_cast<AllGatherOp>(op))
    return {gather.getNumBytesSent(n), axis.str()};
  if (auto scatter = dyn_cast<ReduceScatterOp>(op))
    return {scatter.getNumBytesSent(n), axis.str()};
  if (auto exchange = dyn_cast<AllToAllOp>(op))
    return {exchange.getNumBytesSent(n), axis.str()};
  // Ring attention's K/V blocks: one block to the next rank.
  if (auto shift = dyn_cast<RingShiftOp>(op))
    return {shift.getNumBytesSent(n), axis.str()};
  // Pipeline transfers run on the communication stream too; the receiver
  // sends nothing.
  if (auto send = dyn_cast<SendOp>(op))
    return {tensorBytes(send.getX()), axis.str()};
  if (isa<RecvOp>(op))
    return {0, axis.str()};
  return {0, ""}; // slice_to_rank and replicate move nothing between ranks
}

/// True when a result of `op` is returned as the function's loss.
bool writesLoss(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  for (OpOperand &use : op->getUses())
    if (isa<func::ReturnOp>(use.getOwner()) &&
        getResultString(func, use.getOperandNumber(), kOutputAttr) == "loss")
      return true;
  return false;
}

/// The nodes that produced the bytes of `value`: its op's, or through
/// views (a split or concat that became no instruction: dim-0 splits, and
/// column views, planner/ColumnViews.h) those of what they view.
void producersOf(Value value,
                 const llvm::DenseMap<Operation *, int64_t> &indexOf,
                 std::vector<int64_t> &inputs) {
  Operation *producer = value.getDefiningOp();
  if (!producer)
    return;
  if (auto it = indexOf.find(producer); it != indexOf.end()) {
    inputs.push_back(it->second);
    return;
  }
  if (auto split = dyn_cast<SplitOp>(producer))
    producersOf(split.getX(), indexOf, inputs);
  else if (auto concat = dyn_cast<ConcatOp>(producer))
    for (Value x : concat.getXs())
      producersOf(x, indexOf, inputs);
}

/// An AdamW whose parameter is an argument split over dp: a parameter kept
/// as its block (sharc-shard-parameters).
bool updatesBlock(Operation *op) {
  Value param = op->getOperand(0);
  return isa<BlockArgument>(param) &&
         getPlacement(param.getType()).getAxis("dp") >= 0;
}

} // namespace

ScheduleGraph
sharc::buildScheduleGraph(ArrayRef<Operation *> ops,
                          const llvm::DenseMap<Value, int64_t> &bufferOf,
                          MeshAttr mesh) {
  llvm::DenseMap<Operation *, int64_t> indexOf;
  llvm::DenseMap<int64_t, int64_t> lastTransfer; // stage -> node
  ScheduleGraph graph;
  for (Operation *op : ops) {
    ScheduleNode node;
    node.op = op->getName().stripDialect().str();
    node.dtype = dtypeOf(op);
    // Weight gradients and the optimizer updates that consume them are
    // needed by nothing nearby: they can run beside a collective. Not the
    // update of a parameter kept as a dp block (ZeRO-3): the next
    // collective is the prefetch of parameters a layer on, and its
    // gradient block would live until then (MiniMind at dp 2: a gradient
    // arena of 77 MiB where 40 suffice).
    node.deferrable =
        isa<MatmulWgradOp>(op) || (isa<AdamWOp>(op) && !updatesBlock(op));
    auto recompute = op->getAttrOfType<StringAttr>(kRecomputeAttr);
    node.recomputes = recompute && recompute.getValue() == "full";
    node.reruns = static_cast<bool>(recompute);
    node.writesLoss = writesLoss(op);
    auto [commBytes, axis] = communication(op, mesh);
    node.kind = axis.empty() ? NodeKind::Compute : NodeKind::Collective;
    node.commBytes = commBytes;
    node.axis = axis;
    for (Value operand : op->getOperands()) {
      producersOf(operand, indexOf, node.inputs);
      node.reads.push_back(bufferOf.lookup(operand));
      node.memBytes += tensorBytes(operand);
    }
    // adamw writes its parameter, moments and master in place.
    if (auto adamw = dyn_cast<AdamWOp>(op)) {
      node.writes = {bufferOf.lookup(adamw.getParam()),
                     bufferOf.lookup(adamw.getM()),
                     bufferOf.lookup(adamw.getV())};
      if (adamw.getMaster())
        node.writes.push_back(bufferOf.lookup(adamw.getMaster()));
    } else
      for (Value result : op->getResults()) {
        node.writes.push_back(bufferOf.lookup(result));
        node.memBytes += tensorBytes(result);
      }
    if (auto cost = dyn_cast<CostOpInterface>(op))
      node.flops = cost.getFlops();
    if (auto stage = op->getAttrOfType<IntegerAttr>(kStageAttr))
      node.stage = stage.getInt();
    // A gather of parameters kept as dp blocks (ZeRO-3) reads arguments
    // alone, so nothing would hold it back: the list schedule would start
    // every one at the step's start and hold all of them whole at once
    // (MiniMind at dp 2: 124 MiB more activations). It follows the node
    // of its stage before it, as sharc-shard-parameters placed it one
    // group ahead.
    if (isa<AllGatherOp, AllGatherCoalescedOp>(op) &&
        llvm::all_of(op->getOperands(),
                     [](Value x) { return isa<BlockArgument>(x); }))
      for (int64_t before = static_cast<int64_t>(graph.size()) - 1; before >= 0;
           --before)
        if (graph[before].stage == node.stage) {
          node.inputs.push_back(before);
          break;
        }
    if (auto send = dyn_cast<SendOp>(op)) {
      node.peer = send.getPeer();
      node.tag = send.getTag();
    } else if (auto recv = dyn_cast<RecvOp>(op)) {
      node.peer = recv.getPeer();
      node.tag = recv.getTag();
    }
    // A stage's sends and recvs share one in-order stream, in an order
    // sharc-pipeline-schedule made deadlock-free and NCCL pairs by: each
    // follows the stage's transfer before it. Else the list schedule,
    // finding a recv ready at the start (it reads nothing), posts it
    // before the sends the other stage waits for, and both wait forever
    // (`--pp 2 --schedule latency` timed out on the cpu).
    if (isa<SendOp, RecvOp>(op)) {
      auto last = lastTransfer.find(node.stage);
      if (last != lastTransfer.end())
        node.inputs.push_back(last->second);
      lastTransfer[node.stage] = static_cast<int64_t>(graph.size());
    }
    indexOf[op] = static_cast<int64_t>(graph.size());
    graph.push_back(std::move(node));
  }
  return graph;
}
