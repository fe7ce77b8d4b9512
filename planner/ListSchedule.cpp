//===- ListSchedule.cpp - an order that hides collectives -----------------===//

#include "planner/ListSchedule.h"

#include <algorithm>
#include <limits>
#include <map>

namespace sharc {
namespace {

/// Per node, the nodes that must come before it: data inputs, and for each
/// buffer the last writer before a read, and the last writer and every
/// reader since before a write.
std::vector<std::vector<int64_t>> predecessors(const ScheduleGraph &graph) {
  const int64_t count = static_cast<int64_t>(graph.size());
  std::vector<std::vector<int64_t>> before(static_cast<size_t>(count));
  std::map<int64_t, int64_t> lastWriter;
  std::map<int64_t, std::vector<int64_t>> readersSince;
  for (int64_t i = 0; i < count; ++i) {
    const ScheduleNode &node = graph[i];
    std::vector<int64_t> &mine = before[i];
    mine = node.inputs;
    for (int64_t id : node.reads)
      if (auto it = lastWriter.find(id); it != lastWriter.end())
        mine.push_back(it->second);
    for (int64_t id : node.writes) {
      if (auto it = lastWriter.find(id); it != lastWriter.end())
        mine.push_back(it->second);
      for (int64_t reader : readersSince[id])
        mine.push_back(reader);
    }
    for (int64_t id : node.reads)
      readersSince[id].push_back(i);
    for (int64_t id : node.writes) {
      lastWriter[id] = i;
      readersSince[id].clear();
    }
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    mine.erase(std::remove(mine.begin(), mine.end(), i), mine.end());
  }
  return before;
}

} // namespace

std::vector<int64_t> latencyHidingOrder(const ScheduleGraph &graph,
                                        const std::vector<double> &seconds) {
  const int64_t count = static_cast<int64_t>(graph.size());
  std::vector<std::vector<int64_t>> before = predecessors(graph);
  std::vector<std::vector<int64_t>> after(static_cast<size_t>(count));
  std::vector<int64_t> waiting(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    waiting[i] = static_cast<int64_t>(before[i].size());
    for (int64_t p : before[i])
      after[p].push_back(i);
  }
  auto secondsOf = [&](int64_t i) {
    return i < static_cast<int64_t>(seconds.size()) ? seconds[i] : 0.0;
  };
  // The longest predicted path from each node to the end of the step: of
  // two nodes that can start together, the one more work waits on goes
  // first (a weight gradient yields to the input gradient the next
  // collective needs).
  std::vector<double> remaining(static_cast<size_t>(count), 0.0);
  for (int64_t i = count - 1; i >= 0; --i) {
    double longest = 0.0;
    for (int64_t next : after[i])
      longest = std::max(longest, remaining[next]);
    remaining[i] = secondsOf(i) + longest;
  }
  std::vector<int64_t> ready;
  for (int64_t i = 0; i < count; ++i)
    if (waiting[i] == 0)
      ready.push_back(i);
  // Simulated streams: 0 compute, 1 communication.
  double streamFree[2] = {0.0, 0.0};
  std::vector<double> finish(static_cast<size_t>(count), 0.0);
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(count));
  auto streamOf = [&](int64_t i) {
    return graph[i].kind == NodeKind::Collective ? 1 : 0;
  };
  auto startOf = [&](int64_t i) {
    double start = streamFree[streamOf(i)];
    for (int64_t p : before[i])
      start = std::max(start, finish[p]);
    return start;
  };
  while (!ready.empty()) {
    size_t best = 0;
    double bestStart = std::numeric_limits<double>::infinity();
    for (size_t r = 0; r < ready.size(); ++r) {
      int64_t i = ready[r];
      double start = startOf(i);
      int64_t b = ready[best];
      // Earliest start; then the longest path to the end; then program
      // order. Starts within a nanosecond count as equal (sums of doubles).
      bool earlier = start < bestStart - 1e-9;
      bool tie = !earlier && start <= bestStart + 1e-9;
      if (earlier ||
          (tie && (remaining[i] > remaining[b] + 1e-12 ||
                   (remaining[i] >= remaining[b] - 1e-12 && i < b)))) {
        best = r;
        bestStart = start;
      }
    }
    int64_t node = ready[best];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    double start = startOf(node);
    finish[node] = start + secondsOf(node);
    streamFree[streamOf(node)] = finish[node];
    order.push_back(node);
    for (int64_t next : after[node])
      if (--waiting[next] == 0)
        ready.push_back(next);
  }
  return order;
}

} // namespace sharc
