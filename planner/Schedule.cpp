//===- Schedule.cpp - the order instructions run in -----------------------===//
//
// Each node gets a sort key on a doubled program-position axis: a node that
// stays at position p has key 2p; a deferred node has an odd key, 2c + 1 to
// sit right after collective c or 2b - 1 to sit right before its first
// blocker b. A stable sort by (key, program position) gives the order.
//
// Why the result is topological: a deferred node's key is below 2b for its
// first blocker b, and every later dependent node has key >= 2 * its own
// position >= 2b, because keys never move a node up. Searching only the
// first collective is enough: a collective that depends on the node, even
// transitively, comes after one of its direct readers, which stops the node
// first, so "the first independent collective" of the rule gives the same
// place.
//
//===----------------------------------------------------------------------===//

#include "planner/Schedule.h"

#include <algorithm>
#include <numeric>

namespace sharc {
namespace {

/// Whether `later` must stay after `node` (program position `index`).
bool mustFollow(const ScheduleNode &later, const ScheduleNode &node,
                int64_t index) {
  const std::vector<int64_t> &inputs = later.inputs;
  return std::find(inputs.begin(), inputs.end(), index) != inputs.end() ||
         buffersConflict(node, later);
}

/// The doubled-axis key of the deferrable node at `index`; `keys` holds the
/// keys of every later node already. A blocker that is itself deferred to
/// the same place does not block: the two keep their program order there
/// (a weight gradient and the optimizer update that reads it move as one).
int64_t deferredKey(const ScheduleGraph &graph, int64_t index,
                    const std::vector<int64_t> &keys) {
  const int64_t count = static_cast<int64_t>(graph.size());
  int64_t collective = -1;
  for (int64_t later = index + 1; later < count && collective < 0; ++later)
    if (graph[later].kind == NodeKind::Collective)
      collective = later;
  if (collective < 0)
    return 2 * index; // no collective to run beside: stay put
  for (int64_t later = index + 1; later <= collective; ++later)
    if (graph[later].recomputes ||
        (mustFollow(graph[later], graph[index], index) &&
         (later == collective || keys[later] != 2 * collective + 1)))
      return 2 * later - 1;
  return 2 * collective + 1;
}

} // namespace

std::vector<int64_t> scheduleOrder(const ScheduleGraph &graph) {
  const int64_t count = static_cast<int64_t>(graph.size());
  std::vector<int64_t> keys(count);
  // Last to first, so that a node sees where its deferred readers go.
  for (int64_t index = count - 1; index >= 0; --index)
    keys[index] =
        graph[index].deferrable ? deferredKey(graph, index, keys) : 2 * index;

  std::vector<int64_t> order(count);
  std::iota(order.begin(), order.end(), 0);
  // Ties are only deferred nodes sharing a place; stable keeps their
  // program order.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return keys[a] < keys[b]; });
  return order;
}

} // namespace sharc
