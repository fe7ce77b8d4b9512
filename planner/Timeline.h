//===- Timeline.h - a step simulated on two streams -------------*- C++ -*-===//
// defines: Timeline, CrossRankWait, simulate, chromeTrace
//
// Predicts one rank's step: each stream runs its nodes in schedule order, a
// node starting when its stream is free and every event it waits for has
// been signalled (at the end of the signalling node), lasting nodeSeconds.
// Kernels are assumed not to slow each other down, so overlapSeconds is an
// upper bound on what two streams gain. StepSimulation.h runs every rank of
// a mesh together (pipeline stages, their transfers, collective groups);
// simulate is its mesh of one rank.
//
//   Timeline timeline = simulate(graph, streams, order, machine);
//   // timeline.stepSeconds vs timeline.serialSeconds: what overlap saved
//   std::string json = chromeTrace({timeline}, graph); // chrome://tracing
#pragma once

#include "planner/CostModel.h"
#include "planner/ScheduleGraph.h"
#include "planner/Streams.h"
#include "planner/plan/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sharc {

struct Timeline {
  std::vector<double> start;       ///< per node, seconds from the step's start
  std::vector<double> end;         ///< per node; start + its duration
  std::vector<int64_t> stream;     ///< per node, the stream it ran on
  std::vector<double> busySeconds; ///< per stream, total node time
  double stepSeconds = 0.0;        ///< the makespan: the last node's end
  double overlapSeconds = 0.0;     ///< time at least two streams are busy
  double serialSeconds = 0.0;      ///< the sum of all node times
  /// Per node, the part of its interval spent waiting for other ranks (a
  /// recv for its send, a collective for its group's last member).
  std::vector<double> waitSeconds;
  /// Per node, whether it rode on the launch of the update before it (a
  /// run of adamw that the runtime launches once): it paid no launch.
  std::vector<bool> sharedLaunch;
  /// Some node waits for an event no runnable node signals; the nodes that
  /// never ran have NaN times and are left out of every total.
  bool deadlocked = false;
};

/// A recv on one rank that waited for a send on another.
struct CrossRankWait {
  int64_t fromRank = 0, fromNode = 0; ///< the send
  int64_t toRank = 0, toNode = 0;     ///< the recv
};

/// `streams` was made for `order` (position -> node index) of `graph`.
Timeline simulate(const ScheduleGraph &graph, const StreamAssignment &streams,
                  const std::vector<int64_t> &order, const Machine &machine);

/// Chrome trace JSON (chrome://tracing, Perfetto): one complete ("X") event
/// per node that ran, pid = rank, tid = stream, name = op, ts and dur in
/// microseconds, plus metadata naming each rank ("rank R") and stream
/// ("compute", "communication", "stream S" beyond). A node that waited for
/// another rank carries args.wait_us; each of `transfers` is a flow arrow
/// from the send to its recv. Given the plan whose buffer ids the graph
/// names, each rank also gets a counter, "activations MiB": the
/// activation bytes live as each of its nodes starts, as the measured
/// trace of sharc-run has.
std::string chromeTrace(const std::vector<Timeline> &perRank,
                        const ScheduleGraph &graph,
                        const std::vector<CrossRankWait> &transfers = {},
                        const plan::Plan *plan = nullptr);

} // namespace sharc
