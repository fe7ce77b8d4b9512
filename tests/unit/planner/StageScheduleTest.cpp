//===- StageScheduleTest.cpp - one schedule per pipeline stage ------------===//
//
// Two stages interleaved in program order (as sharc-pipeline-schedule
// leaves them): each is ordered and streamed on its own, the merged order
// lists stage 0 then stage 1, events are renumbered, and the arena lets the
// stages' buffers share bytes.

#include "planner/StageSchedule.h"
#include "planner/Schedule.h"

#include <catch2/catch.hpp>

using namespace sharc;

namespace {

ScheduleNode node(NodeKind kind, std::vector<int64_t> inputs,
                  std::vector<int64_t> reads, std::vector<int64_t> writes) {
  ScheduleNode result;
  result.op = kind == NodeKind::Collective ? "send" : "matmul";
  result.kind = kind;
  result.inputs = std::move(inputs);
  result.reads = std::move(reads);
  result.writes = std::move(writes);
  return result;
}

constexpr NodeKind C = NodeKind::Compute;
constexpr NodeKind M = NodeKind::Collective;

void planOne(const ScheduleGraph &graph, std::vector<int64_t> &order,
             StreamAssignment &streams) {
  order = scheduleOrder(graph);
  streams = assignStreams(graph, order);
}

} // namespace

TEST_CASE("each stage is planned alone and listed after the one before",
          "[planner]") {
  // Stage 0: 0 matmul -> a (buffer 0), 2 send a. Stage 1: 1 recv -> b
  // (buffer 1), 3 matmul b -> c (buffer 2). In program order they
  // interleave; the sends and recvs are collectives.
  ScheduleGraph graph = {
      node(C, {}, {}, {0}),   // 0: stage 0
      node(M, {}, {}, {1}),   // 1: stage 1, recv
      node(M, {0}, {0}, {}),  // 2: stage 0, send
      node(C, {1}, {1}, {2}), // 3: stage 1
  };
  std::vector<int64_t> stageOf = {0, 1, 0, 1};
  std::vector<int64_t> order;
  StreamAssignment streams;
  std::vector<StagePlan> stages =
      planByStage(graph, stageOf, 2, planOne, order, streams);
  REQUIRE(stages.size() == 2);
  REQUIRE(order == std::vector<int64_t>{0, 2, 1, 3});
  REQUIRE(streams.position == std::vector<int64_t>{0, 2, 1, 3});
  REQUIRE(streams.stream == std::vector<int64_t>{kComputeStream, kCommStream,
                                                 kCommStream, kComputeStream});
  // Stage 0: the send waits for the matmul (event 0); stage 1: the matmul
  // waits for the recv (its first event, renumbered after stage 0's one).
  REQUIRE(streams.numEvents == 2);
  REQUIRE(streams.signals[0] == std::vector<int64_t>{0});
  REQUIRE(streams.waits[2] == std::vector<int64_t>{0});
  REQUIRE(streams.signals[1] == std::vector<int64_t>{1});
  REQUIRE(streams.waits[3] == std::vector<int64_t>{1});

  // Lifetimes in merged positions: a (stage 0) ends before b begins, so
  // best fit reuses its bytes: the arena is one stage's, not the sum.
  std::vector<BufferRequest> requests = {
      {0, 64, 0, 1}, {1, 64, 2, 3}, {2, 64, 3, 3}};
  extendStageLifetimes(graph, stages, requests);
  REQUIRE(requests[0].lastStep <= 1);
  REQUIRE(requests[1].firstStep >= 2);
  BufferAssignment assignment = assignBuffers(requests, 64);
  REQUIRE(assignment.peakBytes == 128);
}

TEST_CASE("without stages the whole graph is planned as before", "[planner]") {
  ScheduleGraph graph = {node(C, {}, {}, {0}), node(M, {0}, {0}, {1}),
                         node(C, {1}, {1}, {2})};
  std::vector<int64_t> order, expectedOrder;
  StreamAssignment streams, expected;
  REQUIRE(planByStage(graph, {}, 1, planOne, order, streams).empty());
  planOne(graph, expectedOrder, expected);
  REQUIRE(order == expectedOrder);
  REQUIRE(streams.waits == expected.waits);
  REQUIRE(streams.signals == expected.signals);
}
