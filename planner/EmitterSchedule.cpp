//===- EmitterSchedule.cpp - the plan emitter: order, streams, arenas -----===//
//
// Once every value has its buffer, the ops are ordered (or each pipeline
// stage's on its own), collectives go to their own stream with events, and
// the activation and gradient arenas are placed by best fit on lifetimes
// that respect both streams. Offsets in the arenas are only known here, so
// the views of arena slabs are placed last.
//
//===----------------------------------------------------------------------===//

#include "planner/BufferAssignment.h"
#include "planner/Emitter.h"
#include "planner/ListSchedule.h"
#include "planner/PlanRecords.h"
#include "planner/Schedule.h"
#include "planner/ScheduleBuilder.h"
#include "planner/StageSchedule.h"

using namespace mlir;
using namespace sharc;

/// Orders the ops (deferring weight gradients past the next collective),
/// puts collectives on their own stream with events, and places the
/// activation buffers with lifetimes that respect both streams.
LogicalResult Emitter::planSchedule() {
  schedule.graph = buildScheduleGraph(ops, bufferOf, mesh);
  // A workspace is written by its op alone, so it orders nothing; it is
  // listed so that its lifetime is the op's position, on the op's stream.
  for (auto [index, op] : llvm::enumerate(ops))
    if (auto workspace = workspaceOf.find(op); workspace != workspaceOf.end())
      schedule.graph[index].writes.push_back(workspace->second);
  for (auto [index, op] : llvm::enumerate(ops))
    if (slabOf.count(op))
      schedule.graph[index].op = "all_reduce";
  bool async = options.asyncCollectives &&
               llvm::any_of(schedule.graph, [](const ScheduleNode &node) {
                 return node.kind == NodeKind::Collective;
               });
  // The buffers the order gives their lifetimes: the latency-hiding order
  // keeps them within what the default order keeps live.
  ArenaBuffers arena;
  for (int64_t id : activationIds)
    arena.buffers[id] = {
        result.buffers[id].numBytes,
        result.buffers[id].region == plan::Region::Gradient ? 1 : 0};
  for (auto [id, buffer] : llvm::enumerate(result.buffers))
    if (buffer.viewOf >= 0)
      arena.baseOf[static_cast<int64_t>(id)] = buffer.viewOf;
  PlanOne planOne = [&](const ScheduleGraph &graph, std::vector<int64_t> &order,
                        StreamAssignment &streams) {
    if (async && options.scheduleMachine) {
      std::vector<double> seconds;
      for (const ScheduleNode &node : graph)
        seconds.push_back(nodeSeconds(*options.scheduleMachine, node));
      order = latencyHidingOrder(graph, seconds, &arena);
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
