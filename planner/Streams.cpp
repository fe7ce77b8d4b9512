//===- Streams.cpp - streams, events and cross-stream lifetimes -----------===//
//
// What a stream knows is a vector clock: knows[s][t] is the latest position
// on stream t that stream s is ordered after (its own last node for t == s,
// -1 for nothing). Waiting for a node u merges u's clock at its end, which is
// how a wait covers every earlier node of u's stream and, transitively, what
// u's stream had waited for. Both assignStreams (to drop covered waits) and
// extendLifetimes (to find rules (a) and (b)'s positions from the waits
// actually made) walk the order with these clocks.
//
//===----------------------------------------------------------------------===//

#include "planner/Streams.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <unordered_map>

namespace sharc {
namespace {

using Clock = std::vector<int64_t>;

void mergeInto(Clock &into, const Clock &from) {
  for (size_t t = 0; t < into.size(); ++t)
    into[t] = std::max(into[t], from[t]);
}

int64_t numStreamsOf(const std::vector<int64_t> &stream) {
  int64_t count = kCommStream + 1;
  for (int64_t id : stream)
    count = std::max(count, id + 1);
  return count;
}

/// Per node, the nodes it must run after: its inputs and its buffer
/// conflicts with earlier nodes of `order` (see Streams.h).
std::vector<std::vector<int64_t>>
dependencies(const ScheduleGraph &graph, const std::vector<int64_t> &order) {
  std::vector<std::vector<int64_t>> deps(graph.size());
  std::unordered_map<int64_t, int64_t> lastWriter;
  std::unordered_map<int64_t, std::vector<int64_t>> readersSinceWrite;
  for (int64_t node : order) {
    const ScheduleNode &current = graph[node];
    std::vector<int64_t> &mine = deps[node];
    mine = current.inputs;
    for (int64_t id : current.reads)
      if (auto it = lastWriter.find(id); it != lastWriter.end())
        mine.push_back(it->second);
    for (int64_t id : current.writes) {
      if (auto it = lastWriter.find(id); it != lastWriter.end())
        mine.push_back(it->second);
      const std::vector<int64_t> &readers = readersSinceWrite[id];
      mine.insert(mine.end(), readers.begin(), readers.end());
    }
    for (int64_t id : current.reads)
      readersSinceWrite[id].push_back(node);
    for (int64_t id : current.writes) {
      lastWriter[id] = node;
      readersSinceWrite[id].clear();
    }
    std::erase(mine, node); // reading and writing one buffer is no dep
  }
  return deps;
}

/// The producers `node` must wait for on streams other than its own, given
/// what its stream knows: the latest needed producer per stream, if unknown.
std::vector<int64_t> neededWaits(int64_t node, const std::vector<int64_t> &deps,
                                 const Clock &knows,
                                 const StreamAssignment &result) {
  const int64_t stream = result.stream[node];
  std::vector<int64_t> latest(knows.size(), -1);
  for (int64_t producer : deps) {
    assert(result.position[producer] < result.position[node] &&
           "the order is topological");
    int64_t other = result.stream[producer];
    if (other == stream)
      continue;
    if (latest[other] < 0 ||
        result.position[producer] > result.position[latest[other]])
      latest[other] = producer;
  }
  std::vector<int64_t> waits;
  for (size_t other = 0; other < latest.size(); ++other)
    if (latest[other] >= 0 && result.position[latest[other]] > knows[other])
      waits.push_back(latest[other]);
  return waits;
}

/// Numbers the events of the producers waited for by producer position and
/// fills signals and waits from the per-node producer lists.
void numberEvents(const std::vector<int64_t> &order,
                  const std::vector<std::vector<int64_t>> &waitedProducers,
                  StreamAssignment &result) {
  std::vector<bool> signalsEvent(order.size(), false);
  for (const std::vector<int64_t> &producers : waitedProducers)
    for (int64_t producer : producers)
      signalsEvent[producer] = true;
  std::vector<int64_t> eventOf(order.size(), -1);
  for (int64_t node : order)
    if (signalsEvent[node]) {
      eventOf[node] = result.numEvents++;
      result.signals[node].push_back(eventOf[node]);
    }
  for (size_t node = 0; node < order.size(); ++node) {
    for (int64_t producer : waitedProducers[node])
      result.waits[node].push_back(eventOf[producer]);
    std::sort(result.waits[node].begin(), result.waits[node].end());
  }
}

} // namespace

StreamAssignment assignStreams(const ScheduleGraph &graph,
                               const std::vector<int64_t> &order) {
  const size_t count = graph.size();
  assert(order.size() == count && "the order is a permutation of the nodes");
  StreamAssignment result;
  result.stream.resize(count);
  result.position.resize(count);
  result.waits.resize(count);
  result.signals.resize(count);
  for (size_t node = 0; node < count; ++node)
    result.stream[node] =
        graph[node].kind == NodeKind::Collective ? kCommStream : kComputeStream;
  for (size_t pos = 0; pos < count; ++pos)
    result.position[order[pos]] = static_cast<int64_t>(pos);

  std::vector<std::vector<int64_t>> deps = dependencies(graph, order);
  const int64_t numStreams = numStreamsOf(result.stream);
  std::vector<Clock> knows(numStreams, Clock(numStreams, -1));
  std::vector<Clock> clockAtEnd(count);
  std::vector<std::vector<int64_t>> waitedProducers(count);
  for (int64_t node : order) {
    const int64_t stream = result.stream[node];
    const Clock knowsNothing(numStreams, -1);
    waitedProducers[node] = neededWaits(
        node, deps[node], graph[node].writesLoss ? knowsNothing : knows[stream],
        result);
    for (int64_t producer : waitedProducers[node])
      mergeInto(knows[stream], clockAtEnd[producer]);
    knows[stream][stream] = result.position[node];
    clockAtEnd[node] = knows[stream];
  }
  numberEvents(order, waitedProducers, result);
  return result;
}

namespace {

/// For each node, the clock of its stream once its waits are done (before
/// it runs), replayed from the assignment's waits and signals.
std::vector<Clock> clocksAtStart(const StreamAssignment &streams,
                                 const std::vector<int64_t> &order) {
  const int64_t numStreams = numStreamsOf(streams.stream);
  std::vector<int64_t> producerOf(streams.numEvents, -1);
  for (size_t node = 0; node < streams.signals.size(); ++node)
    for (int64_t event : streams.signals[node])
      producerOf[event] = static_cast<int64_t>(node);
  std::vector<Clock> knows(numStreams, Clock(numStreams, -1));
  std::vector<Clock> atStart(order.size()), atEnd(order.size());
  for (int64_t node : order) {
    Clock &clock = knows[streams.stream[node]];
    for (int64_t event : streams.waits[node])
      if (producerOf[event] >= 0 && !atEnd[producerOf[event]].empty())
        mergeInto(clock, atEnd[producerOf[event]]);
    atStart[node] = clock;
    clock[streams.stream[node]] = streams.position[node];
    atEnd[node] = clock;
  }
  return atStart;
}

} // namespace

void extendLifetimes(const ScheduleGraph &graph,
                     const StreamAssignment &streams,
                     std::vector<BufferRequest> &buffers) {
  const int64_t count = static_cast<int64_t>(graph.size());
  std::vector<int64_t> order(count);
  for (int64_t node = 0; node < count; ++node)
    order[streams.position[node]] = node;
  std::vector<Clock> atStart = clocksAtStart(streams, order);

  // Rule (a): the first compute node that knows a collective finished. A
  // stream's knowledge only grows, so one pass per collective stream.
  std::map<int64_t, int64_t> lastStepOf, firstStepOf; // by buffer id
  for (int64_t node : order) {
    const int64_t stream = streams.stream[node];
    if (stream == kComputeStream)
      continue;
    const int64_t pos = streams.position[node];
    int64_t waitedAt = count - 1;
    for (int64_t later = pos + 1; later < count; ++later) {
      int64_t other = order[later];
      if (streams.stream[other] == kComputeStream &&
          atStart[other][stream] >= pos) {
        waitedAt = later;
        break;
      }
    }
    // Rule (b): the latest compute node this collective runs after.
    const int64_t startsAfter =
        std::max<int64_t>(atStart[node][kComputeStream], 0);
    const ScheduleNode &collective = graph[node];
    for (const std::vector<int64_t> *ids :
         {&collective.reads, &collective.writes})
      for (int64_t id : *ids)
        lastStepOf[id] = std::max(lastStepOf[id], waitedAt);
    for (int64_t id : collective.writes) {
      auto [it, inserted] = firstStepOf.emplace(id, startsAfter);
      if (!inserted)
        it->second = std::min(it->second, startsAfter);
    }
  }
  for (BufferRequest &request : buffers) {
    if (auto it = lastStepOf.find(request.id); it != lastStepOf.end())
      request.lastStep = std::max(request.lastStep, it->second);
    if (auto it = firstStepOf.find(request.id); it != firstStepOf.end())
      request.firstStep = std::min(request.firstStep, it->second);
  }
}

} // namespace sharc
