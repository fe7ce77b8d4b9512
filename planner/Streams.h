//===- Streams.h - streams, events and cross-stream lifetimes ---*- C++ -*-===//
// defines: StreamAssignment, kComputeStream, kCommStream, assignStreams,
//          extendLifetimes
//
// Two streams per rank: collectives on the communication stream (1), all
// else on the compute stream (0). Each stream runs its nodes in schedule
// order; a node whose dependency ran on the other stream waits for an event
// that dependency signals.
//
//   std::vector<int64_t> order = scheduleOrder(graph);
//   StreamAssignment streams = assignStreams(graph, order);
//   std::vector<BufferRequest> requests = ...; // steps = positions in order
//   extendLifetimes(graph, streams, requests);
//   BufferAssignment offsets = assignBuffers(requests);
//
// Dependencies: a node depends on its `inputs` and, because writes may be in
// place, on the earlier nodes (in schedule order) it conflicts with through
// buffers: the last writer of a buffer it reads or writes and the readers of
// a buffer it writes since that buffer's last writer.
//
// Events: a producer signals at most one event, shared by all its
// cross-stream consumers. A node waits for at most one event per other
// stream, the latest producer it needs there, and none at all when its
// stream already knows that producer finished (streams run in order, so a
// wait for a later producer, by this node's stream or, transitively, by the
// producer's, covers earlier ones). Events are numbered by the position of
// their producer.
//
// Lifetimes: the arena allocator reasons in schedule positions, but with two
// streams a node may still run when a later position has started. The
// allocator only lets buffers x and y share bytes when x's lifetime ends
// before y's begins, so it suffices that every node touching x has finished
// before any node touching y starts. The IR layer gives each buffer the
// positions of the nodes that touch it, which orders same-stream nodes.
// Across streams, for a collective c at position p (streams run in order,
// so "after position q" on a stream means after every earlier node there):
//  (a) c's buffers (read or written) live until q, the first compute node
//      whose stream has waited for c or a later collective, or to the end
//      if none. A buffer y placed after them starts after q: its compute
//      nodes run after that wait, hence after c; its collectives come after
//      c on c's own stream.
//  (b) Buffers c writes begin no later than w, the latest compute node c's
//      stream has waited for when c starts. A buffer x placed before them
//      ends before w: its compute nodes finish before w does, hence before
//      c starts; its collectives run before c on c's own stream. Compute
//      nodes after w may still run while c writes, so they must not share
//      bytes with c's results. Reads need no such rule: what c reads was
//      written before c by a compute node c waits for, or by an earlier
//      collective that (b) covers, so it is live from then on.
//  Every other pair of touches is on one stream, or a compute touch after
//  the wait that (a) names, or a collective touch after the compute node
//  (b) names, so schedule positions order them.
#pragma once

#include "planner/BufferAssignment.h"
#include "planner/ScheduleGraph.h"

#include <cstdint>
#include <vector>

namespace sharc {

inline constexpr int64_t kComputeStream = 0;
inline constexpr int64_t kCommStream = 1;

struct StreamAssignment {
  std::vector<int64_t> stream; ///< per node: kComputeStream or kCommStream
  std::vector<std::vector<int64_t>> waits;   ///< per node, event ids
  std::vector<std::vector<int64_t>> signals; ///< per node, event ids
  int64_t numEvents = 0;         ///< events are numbered 0..numEvents-1
  std::vector<int64_t> position; ///< per node, its index in the order
};

/// `order` is a topological order of `graph` (position -> node index), as
/// scheduleOrder returns; the result is indexed by node.
StreamAssignment assignStreams(const ScheduleGraph &graph,
                               const std::vector<int64_t> &order);

/// Applies rules (a) and (b) above to the requests whose id a collective
/// reads or writes; steps are positions in the order `streams` was made
/// for. Requests with other ids are left as they are.
void extendLifetimes(const ScheduleGraph &graph,
                     const StreamAssignment &streams,
                     std::vector<BufferRequest> &buffers);

} // namespace sharc
