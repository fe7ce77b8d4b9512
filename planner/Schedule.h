//===- Schedule.h - the order instructions run in ---------------*- C++ -*-===//
// defines: scheduleOrder
//
// Megatron's overlap of weight-gradient GEMMs with collectives, as a
// reordering of the program order. In the backward of a column-parallel
// linear the program reads `dgrad, wgrad, reduce_scatter(dgrad)`; the
// collective runs on the communication stream, so the step is shorter when
// it starts before wgrad and wgrad runs beside it:
// `dgrad, reduce_scatter(dgrad), wgrad`.
//
// Rule: every deferrable node moves down to just after the first collective
// that follows it in program order, but never past a node that must stay
// after it (one that reads its result, or a buffer conflict: see
// buffersConflict), or a recomputed copy of a forward op (the next layer's
// recompute: going past it, a weight gradient would keep its layer's copies
// alive through that layer's), where it stops just before that node. A
// deferrable node with no later collective stays put: moving it gains no
// overlap and only stretches the lifetimes of what it reads. Everything
// else keeps its relative order; deferred nodes landing at the same place
// keep theirs.
//
//   // 0 dgrad_q, 1 wgrad_q*, 2 dgrad_k, 3 wgrad_k*, 4 add, 5 all_reduce,
//   // 6 norm_grad   (* deferrable)
//   std::vector<int64_t> order = scheduleOrder(graph);
//   // {0, 2, 4, 5, 1, 3, 6}: both wgrads run beside the all_reduce.
#pragma once

#include "planner/ScheduleGraph.h"

#include <cstdint>
#include <vector>

namespace sharc {

/// A permutation of the node indices (position -> node index) that is a
/// topological order of `graph` and keeps every buffer conflict's order.
std::vector<int64_t> scheduleOrder(const ScheduleGraph &graph);

} // namespace sharc
