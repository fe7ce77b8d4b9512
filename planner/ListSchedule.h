//===- ListSchedule.h - an order that hides collectives ---------*- C++ -*-===//
// defines: ArenaBuffers, peakLiveBytes, latencyHidingOrder
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
//   std::vector<int64_t> order = latencyHidingOrder(graph, seconds, &arena);
#pragma once

#include "planner/ScheduleGraph.h"

#include <cstdint>
#include <map>
#include <vector>

namespace sharc {

/// The buffers whose lifetimes the order decides (the activation and
/// gradient arenas'): a buffer is live from the first node that touches it
/// to the last. A view counts as what it views. Parameters and optimizer
/// state live all step and are not listed.
struct ArenaBuffers {
  struct Sized {
    int64_t bytes;
    int64_t arena; ///< which arena, in [0, kArenas): each has its own peak
  };
  static constexpr int64_t kArenas = 2;
  std::map<int64_t, int64_t> baseOf; ///< a view's id -> its slab's id
  std::map<int64_t, Sized> buffers;  ///< a (base) buffer's id -> its size
};

/// Per arena, the most bytes live at once when the nodes run in `order`:
/// a node's buffers all live while it runs, those it touches last freed
/// after it.
std::vector<int64_t> peakLiveBytes(const ScheduleGraph &graph,
                                   const std::vector<int64_t> &order,
                                   const ArenaBuffers &arena);

/// A permutation of the node indices (position -> node index) that keeps
/// every data dependency and buffer conflict of `graph`; `seconds[i]` is
/// node i's predicted time on its stream. With `arena`, it keeps each
/// arena's live bytes within scheduleOrder's peak (Schedule.h) where it
/// can: a node that would take them past it waits while another fits, and
/// when none does, the one that leaves the fewest bytes live goes first.
/// Without, whatever can start earliest goes first, and a value made early
/// (a gradient bucket queued behind other collectives, the next layer's
/// activations) lives until its late reader runs.
std::vector<int64_t> latencyHidingOrder(const ScheduleGraph &graph,
                                        const std::vector<double> &seconds,
                                        const ArenaBuffers *arena = nullptr);

} // namespace sharc
