//===- StepSimulation.h - every rank's step, simulated together -*- C++ -*-===//
// defines: MeshShape, StepSimulation, simulateStep
//
// Predicts the step of an SPMD plan on all its ranks at once. Each rank runs
// the nodes of its pipeline stage (its coordinate on the pp axis; every node
// without one) on its streams in schedule order, a node starting when its
// stream is free and its events are signalled (as Timeline.h's simulate does
// for one rank), and the ranks meet where the plan makes them meet:
//  - a collective that moves bytes over axes A starts when the last rank of
//    its group (the ranks that differ only on A) is ready for it, and ends
//    its duration after that on every member;
//  - a recv ends no earlier than its send (the same tag, on the rank of the
//    peer stage with the same other coordinates) has ended: the send's
//    start plus the link's transfer time;
//  - a run of adjacent sends and recvs on one stream starts as one group,
//    as the runtime launches them (Runtime::groupTransfers), so a send is
//    never held up by the recv listed before it in its group.
// The step is the latest end over all ranks. A node's interval includes its
// wait for other ranks (Timeline::waitSeconds says how much of it).
//
// NCCL's rendezvous (a large send completes only once the receiver posts)
// is not modelled: a send ends its transfer time after it starts.
//
//   StepSimulation sim =
//       simulateStep(graph, streams, order, machine, {{"pp", 2}, {"tp", 2}});
//   sim.stepSeconds;          // the predicted step
//   sim.stageBusySeconds[1];  // stage 1's compute time
//   sim.bubble;               // the stages' mean idle share of the step
#pragma once

#include "planner/Timeline.h"

#include <string>
#include <utility>
#include <vector>

namespace sharc {

/// The plan's mesh: (axis, size) outermost first; the last axis is the
/// fastest-varying in a rank's number.
using MeshShape = std::vector<std::pair<std::string, int64_t>>;

struct StepSimulation {
  std::vector<Timeline> ranks;      ///< per rank
  std::vector<int64_t> stageOfRank; ///< per rank; -1 without stages
  double stepSeconds = 0.0;         ///< the latest end over all ranks
  bool deadlocked = false;          ///< some rank did not finish
  /// Per pipeline stage (one entry without stages): the compute nodes'
  /// total time on the stage's first rank.
  std::vector<double> stageBusySeconds;
  /// The mean over stages of the share of the step their compute stream
  /// is idle: the pipeline bubble, plus any exposed communication.
  double bubble = 0.0;
  /// Every matched send and recv, for the trace's arrows.
  std::vector<CrossRankWait> transfers;
};

/// What sharc-recompute runs again (ScheduleNode::reruns) costs the rank
/// that spends the most simulated compute time on it: the ops (of them
/// collectives: re-gathers), their arithmetic beside all of the rank's,
/// the bytes they read and write, and their compute time.
struct RecomputeCost {
  int64_t ops = 0, collectives = 0;
  int64_t flops = 0, stepFlops = 0, memBytes = 0;
  double seconds = 0.0;
};
RecomputeCost recomputeCost(const ScheduleGraph &graph,
                            const StepSimulation &simulation);

/// `streams` and `order` are the whole plan's (every stage's nodes, events
/// numbered across stages). An empty mesh is one rank running every node.
StepSimulation simulateStep(const ScheduleGraph &graph,
                            const StreamAssignment &streams,
                            const std::vector<int64_t> &order,
                            const Machine &machine, const MeshShape &mesh);

} // namespace sharc
