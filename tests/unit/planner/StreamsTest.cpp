//===- StreamsTest.cpp - events and lifetimes across two streams ----------===//
//
// Drawn cases give node positions (the schedule order), streams (c compute,
// m communication) and buffers by letter. The random test runs an
// independent two-stream simulator with random durations and checks the
// rules are sufficient: nodes running at the same time never touch the same
// bytes after assignBuffers on the extended lifetimes.

#include "planner/Streams.h"
#include "planner/Schedule.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>

using namespace sharc;

namespace {

ScheduleNode node(NodeKind kind, std::vector<int64_t> inputs,
                  std::vector<int64_t> reads, std::vector<int64_t> writes,
                  bool deferrable = false) {
  ScheduleNode result;
  result.op = kind == NodeKind::Collective ? "all_reduce" : "matmul";
  result.kind = kind;
  result.inputs = std::move(inputs);
  result.reads = std::move(reads);
  result.writes = std::move(writes);
  result.deferrable = deferrable;
  return result;
}

constexpr NodeKind C = NodeKind::Compute;
constexpr NodeKind M = NodeKind::Collective;

/// Lifetimes from touches: first to last position of a node touching the
/// buffer, as the IR layer builds them.
std::vector<BufferRequest>
touchLifetimes(const ScheduleGraph &graph, const StreamAssignment &streams,
               const std::map<int64_t, int64_t> &sizeOf) {
  std::vector<BufferRequest> requests;
  for (const auto &[id, numBytes] : sizeOf) {
    BufferRequest request{id, numBytes, INT64_MAX, -1};
    for (size_t n = 0; n < graph.size(); ++n)
      for (const std::vector<int64_t> *ids :
           {&graph[n].reads, &graph[n].writes})
        if (std::count(ids->begin(), ids->end(), id)) {
          request.firstStep = std::min(request.firstStep, streams.position[n]);
          request.lastStep = std::max(request.lastStep, streams.position[n]);
        }
    requests.push_back(request);
  }
  return requests;
}

std::pair<int64_t, int64_t> stepsOf(const std::vector<BufferRequest> &requests,
                                    int64_t id) {
  for (const BufferRequest &request : requests)
    if (request.id == id)
      return {request.firstStep, request.lastStep};
  FAIL("no request for buffer " << id);
  return {};
}

using Steps = std::pair<int64_t, int64_t>;
using Ids = std::vector<int64_t>;

} // namespace

TEST_CASE("a column-parallel backward keeps dgrad alive under all_reduce",
          "[planner]") {
  // Buffers: 0 dx (dgrad's result), 1 dx reduced, 2 dw, 3 norm_grad's result.
  ScheduleGraph graph = {
      node(C, {}, {}, {0}),       // 0 dgrad      -> pos 0, c
      node(C, {}, {}, {2}, true), // 1 wgrad*     -> pos 2, c
      node(M, {0}, {0}, {1}),     // 2 all_reduce -> pos 1, m
      node(C, {2}, {1}, {3}),     // 3 norm_grad  -> pos 3, c
  };
  std::vector<int64_t> order = scheduleOrder(graph);
  REQUIRE(order == Ids{0, 2, 1, 3});
  StreamAssignment streams = assignStreams(graph, order);
  REQUIRE(streams.stream == Ids{0, 0, 1, 0});
  REQUIRE(streams.position == Ids{0, 2, 1, 3});
  REQUIRE(streams.numEvents == 2);
  REQUIRE(streams.signals == std::vector<Ids>{{0}, {}, {1}, {}});
  REQUIRE(streams.waits == std::vector<Ids>{{}, {}, {0}, {1}});

  //  pos:  0 dgrad   1 all_reduce   2 wgrad   3 norm_grad
  //  dx:   [0, 1] -> [0, 3]  the all_reduce may read it until norm_grad
  //  dxr:  [1, 3] -> [0, 3]  wgrad may still run while all_reduce writes
  std::vector<BufferRequest> requests =
      touchLifetimes(graph, streams, {{0, 64}, {1, 64}, {2, 64}, {3, 64}});
  REQUIRE(stepsOf(requests, 0) == Steps{0, 1});
  REQUIRE(stepsOf(requests, 2) == Steps{2, 2});
  extendLifetimes(graph, streams, requests);
  REQUIRE(stepsOf(requests, 0) == Steps{0, 3});
  REQUIRE(stepsOf(requests, 1) == Steps{0, 3});
  REQUIRE(stepsOf(requests, 2) == Steps{2, 2});
  REQUIRE(stepsOf(requests, 3) == Steps{3, 3});
  // dw no longer reuses dx's bytes while the all_reduce reads them.
  BufferAssignment offsets = assignBuffers(requests, 64);
  REQUIRE(offsets.offsets[2] != offsets.offsets[0]);
  REQUIRE(offsets.peakBytes == 192);
}

TEST_CASE("a later wait covers earlier producers of the same stream",
          "[planner]") {
  // Buffers: 0 a, 1 ar1's result, 2 b, 3 ar2's result.
  ScheduleGraph graph = {
      node(C, {}, {}, {0}),        // 0 a
      node(M, {0}, {0}, {1}),      // 1 ar1 <- a
      node(C, {}, {}, {2}),        // 2 b
      node(M, {2}, {2}, {3}),      // 3 ar2 <- b
      node(C, {1, 3}, {1, 3}, {}), // 4 d   <- ar1, ar2: one wait, on ar2
      node(C, {1}, {1}, {}),       // 5 e   <- ar1: covered by d's wait
  };
  std::vector<int64_t> order = {0, 1, 2, 3, 4, 5};
  StreamAssignment streams = assignStreams(graph, order);
  REQUIRE(streams.numEvents == 3); // a, b, ar2; nobody waits on ar1 itself
  REQUIRE(streams.signals == std::vector<Ids>{{0}, {}, {1}, {2}, {}, {}});
  REQUIRE(streams.waits == std::vector<Ids>{{}, {0}, {}, {1}, {2}, {}});

  std::vector<BufferRequest> requests =
      touchLifetimes(graph, streams, {{0, 8}, {1, 8}, {2, 8}, {3, 8}});
  extendLifetimes(graph, streams, requests);
  REQUIRE(stepsOf(requests, 0) == Steps{0, 4}); // ar1 known done at d
  REQUIRE(stepsOf(requests, 1) == Steps{0, 5}); // ar1 ran after a only
  REQUIRE(stepsOf(requests, 2) == Steps{2, 4});
  REQUIRE(stepsOf(requests, 3) == Steps{2, 4}); // ar2 ran after b
}

TEST_CASE("the loss's writer waits for its producers itself", "[planner]") {
  // As above, but e writes the step's loss: evaluation runs e without d,
  // so e's wait on ar1 is made although d's covers it.
  ScheduleGraph graph = {
      node(C, {}, {}, {0}),        // 0 a
      node(M, {0}, {0}, {1}),      // 1 ar1 <- a
      node(C, {}, {}, {2}),        // 2 b
      node(M, {2}, {2}, {3}),      // 3 ar2 <- b
      node(C, {1, 3}, {1, 3}, {}), // 4 d   <- ar1, ar2: one wait, on ar2
      node(C, {1}, {1}, {4}),      // 5 e   <- ar1, writes the loss
  };
  graph[5].writesLoss = true;
  StreamAssignment streams = assignStreams(graph, {0, 1, 2, 3, 4, 5});
  REQUIRE(streams.numEvents == 4);
  REQUIRE(streams.signals == std::vector<Ids>{{0}, {1}, {2}, {3}, {}, {}});
  REQUIRE(streams.waits == std::vector<Ids>{{}, {0}, {}, {2}, {3}, {1}});
}

TEST_CASE("a collective nobody waits for keeps its buffers to the end",
          "[planner]") {
  ScheduleGraph graph = {
      node(C, {}, {}, {0}),   // 0 a
      node(M, {0}, {0}, {1}), // 1 all_reduce <- a, result read by no one
      node(C, {}, {}, {2}),   // 2 f
      node(C, {2}, {2}, {3}), // 3 g
  };
  std::vector<int64_t> order = {0, 1, 2, 3};
  StreamAssignment streams = assignStreams(graph, order);
  REQUIRE(streams.waits == std::vector<Ids>{{}, {0}, {}, {}});
  std::vector<BufferRequest> requests =
      touchLifetimes(graph, streams, {{0, 8}, {1, 8}, {2, 8}, {3, 8}});
  extendLifetimes(graph, streams, requests);
  REQUIRE(stepsOf(requests, 0) == Steps{0, 3});
  REQUIRE(stepsOf(requests, 1) == Steps{0, 3});
  REQUIRE(stepsOf(requests, 2) == Steps{2, 3}); // compute only: untouched
}

TEST_CASE("an in-place write waits for a collective still reading",
          "[planner]") {
  ScheduleGraph graph = {
      node(C, {}, {}, {0}),     // 0 a writes x
      node(M, {0}, {0}, {1}),   // 1 all_gather reads x
      node(C, {0}, {0}, {0}),   // 2 scale x in place: no data dep on 1
      node(C, {1, 2}, {1}, {}), // 3 reads the gathered result
  };
  std::vector<int64_t> order = {0, 1, 2, 3};
  StreamAssignment streams = assignStreams(graph, order);
  REQUIRE(streams.waits == std::vector<Ids>{{}, {0}, {1}, {}});
  REQUIRE(streams.signals == std::vector<Ids>{{0}, {1}, {}, {}});
}

namespace {

struct RandomCase {
  ScheduleGraph graph;
  std::map<int64_t, int64_t> sizeOf; ///< bytes per buffer id
};

/// Every node writes a fresh buffer, or (sometimes) its first input's
/// buffer in place, and reads its inputs' buffers.
RandomCase randomCase(std::mt19937 &rng) {
  std::uniform_int_distribution<int> countDist(2, 40), percent(0, 99),
      bytesDist(1, 1000);
  RandomCase result;
  const int count = countDist(rng);
  std::vector<int64_t> resultBuffer(count);
  for (int n = 0; n < count; ++n) {
    ScheduleNode current;
    current.op = "n" + std::to_string(n);
    current.kind = percent(rng) < 35 ? M : C;
    current.deferrable = current.kind == C && percent(rng) < 30;
    for (int input = 0; input < n; ++input)
      if (percent(rng) < 10)
        current.inputs.push_back(input);
    for (int64_t input : current.inputs)
      current.reads.push_back(resultBuffer[input]);
    resultBuffer[n] = n;
    if (!current.reads.empty() && percent(rng) < 20)
      resultBuffer[n] = current.reads.front();
    else
      result.sizeOf[n] = bytesDist(rng);
    current.writes.push_back(resultBuffer[n]);
    result.graph.push_back(current);
  }
  return result;
}

struct Interval {
  double start = NAN, end = NAN;
};

/// Two streams, each in order; a node starts when its stream is free and
/// its events are signalled.
std::vector<Interval> simulateStreams(const StreamAssignment &streams,
                                      const std::vector<int64_t> &order,
                                      std::mt19937 &rng) {
  std::uniform_real_distribution<double> duration(0.1, 3.0);
  std::vector<Interval> times(order.size());
  std::vector<double> eventTime(streams.numEvents, NAN);
  double freeAt[2] = {0.0, 0.0};
  std::vector<int64_t> queue[2];
  for (int64_t n : order)
    queue[streams.stream[n]].push_back(n);
  size_t next[2] = {0, 0};
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < 2; ++s)
      for (; next[s] < queue[s].size(); ++next[s]) {
        int64_t n = queue[s][next[s]];
        double start = freeAt[s];
        bool ready = true;
        for (int64_t event : streams.waits[n]) {
          ready = ready && !std::isnan(eventTime[event]);
          start = std::max(start, eventTime[event]);
        }
        if (!ready)
          break;
        times[n] = {start, start + duration(rng)};
        freeAt[s] = times[n].end;
        for (int64_t event : streams.signals[n])
          eventTime[event] = times[n].end;
        moved = true;
      }
  }
  return times;
}

bool writes(const ScheduleNode &n, int64_t id) {
  return std::count(n.writes.begin(), n.writes.end(), id) != 0;
}

/// Counts pairs of nodes running at once that touch the same bytes, when
/// one of them writes; data deps that run out of order count too.
int countHazards(const RandomCase &c, const std::vector<Interval> &times,
                 const std::vector<BufferRequest> &requests,
                 const BufferAssignment &offsets) {
  std::map<int64_t, std::pair<int64_t, int64_t>> bytesOf;
  for (size_t i = 0; i < requests.size(); ++i)
    bytesOf[requests[i].id] = {offsets.offsets[i],
                               offsets.offsets[i] + requests[i].numBytes};
  int hazards = 0;
  const ScheduleGraph &g = c.graph;
  for (size_t a = 0; a < g.size(); ++a) {
    for (int64_t input : g[a].inputs)
      hazards += times[input].end > times[a].start;
    for (size_t b = a + 1; b < g.size(); ++b) {
      if (!(times[a].start < times[b].end && times[b].start < times[a].end))
        continue;
      for (const std::vector<int64_t> *x : {&g[a].reads, &g[a].writes})
        for (const std::vector<int64_t> *y : {&g[b].reads, &g[b].writes})
          for (int64_t idA : *x)
            for (int64_t idB : *y) {
              auto [lowA, highA] = bytesOf.at(idA);
              auto [lowB, highB] = bytesOf.at(idB);
              bool shared = lowA < highB && lowB < highA;
              bool bothRead =
                  idA == idB && !writes(g[a], idA) && !writes(g[b], idB);
              hazards += shared && !bothRead;
            }
    }
  }
  return hazards;
}

} // namespace

TEST_CASE("extended lifetimes keep concurrent nodes off each other's bytes",
          "[planner]") {
  std::mt19937 rng(7);
  int trialsWithHazardsUnextended = 0;
  for (int trial = 0; trial < 400; ++trial) {
    RandomCase c = randomCase(rng);
    std::vector<int64_t> order = scheduleOrder(c.graph);
    StreamAssignment streams = assignStreams(c.graph, order);
    // Every event has one producer and some waiter; every wait a producer.
    std::vector<int> signalled(streams.numEvents, 0), waited(streams.numEvents);
    for (size_t n = 0; n < c.graph.size(); ++n) {
      for (int64_t event : streams.signals[n])
        ++signalled[event];
      for (int64_t event : streams.waits[n])
        ++waited[event];
    }
    for (int64_t event = 0; event < streams.numEvents; ++event) {
      REQUIRE(signalled[event] == 1);
      REQUIRE(waited[event] >= 1);
    }
    std::vector<BufferRequest> requests =
        touchLifetimes(c.graph, streams, c.sizeOf);
    BufferAssignment unextended = assignBuffers(requests, 1);
    extendLifetimes(c.graph, streams, requests);
    BufferAssignment extended = assignBuffers(requests, 1);
    bool collidesUnextended = false;
    for (int run = 0; run < 5; ++run) {
      std::vector<Interval> times = simulateStreams(streams, order, rng);
      for (const Interval &interval : times)
        REQUIRE(!std::isnan(interval.start)); // no deadlock
      REQUIRE(countHazards(c, times, requests, extended) == 0);
      collidesUnextended |= countHazards(c, times, requests, unextended) > 0;
    }
    trialsWithHazardsUnextended += collidesUnextended;
  }
  // The rules are needed: without them the same cases collide.
  REQUIRE(trialsWithHazardsUnextended > 20);
}
