//===- ListSchedule.cpp - an order that hides collectives -----------------===//

#include "planner/ListSchedule.h"

#include "planner/Schedule.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>
#include <set>

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

/// Each arena's bytes live as nodes are taken one after another.
class LiveBytes {
public:
  using Bytes = std::array<int64_t, ArenaBuffers::kArenas>;

  LiveBytes(const ScheduleGraph &graph, const ArenaBuffers &arena)
      : arena_(arena), touched_(graph.size()) {
    for (size_t i = 0; i < graph.size(); ++i) {
      std::set<int64_t> bases;
      for (const auto *ids : {&graph[i].reads, &graph[i].writes})
        for (int64_t id : *ids) {
          auto view = arena.baseOf.find(id);
          int64_t base = view == arena.baseOf.end() ? id : view->second;
          if (arena.buffers.count(base))
            bases.insert(base);
        }
      touched_[i].assign(bases.begin(), bases.end());
      for (int64_t base : bases)
        ++touchesLeft_[base];
    }
  }

  /// While node i runs: what is live with its buffers.
  Bytes during(int64_t i) const {
    Bytes sum = live_;
    for (int64_t base : touched_[i])
      if (!isLive_.count(base))
        add(sum, base, 1);
    return sum;
  }
  /// After node i, all arenas together: less the buffers it touches last.
  int64_t after(int64_t i) const {
    Bytes sum = during(i);
    for (int64_t base : touched_[i])
      if (touchesLeft_.at(base) == 1)
        add(sum, base, -1);
    int64_t total = 0;
    for (int64_t bytes : sum)
      total += bytes;
    return total;
  }
  void take(int64_t i) {
    for (int64_t base : touched_[i]) {
      if (isLive_.insert(base).second)
        add(live_, base, 1);
      if (--touchesLeft_[base] == 0)
        add(live_, base, -1);
    }
  }

private:
  void add(Bytes &sum, int64_t base, int64_t sign) const {
    const ArenaBuffers::Sized &buffer = arena_.buffers.at(base);
    sum[static_cast<size_t>(buffer.arena)] += sign * buffer.bytes;
  }

  const ArenaBuffers &arena_;
  std::vector<std::vector<int64_t>> touched_; ///< per node, its bases
  std::map<int64_t, int64_t> touchesLeft_;
  std::set<int64_t> isLive_; ///< ever taken (freed ones stay in it)
  Bytes live_{};
};

} // namespace

std::vector<int64_t> peakLiveBytes(const ScheduleGraph &graph,
                                   const std::vector<int64_t> &order,
                                   const ArenaBuffers &arena) {
  LiveBytes live(graph, arena);
  std::vector<int64_t> peak(ArenaBuffers::kArenas, 0);
  for (int64_t node : order) {
    LiveBytes::Bytes during = live.during(node);
    for (size_t k = 0; k < peak.size(); ++k)
      peak[k] = std::max(peak[k], during[k]);
    live.take(node);
  }
  return peak;
}

std::vector<int64_t> latencyHidingOrder(const ScheduleGraph &graph,
                                        const std::vector<double> &seconds,
                                        const ArenaBuffers *arena) {
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
  // The memory bound: what the default order keeps live at its peak.
  std::optional<LiveBytes> live;
  std::vector<int64_t> limit;
  if (arena) {
    live.emplace(graph, *arena);
    limit = peakLiveBytes(graph, scheduleOrder(graph), *arena);
  }
  // A ready node's standing, computed once a pick.
  struct Candidate {
    double start;
    bool fits;     ///< within the memory bound (always, without one)
    int64_t after; ///< bytes live after it (with a bound)
  };
  auto candidate = [&](int64_t i) {
    Candidate c{startOf(i), true, 0};
    if (live) {
      LiveBytes::Bytes during = live->during(i);
      for (size_t k = 0; k < limit.size(); ++k)
        c.fits = c.fits && during[k] <= limit[k];
      if (!c.fits)
        c.after = live->after(i);
    }
    return c;
  };
  while (!ready.empty()) {
    size_t best = 0;
    Candidate top = candidate(ready[0]);
    for (size_t r = 1; r < ready.size(); ++r) {
      int64_t i = ready[r], b = ready[best];
      Candidate c = candidate(i);
      bool better;
      if (c.fits != top.fits) {
        // A node within the memory bound first.
        better = c.fits;
      } else if (!c.fits && c.after != top.after) {
        // Neither is: the one that leaves fewer bytes live.
        better = c.after < top.after;
      } else {
        // Earliest start; then the longest path to the end; then program
        // order. Starts within a nanosecond count as equal (sums of
        // doubles).
        bool earlier = c.start < top.start - 1e-9;
        bool tie = !earlier && c.start <= top.start + 1e-9;
        better = earlier ||
                 (tie && (remaining[i] > remaining[b] + 1e-12 ||
                          (remaining[i] >= remaining[b] - 1e-12 && i < b)));
      }
      if (better) {
        best = r;
        top = c;
      }
    }
    int64_t node = ready[best];
    if (live)
      live->take(node);
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
