//===- ScheduleTest.cpp - deferring wgrad GEMMs past collectives ----------===//
//
// Drawn graphs list nodes in program order; `*` marks a deferrable node and
// `<-` its inputs. The random test checks the rule's guarantees on DAGs it
// draws itself.

#include "planner/Schedule.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>

using namespace sharc;

namespace {

ScheduleNode compute(std::string op, std::vector<int64_t> inputs = {},
                     bool deferrable = false) {
  ScheduleNode node;
  node.op = std::move(op);
  node.inputs = std::move(inputs);
  node.deferrable = deferrable;
  return node;
}

ScheduleNode wgrad(std::string op, std::vector<int64_t> inputs = {}) {
  return compute(std::move(op), std::move(inputs), /*deferrable=*/true);
}

ScheduleNode collective(std::string op, std::vector<int64_t> inputs) {
  ScheduleNode node = compute(std::move(op), std::move(inputs));
  node.kind = NodeKind::Collective;
  node.axis = "tp";
  return node;
}

std::vector<std::string> scheduledOps(const ScheduleGraph &graph) {
  std::vector<std::string> ops;
  for (int64_t node : scheduleOrder(graph))
    ops.push_back(graph[node].op);
  return ops;
}

using Ops = std::vector<std::string>;

} // namespace

TEST_CASE("a column-parallel backward runs wgrad beside the reduce_scatter",
          "[planner]") {
  ScheduleGraph graph = {
      compute("dgrad"),                  // 0
      wgrad("wgrad"),                    // 1*
      collective("reduce_scatter", {0}), // 2 <- dgrad
      compute("next", {2}),              // 3 <- reduce_scatter
  };
  REQUIRE(scheduledOps(graph) ==
          Ops{"dgrad", "reduce_scatter", "wgrad", "next"});
}

TEST_CASE("tensor-parallel q/k backward defers both wgrads past all_reduce",
          "[planner]") {
  ScheduleGraph graph = {
      compute("dgrad_q"),            // 0
      wgrad("wgrad_q"),              // 1*
      compute("dgrad_k"),            // 2
      wgrad("wgrad_k"),              // 3*
      compute("add", {0, 2}),        // 4 <- dgrad_q, dgrad_k
      collective("all_reduce", {4}), // 5 <- add
      compute("norm_grad", {5}),     // 6 <- all_reduce
  };
  REQUIRE(scheduledOps(graph) == Ops{"dgrad_q", "dgrad_k", "add", "all_reduce",
                                     "wgrad_q", "wgrad_k", "norm_grad"});
}

TEST_CASE("the async sequence-parallel backward overlaps both collectives",
          "[planner]") {
  // Section 2.4: the re-all-gather is issued before dgrad; wgrad needs the
  // gathered input, and runs beside the reduce_scatter of dgrad.
  ScheduleGraph graph = {
      collective("all_gather", {}),      // 0
      compute("dgrad"),                  // 1
      wgrad("wgrad", {0}),               // 2* <- all_gather
      collective("reduce_scatter", {1}), // 3 <- dgrad
      compute("norm_grad", {3}),         // 4 <- reduce_scatter
  };
  REQUIRE(scheduledOps(graph) ==
          Ops{"all_gather", "dgrad", "reduce_scatter", "wgrad", "norm_grad"});
}

TEST_CASE("a wgrad whose result a collective needs stays put", "[planner]") {
  ScheduleGraph graph = {
      compute("dgrad"),              // 0
      wgrad("wgrad"),                // 1*
      collective("all_reduce", {1}), // 2 <- wgrad (data-parallel gradient)
      compute("other"),              // 3
      collective("all_gather", {3}), // 4 <- other: independent, but later
  };
  REQUIRE(scheduledOps(graph) ==
          Ops{"dgrad", "wgrad", "all_reduce", "other", "all_gather"});
}

TEST_CASE("a wgrad read before the next collective stops at its reader",
          "[planner]") {
  ScheduleGraph graph = {
      compute("dgrad"),              // 0
      wgrad("wgrad"),                // 1*
      compute("a"),                  // 2
      compute("scale", {1}),         // 3 <- wgrad
      compute("b"),                  // 4
      collective("all_reduce", {0}), // 5 <- dgrad
  };
  REQUIRE(scheduledOps(graph) ==
          Ops{"dgrad", "a", "wgrad", "scale", "b", "all_reduce"});
}

TEST_CASE("a wgrad stops before the next layer's recompute", "[planner]") {
  // Full recompute under ddp: the bucket's all_reduce comes after the
  // whole backward; a wgrad deferred to it would keep its layer's copies
  // alive through every layer's backward after it.
  ScheduleNode copy = compute("rms_norm (copy of layer 0)");
  copy.recomputes = true;
  ScheduleGraph graph = {
      compute("dgrad"),              // 0
      wgrad("wgrad"),                // 1*
      compute("next dgrad", {0}),    // 2 <- dgrad
      copy,                          // 3
      compute("layer 0 dgrad", {2}), // 4
      collective("all_reduce", {1}), // 5 <- wgrad's bucket
  };
  REQUIRE(scheduledOps(graph) == Ops{"dgrad", "next dgrad", "wgrad",
                                     "rms_norm (copy of layer 0)",
                                     "layer 0 dgrad", "all_reduce"});
}

TEST_CASE("a wgrad with no later collective stays put", "[planner]") {
  ScheduleGraph graph = {compute("a"), wgrad("wgrad"), compute("b"),
                         compute("reader", {1})};
  REQUIRE(scheduledOps(graph) == Ops{"a", "wgrad", "b", "reader"});
}

TEST_CASE("a wgrad stops before an in-place write of what it reads",
          "[planner]") {
  ScheduleGraph graph = {
      compute("dgrad"),              // 0
      wgrad("wgrad"),                // 1* reads buffer 7
      compute("a"),                  // 2
      compute("overwrite"),          // 3 writes buffer 7, no data dep
      collective("all_reduce", {0}), // 4 <- dgrad
  };
  graph[1].reads = {7};
  graph[3].reads = {7};
  graph[3].writes = {7};
  REQUIRE(scheduledOps(graph) ==
          Ops{"dgrad", "a", "wgrad", "overwrite", "all_reduce"});
}

namespace {

/// A random DAG in program order: collectives, deferrable computes, data
/// deps to earlier nodes and a few shared buffers (some written in place).
ScheduleGraph randomGraph(std::mt19937 &rng) {
  std::uniform_int_distribution<int> sizeDist(1, 30), percent(0, 99);
  const int count = sizeDist(rng);
  ScheduleGraph graph(count);
  for (int node = 0; node < count; ++node) {
    ScheduleNode &current = graph[node];
    current.op = "n" + std::to_string(node);
    current.kind = percent(rng) < 25 ? NodeKind::Collective : NodeKind::Compute;
    current.deferrable = current.kind == NodeKind::Compute && percent(rng) < 40;
    current.recomputes = current.kind == NodeKind::Compute &&
                         !current.deferrable && percent(rng) < 10;
    for (int input = 0; input < node; ++input)
      if (percent(rng) < 12)
        current.inputs.push_back(input);
    for (int64_t buffer = 0; buffer < 4; ++buffer) {
      if (percent(rng) < 10)
        current.reads.push_back(buffer);
      if (percent(rng) < 5)
        current.writes.push_back(buffer);
    }
  }
  return graph;
}

bool mustKeepOrder(const ScheduleGraph &graph, int64_t before, int64_t after) {
  const std::vector<int64_t> &inputs = graph[after].inputs;
  return std::find(inputs.begin(), inputs.end(), before) != inputs.end() ||
         buffersConflict(graph[before], graph[after]);
}

/// The rule, restated per deferrable node: it passes only non-blockers (a
/// recomputed copy blocks) and at most one collective, and passes the first
/// collective after it unless a blocker comes first. A deferrable blocker that
/// itself passes that collective does not block: the two move together.
void checkDeferral(const ScheduleGraph &graph,
                   const std::vector<int64_t> &position, int64_t node) {
  const int64_t count = static_cast<int64_t>(graph.size());
  int64_t firstCollective = -1, firstBlocker = -1;
  for (int64_t later = node + 1; later < count; ++later)
    if (firstCollective < 0 && graph[later].kind == NodeKind::Collective)
      firstCollective = later;
  for (int64_t later = node + 1; later < count; ++later) {
    bool movesAlong = later != firstCollective && graph[later].deferrable &&
                      firstCollective >= 0 &&
                      position[firstCollective] < position[later] &&
                      later < firstCollective;
    bool blocks = mustKeepOrder(graph, node, later) || graph[later].recomputes;
    if (firstBlocker < 0 && blocks && !movesAlong)
      firstBlocker = later;
  }
  int passedCollectives = 0;
  for (int64_t later = node + 1; later < count; ++later) {
    if (position[later] > position[node])
      continue;
    REQUIRE(!mustKeepOrder(graph, node, later));
    REQUIRE(!graph[later].recomputes);
    passedCollectives += graph[later].kind == NodeKind::Collective;
  }
  REQUIRE(passedCollectives <= 1);
  bool shouldPass = firstCollective >= 0 &&
                    (firstBlocker < 0 || firstCollective < firstBlocker);
  if (shouldPass)
    REQUIRE(position[firstCollective] < position[node]);
  else
    REQUIRE(passedCollectives == 0);
  if (firstCollective < 0) // stays put: passes nothing
    for (int64_t later = node + 1; later < count; ++later)
      REQUIRE(position[later] > position[node]);
}

} // namespace

TEST_CASE("random DAGs get a topological permutation following the rule",
          "[planner]") {
  std::mt19937 rng(20240611);
  for (int trial = 0; trial < 500; ++trial) {
    ScheduleGraph graph = randomGraph(rng);
    const int64_t count = static_cast<int64_t>(graph.size());
    std::vector<int64_t> order = scheduleOrder(graph);
    REQUIRE(static_cast<int64_t>(order.size()) == count);
    std::vector<int64_t> position(count, -1);
    for (int64_t pos = 0; pos < count; ++pos) {
      REQUIRE(order[pos] >= 0);
      REQUIRE(order[pos] < count);
      REQUIRE(position[order[pos]] == -1);
      position[order[pos]] = pos;
    }
    for (int64_t a = 0; a < count; ++a)
      for (int64_t b = a + 1; b < count; ++b) {
        if (mustKeepOrder(graph, a, b))
          REQUIRE(position[a] < position[b]);
        if (!graph[a].deferrable && !graph[b].deferrable)
          REQUIRE(position[a] < position[b]);
      }
    for (int64_t node = 0; node < count; ++node)
      if (graph[node].deferrable)
        checkDeferral(graph, position, node);
  }
}

TEST_CASE("a weight gradient and the update that reads it move together",
          "[planner]") {
  // 0 dgrad, 1 wgrad*, 2 adamw* (reads 1), 3 add, 4 reduce_scatter,
  // 5 norm_grad   (* deferrable): the update would block the gradient if it
  // stayed, but it moves past the collective too.
  ScheduleGraph graph(6);
  for (int64_t i = 0; i < 6; ++i)
    graph[i].op = "n" + std::to_string(i);
  graph[1].deferrable = graph[2].deferrable = true;
  graph[2].inputs = {1};
  graph[3].inputs = {0};
  graph[4].kind = NodeKind::Collective;
  graph[4].inputs = {3};
  graph[5].inputs = {4};
  REQUIRE(scheduleOrder(graph) == std::vector<int64_t>{0, 3, 4, 1, 2, 5});
}
