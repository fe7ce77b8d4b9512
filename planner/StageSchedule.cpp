//===- StageSchedule.cpp - one schedule per pipeline stage ----------------===//

#include "planner/StageSchedule.h"

#include <map>
#include <set>

using namespace sharc;

namespace {

ScheduleGraph subgraph(const ScheduleGraph &graph,
                       const std::vector<int64_t> &nodes) {
  std::map<int64_t, int64_t> localOf;
  for (size_t i = 0; i < nodes.size(); ++i)
    localOf[nodes[i]] = static_cast<int64_t>(i);
  ScheduleGraph local;
  for (int64_t node : nodes) {
    ScheduleNode copy = graph[node];
    copy.inputs.clear();
    for (int64_t input : graph[node].inputs)
      if (auto it = localOf.find(input); it != localOf.end())
        copy.inputs.push_back(it->second);
    local.push_back(std::move(copy));
  }
  return local;
}

} // namespace

std::vector<StagePlan> sharc::planStages(const ScheduleGraph &graph,
                                         const std::vector<int64_t> &stageOf,
                                         int64_t numStages,
                                         const PlanOne &planOne) {
  std::vector<StagePlan> stages(static_cast<size_t>(numStages));
  for (size_t node = 0; node < graph.size(); ++node)
    stages[stageOf[node]].nodes.push_back(static_cast<int64_t>(node));
  for (StagePlan &stage : stages) {
    stage.graph = subgraph(graph, stage.nodes);
    planOne(stage.graph, stage.order, stage.streams);
  }
  return stages;
}

std::vector<StagePlan> sharc::planByStage(const ScheduleGraph &graph,
                                          const std::vector<int64_t> &stageOf,
                                          int64_t numStages,
                                          const PlanOne &planOne,
                                          std::vector<int64_t> &order,
                                          StreamAssignment &streams) {
  if (stageOf.empty()) {
    planOne(graph, order, streams);
    return {};
  }
  std::vector<StagePlan> stages =
      planStages(graph, stageOf, numStages, planOne);
  mergeStages(stages, graph.size(), order, streams);
  return stages;
}

void sharc::mergeStages(const std::vector<StagePlan> &stages, size_t numNodes,
                        std::vector<int64_t> &order,
                        StreamAssignment &streams) {
  order.clear();
  streams = StreamAssignment();
  streams.stream.assign(numNodes, kComputeStream);
  streams.waits.assign(numNodes, {});
  streams.signals.assign(numNodes, {});
  streams.position.assign(numNodes, 0);
  for (const StagePlan &stage : stages) {
    int64_t eventBase = streams.numEvents;
    for (int64_t local : stage.order) {
      int64_t node = stage.nodes[local];
      streams.position[node] = static_cast<int64_t>(order.size());
      order.push_back(node);
      streams.stream[node] = stage.streams.stream[local];
      for (int64_t event : stage.streams.waits[local])
        streams.waits[node].push_back(eventBase + event);
      for (int64_t event : stage.streams.signals[local])
        streams.signals[node].push_back(eventBase + event);
    }
    streams.numEvents += stage.streams.numEvents;
  }
}

void sharc::extendStageLifetimes(const ScheduleGraph &touches,
                                 const std::vector<StagePlan> &stages,
                                 std::vector<BufferRequest> &requests) {
  int64_t base = 0;
  for (const StagePlan &stage : stages) {
    ScheduleGraph local = subgraph(touches, stage.nodes);
    std::set<int64_t> ids;
    for (const ScheduleNode &node : local)
      for (const auto *list : {&node.reads, &node.writes})
        ids.insert(list->begin(), list->end());
    std::vector<BufferRequest> mine;
    std::vector<size_t> where;
    for (size_t i = 0; i < requests.size(); ++i)
      if (ids.count(requests[i].id)) {
        BufferRequest request = requests[i];
        request.firstStep -= base;
        request.lastStep -= base;
        mine.push_back(request);
        where.push_back(i);
      }
    extendLifetimes(local, stage.streams, mine);
    for (size_t k = 0; k < mine.size(); ++k) {
      requests[where[k]].firstStep = mine[k].firstStep + base;
      requests[where[k]].lastStep = mine[k].lastStep + base;
    }
    base += static_cast<int64_t>(stage.nodes.size());
  }
}
