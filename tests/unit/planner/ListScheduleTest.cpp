//===- ListScheduleTest.cpp - the latency-hiding order --------------------===//
//
// Drawn graphs in program order with each node's predicted time (the
// simulated step checked against program order's), and random DAGs on
// which every data dependency and buffer conflict must keep its order: the
// order computes what program order does.

#include "planner/ListSchedule.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>

using namespace sharc;

namespace {

ScheduleNode compute(std::string op, std::vector<int64_t> inputs = {}) {
  ScheduleNode node;
  node.op = std::move(op);
  node.inputs = std::move(inputs);
  return node;
}

ScheduleNode collective(std::string op, std::vector<int64_t> inputs) {
  ScheduleNode node = compute(std::move(op), std::move(inputs));
  node.kind = NodeKind::Collective;
  node.axis = "tp";
  return node;
}

std::vector<std::string> opsIn(const ScheduleGraph &graph,
                               const std::vector<int64_t> &order) {
  std::vector<std::string> ops;
  for (int64_t index : order)
    ops.push_back(graph[index].op);
  return ops;
}

/// The step's length when each stream runs its nodes in `order` (a node
/// starts when its stream is free and its predecessors in `order` are done).
double simulatedStep(const ScheduleGraph &graph,
                     const std::vector<double> &seconds,
                     const std::vector<int64_t> &order) {
  std::vector<double> finish(graph.size(), 0.0);
  double streamFree[2] = {0.0, 0.0};
  std::vector<int64_t> position(graph.size());
  for (size_t p = 0; p < order.size(); ++p)
    position[order[p]] = static_cast<int64_t>(p);
  double end = 0.0;
  for (int64_t node : order) {
    int s = graph[node].kind == NodeKind::Collective ? 1 : 0;
    double start = streamFree[s];
    for (int64_t other = 0; other < static_cast<int64_t>(graph.size());
         ++other) {
      bool dependency = std::count(graph[node].inputs.begin(),
                                   graph[node].inputs.end(), other) > 0 ||
                        buffersConflict(graph[other], graph[node]);
      if (dependency && position[other] < position[node])
        start = std::max(start, finish[other]);
    }
    finish[node] = start + seconds[node];
    streamFree[s] = finish[node];
    end = std::max(end, finish[node]);
  }
  return end;
}

} // namespace

TEST_CASE("independent compute fills the wait for a collective", "[planner]") {
  // A GEMM, the collective of its output, the consumer of that, and a
  // weight gradient nothing near needs, in program order. On the compute
  // stream the consumer would wait 2 s for the collective with the weight
  // gradient queued behind it; the list order runs the weight gradient in
  // that wait.
  ScheduleGraph graph{compute("matmul"), collective("all_gather", {0}),
                      compute("next", {1}), compute("wgrad")};
  std::vector<double> seconds{1.0, 2.0, 1.0, 1.0};
  std::vector<int64_t> order = latencyHidingOrder(graph, seconds);
  CHECK(opsIn(graph, order) ==
        std::vector<std::string>{"matmul", "all_gather", "wgrad", "next"});
  CHECK(simulatedStep(graph, seconds, order) == 4.0);
  CHECK(simulatedStep(graph, seconds, {0, 1, 2, 3}) == 5.0);
}

TEST_CASE("a buffer written in place keeps its readers before it",
          "[planner]") {
  // `update` writes buffer 7 that `read` reads: however early it could
  // start, it stays after `read`, and `late` (reading 7 after the write)
  // after it.
  ScheduleGraph graph{compute("read"), compute("update"), compute("late")};
  graph[0].reads = {7};
  graph[1].reads = {7};
  graph[1].writes = {7};
  graph[2].reads = {7};
  std::vector<int64_t> order = latencyHidingOrder(graph, {5.0, 1.0, 1.0});
  CHECK(opsIn(graph, order) ==
        std::vector<std::string>{"read", "update", "late"});
}

TEST_CASE("random DAGs keep every data dependency and buffer conflict",
          "[planner]") {
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> sizeDist(1, 40), percent(0, 99);
  std::uniform_real_distribution<double> time(0.1, 3.0);
  for (int trial = 0; trial < 400; ++trial) {
    const int count = sizeDist(rng);
    ScheduleGraph graph(count);
    std::vector<double> seconds;
    for (int node = 0; node < count; ++node) {
      graph[node].op = "n" + std::to_string(node);
      graph[node].kind =
          percent(rng) < 25 ? NodeKind::Collective : NodeKind::Compute;
      for (int input = 0; input < node; ++input)
        if (percent(rng) < 12)
          graph[node].inputs.push_back(input);
      for (int64_t buffer = 0; buffer < 4; ++buffer) {
        if (percent(rng) < 10)
          graph[node].reads.push_back(buffer);
        if (percent(rng) < 5)
          graph[node].writes.push_back(buffer);
      }
      seconds.push_back(time(rng));
    }
    // Half the trials bound the memory: the order must be as valid.
    ArenaBuffers arena;
    for (int64_t buffer = 0; buffer < 4; ++buffer)
      arena.buffers[buffer] = {.bytes = 1 + buffer, .arena = buffer % 2};
    std::vector<int64_t> order =
        latencyHidingOrder(graph, seconds, trial % 2 == 0 ? &arena : nullptr);
    REQUIRE(static_cast<int>(order.size()) == count);
    std::vector<int64_t> position(count, -1);
    for (int pos = 0; pos < count; ++pos) {
      REQUIRE(position[order[pos]] == -1);
      position[order[pos]] = pos;
    }
    for (int a = 0; a < count; ++a)
      for (int b = a + 1; b < count; ++b) {
        bool input =
            std::count(graph[b].inputs.begin(), graph[b].inputs.end(), a) > 0;
        if (input || buffersConflict(graph[a], graph[b]))
          REQUIRE(position[a] < position[b]);
      }
  }
}

TEST_CASE("live bytes count each arena, a view as its slab", "[planner]") {
  // Buffer 10 (100 bytes, arena 0) is written by `a` and read through its
  // view 20 by `c`; buffer 11 (30 bytes, arena 1) lives in `b` alone;
  // buffer 99 (a parameter) counts nowhere.
  ScheduleGraph graph{compute("a"), compute("b"), compute("c")};
  graph[0].writes = {10};
  graph[1].writes = {11};
  graph[1].reads = {99};
  graph[2].reads = {20};
  ArenaBuffers arena;
  arena.baseOf[20] = 10;
  arena.buffers[10] = {.bytes = 100, .arena = 0};
  arena.buffers[11] = {.bytes = 30, .arena = 1};
  CHECK(peakLiveBytes(graph, {0, 1, 2}, arena) ==
        std::vector<int64_t>{100, 30});
  // `b` between the slab's writer and reader: its 30 bytes in the other
  // arena do not add to the slab's 100.
  CHECK(peakLiveBytes(graph, {0, 2, 1}, arena) ==
        std::vector<int64_t>{100, 30});
  ArenaBuffers oneArena = arena;
  oneArena.buffers[11].arena = 0;
  CHECK(peakLiveBytes(graph, {0, 1, 2}, oneArena) ==
        std::vector<int64_t>{130, 0});
  CHECK(peakLiveBytes(graph, {0, 2, 1}, oneArena) ==
        std::vector<int64_t>{100, 0});
}

TEST_CASE("a gather ready early waits while its buffer would pass the "
          "default order's peak",
          "[planner]") {
  // Two parameter gathers (ZeRO-3), each of a 100-byte buffer its layer
  // alone reads. The second gather can start at 1 s on the communication
  // stream, the first layer only at 2 s (after the embedding): the
  // unbounded order puts the gather first and holds both buffers; bounded
  // by the default order's peak (one buffer and the first layer's output)
  // it gathers after the first layer has read its buffer.
  ScheduleGraph graph{compute("embed"), collective("gather1", {}),
                      compute("layer1", {0, 1}), collective("gather2", {}),
                      compute("layer2", {2, 3})};
  graph[1].writes = {1};
  graph[2].reads = {1};
  graph[2].writes = {5};
  graph[3].writes = {2};
  graph[4].reads = {2, 5};
  std::vector<double> seconds{2.0, 1.0, 1.0, 1.0, 1.0};
  ArenaBuffers arena;
  arena.buffers[1] = {.bytes = 100, .arena = 0};
  arena.buffers[2] = {.bytes = 100, .arena = 0};
  arena.buffers[5] = {.bytes = 1, .arena = 0};
  std::vector<int64_t> unbounded = latencyHidingOrder(graph, seconds);
  std::vector<int64_t> bounded = latencyHidingOrder(graph, seconds, &arena);
  CHECK(opsIn(graph, unbounded) == std::vector<std::string>{"embed", "gather1",
                                                            "gather2", "layer1",
                                                            "layer2"});
  CHECK(peakLiveBytes(graph, unbounded, arena)[0] == 201);
  CHECK(opsIn(graph, bounded) == std::vector<std::string>{"embed", "gather1",
                                                          "layer1", "gather2",
                                                          "layer2"});
  CHECK(peakLiveBytes(graph, bounded, arena)[0] == 101);
  CHECK(peakLiveBytes(graph, {0, 1, 2, 3, 4}, arena)[0] == 101);
}
