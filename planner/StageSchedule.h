//===- StageSchedule.h - one schedule per pipeline stage --------*- C++ -*-===//
// defines: StagePlan, PlanOne, planStages, planByStage, mergeStages,
//          extendStageLifetimes
//
// With pipeline stages a rank runs one stage's nodes only, so each stage is
// ordered and given streams and events as a program of its own: an event
// or a stream's "already waited" must never rest on another stage's node.
// The plan then lists stage 0's instructions, then stage 1's, and so on;
// events are numbered across stages. Since stages follow each other in the
// list, the arena's best fit lets buffers of different stages share bytes:
// each rank's arena is the largest stage's, not the sum.
//
//   std::vector<StagePlan> stages = planStages(graph, stageOf, 2, planOne);
//   mergeStages(stages, graph.size(), order, streams);
//   extendStageLifetimes(touches, stages, requests); // then assignBuffers
#pragma once

#include "planner/BufferAssignment.h"
#include "planner/ScheduleGraph.h"
#include "planner/Streams.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace sharc {

struct StagePlan {
  std::vector<int64_t> nodes; ///< local node -> node of the whole graph
  ScheduleGraph graph;        ///< the stage's nodes, inputs local
  std::vector<int64_t> order; ///< local positions -> local nodes
  StreamAssignment streams;   ///< local, events from 0
};

/// Orders and streams one graph (scheduleOrder + assignStreams, or one
/// stream in program order).
using PlanOne = std::function<void(const ScheduleGraph &,
                                   std::vector<int64_t> &, StreamAssignment &)>;

/// Splits `graph` by `stageOf` (each in [0, numStages)) and plans each
/// stage's graph with `planOne`.
std::vector<StagePlan> planStages(const ScheduleGraph &graph,
                                  const std::vector<int64_t> &stageOf,
                                  int64_t numStages, const PlanOne &planOne);

/// Without stages (`stageOf` empty) planOne on the whole graph; with them,
/// planStages and mergeStages. Returns the stages' plans (none without).
std::vector<StagePlan> planByStage(const ScheduleGraph &graph,
                                   const std::vector<int64_t> &stageOf,
                                   int64_t numStages, const PlanOne &planOne,
                                   std::vector<int64_t> &order,
                                   StreamAssignment &streams);

/// The whole graph's order (stage after stage) and streams, events
/// renumbered so that stage s's follow stage s-1's.
void mergeStages(const std::vector<StagePlan> &stages, size_t numNodes,
                 std::vector<int64_t> &order, StreamAssignment &streams);

/// extendLifetimes on each stage with its own streams; steps are positions
/// in the merged order. `touches` is the whole graph as extendLifetimes
/// should see it (view ids replaced by their slabs').
void extendStageLifetimes(const ScheduleGraph &touches,
                          const std::vector<StagePlan> &stages,
                          std::vector<BufferRequest> &requests);

} // namespace sharc
