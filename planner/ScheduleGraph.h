//===- ScheduleGraph.h - one rank's step as plain records -------*- C++ -*-===//
// defines: NodeKind, ScheduleNode, ScheduleGraph, buffersConflict
//
// The input of the planner's scheduling algorithms (Schedule, Streams,
// CostModel, Timeline): one node per plan instruction, with its data
// dependencies, the buffers it touches and what it costs. The IR layer
// builds it; the algorithms never see MLIR, so they are tested on hand-drawn
// graphs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace sharc {

enum class NodeKind : uint8_t { Compute, Collective };

struct ScheduleNode {
  std::string op; ///< plan op name, e.g. "matmul_wgrad", "all_gather"
  NodeKind kind = NodeKind::Compute;
  /// A weight-gradient GEMM: nothing near needs it, so it may wait until a
  /// collective has started and then run beside it.
  bool deferrable = false;
  /// A copy of a forward op that full recompute runs in the backward: a
  /// deferred node stops before it, or the weight gradients of one layer
  /// would keep that layer's copies alive through the next one's.
  bool recomputes = false;
  /// Anything sharc-recompute runs again (a full or selective copy, an SP
  /// re-gather): what the report's recompute line sums.
  bool reruns = false;
  /// Writes the step's loss. Its waits are all made, none left to its
  /// stream's earlier waits, so that the instructions the loss depends on
  /// run correctly on their own (evaluation, executor/ForwardPrefix.h).
  bool writesLoss = false;
  std::vector<int64_t> inputs; ///< nodes whose results it reads (data deps)
  std::vector<int64_t> reads;  ///< buffer ids it reads
  std::vector<int64_t> writes; ///< buffer ids it writes (may be in reads)
  int64_t flops = 0;           ///< a compute node's arithmetic
  int64_t memBytes = 0;        ///< a compute node's bytes read + written
  int64_t commBytes = 0;       ///< a collective: bytes one rank sends
  std::string axis;            ///< a collective: mesh axis ("dp"/"tp")
  std::string dtype = "bf16";  ///< compute dtype, picks the peak rate
  /// With pipeline stages: the stage whose ranks run it; -1: every rank.
  int64_t stage = -1;
  /// A send or recv: the peer stage and the tag pairing the two.
  int64_t peer = -1, tag = -1;
};

/// Nodes in a valid topological (program) order: inputs point backwards.
using ScheduleGraph = std::vector<ScheduleNode>;

/// True when running a and b in either order could give different results:
/// one writes a buffer the other reads or writes. Such pairs keep their
/// program order, like data dependencies, because writes may be in place.
inline bool buffersConflict(const ScheduleNode &a, const ScheduleNode &b) {
  auto touches = [](const std::vector<int64_t> &ids, int64_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  for (int64_t id : a.writes)
    if (touches(b.reads, id) || touches(b.writes, id))
      return true;
  for (int64_t id : b.writes)
    if (touches(a.reads, id))
      return true;
  return false;
}

} // namespace sharc
