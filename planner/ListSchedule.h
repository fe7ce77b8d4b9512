//===- ListSchedule.h - an order that hides collectives ---------*- C++ -*-===//
// defines: latencyHidingOrder
//
// A list scheduler over the two streams of a rank, as XLA's latency-hiding
// scheduler does it in spirit: it simulates the compute and communication
// streams with each node's predicted time (CostModel.h) and repeatedly
// emits, of the nodes whose predecessors are all emitted, the one that can
// start earliest (ties: the one with the longest predicted path to the end
// of the step, then program order). A compute node waiting
// for a collective therefore lets any independent compute that is ready
// run in the gap (weight gradients, another microbatch's layers, the next
// layer's work that does not need the collective), where scheduleOrder
// (Schedule.h) only defers weight gradients past the next collective.
// Predecessors are the data inputs and every buffer conflict in program
// order (a write after reads or a write, a read after a write), so the
// order computes what program order does.
//
//   std::vector<int64_t> order = latencyHidingOrder(graph, seconds);
#pragma once

#include "planner/ScheduleGraph.h"

#include <cstdint>
#include <vector>

namespace sharc {

/// A permutation of the node indices (position -> node index) that keeps
/// every data dependency and buffer conflict of `graph`; `seconds[i]` is
/// node i's predicted time on its stream.
std::vector<int64_t> latencyHidingOrder(const ScheduleGraph &graph,
                                        const std::vector<double> &seconds);

} // namespace sharc
