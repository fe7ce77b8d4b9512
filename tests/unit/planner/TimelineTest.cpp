//===- TimelineTest.cpp - simulated steps and their Chrome trace ----------===//
//
// A machine of round numbers (1e12 FLOP/s, no launch overhead, a 1e9 B/s
// tp link without latency) makes a node of 1e9 flops or 1e6 comm bytes take
// exactly 1 ms.

#include "planner/Timeline.h"
#include "planner/Schedule.h"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <string>

using namespace sharc;

namespace {

constexpr int64_t kMilli = 1'000'000'000; // flops, or comm bytes, per ms

Machine roundMachine() {
  Machine machine;
  machine.name = "round";
  machine.peakFlops = {{"bf16", 1.0e12}};
  machine.memoryBandwidth = 1.0e12;
  machine.launchOverhead = 0.0;
  machine.links = {{"tp", {0.0, 1.0e9}}};
  return machine;
}

ScheduleNode gemm(std::string op, double ms, std::vector<int64_t> inputs = {},
                  bool deferrable = false) {
  ScheduleNode node;
  node.op = std::move(op);
  node.flops = static_cast<int64_t>(ms * kMilli);
  node.inputs = std::move(inputs);
  node.deferrable = deferrable;
  return node;
}

ScheduleNode allReduce(double ms, std::vector<int64_t> inputs) {
  ScheduleNode node;
  node.op = "all_reduce";
  node.kind = NodeKind::Collective;
  node.axis = "tp";
  node.commBytes = static_cast<int64_t>(ms * kMilli / 1000);
  node.inputs = std::move(inputs);
  return node;
}

Timeline run(const ScheduleGraph &graph, const std::vector<int64_t> &order) {
  StreamAssignment streams = assignStreams(graph, order);
  return simulate(graph, streams, order, roundMachine());
}

std::vector<int64_t> programOrder(const ScheduleGraph &graph) {
  std::vector<int64_t> order(graph.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int64_t>(i);
  return order;
}

} // namespace

TEST_CASE("wgrad runs beside the all_reduce of dgrad", "[planner]") {
  //  compute  |dgrad 0-2|wgrad 2-4|
  //  comm               |all_reduce 2-5 |
  ScheduleGraph graph = {gemm("dgrad", 2), gemm("wgrad", 2, {}, true),
                         allReduce(3, {0})};
  Timeline timeline = run(graph, scheduleOrder(graph));
  REQUIRE(timeline.start[0] == Approx(0.0));
  REQUIRE(timeline.end[0] == Approx(2e-3));
  REQUIRE(timeline.start[2] == Approx(2e-3));
  REQUIRE(timeline.end[2] == Approx(5e-3));
  REQUIRE(timeline.start[1] == Approx(2e-3));
  REQUIRE(timeline.end[1] == Approx(4e-3));
  REQUIRE(timeline.stepSeconds == Approx(5e-3));
  REQUIRE(timeline.overlapSeconds == Approx(2e-3));
  REQUIRE(timeline.serialSeconds == Approx(7e-3));
  REQUIRE(timeline.busySeconds[kComputeStream] == Approx(4e-3));
  REQUIRE(timeline.busySeconds[kCommStream] == Approx(3e-3));
  REQUIRE(!timeline.deadlocked);
}

TEST_CASE("deferring the q/k wgrads shortens the step by the overlap",
          "[planner]") {
  ScheduleGraph graph = {
      gemm("dgrad_q", 2),        gemm("wgrad_q", 2, {}, true),
      gemm("dgrad_k", 2),        gemm("wgrad_k", 2, {}, true),
      gemm("add", 1, {0, 2}),    allReduce(3, {4}),
      gemm("norm_grad", 1, {5}),
  };
  // Program order: all compute first, the all_reduce 9-12, norm 12-13.
  Timeline serial = run(graph, programOrder(graph));
  REQUIRE(serial.stepSeconds == Approx(13e-3));
  REQUIRE(serial.overlapSeconds == Approx(0.0));
  // Scheduled: dgrad_q 0-2, dgrad_k 2-4, add 4-5, all_reduce 5-8 beside
  // wgrad_q 5-7 and wgrad_k 7-9, norm_grad 9-10.
  Timeline overlapped = run(graph, scheduleOrder(graph));
  REQUIRE(overlapped.start[5] == Approx(5e-3));
  REQUIRE(overlapped.start[6] == Approx(9e-3));
  REQUIRE(overlapped.stepSeconds == Approx(10e-3));
  REQUIRE(overlapped.overlapSeconds == Approx(3e-3));
  REQUIRE(overlapped.serialSeconds == Approx(13e-3));
}

TEST_CASE("a node waits for the event even when its stream is free",
          "[planner]") {
  //  compute  |a 0-1|          |b 4-5|
  //  comm           |ar 1-4 |
  ScheduleGraph graph = {gemm("a", 1), allReduce(3, {0}), gemm("b", 1, {1})};
  Timeline timeline = run(graph, programOrder(graph));
  REQUIRE(timeline.start[2] == Approx(4e-3));
  REQUIRE(timeline.stepSeconds == Approx(5e-3));
  REQUIRE(timeline.overlapSeconds == Approx(0.0));
}

TEST_CASE("a wait on an event nobody signals is reported as a deadlock",
          "[planner]") {
  ScheduleGraph graph = {gemm("a", 1), gemm("b", 1)};
  StreamAssignment streams = assignStreams(graph, {0, 1});
  streams.waits[1] = {0};
  streams.numEvents = 1;
  Timeline timeline = simulate(graph, streams, {0, 1}, roundMachine());
  REQUIRE(timeline.deadlocked);
  REQUIRE(timeline.stepSeconds == Approx(1e-3));
}

TEST_CASE("the Chrome trace is JSON with one event per node and rank",
          "[planner]") {
  ScheduleGraph graph = {gemm("dgrad", 2), gemm("wgrad \"q\"", 2, {}, true),
                         allReduce(3, {0})};
  Timeline timeline = run(graph, scheduleOrder(graph));
  std::string json = chromeTrace({timeline, timeline}, graph);
  YAML::Node root = YAML::Load(json);
  YAML::Node events = root["traceEvents"];
  REQUIRE(events.IsSequence());
  // Per rank: process_name, two thread_names, three nodes.
  REQUIRE(events.size() == 2 * (3 + 3));
  int complete = 0;
  for (const YAML::Node &event : events) {
    if (event["ph"].as<std::string>() == "M")
      continue;
    ++complete;
    if (event["pid"].as<int>() != 1 ||
        event["name"].as<std::string>() != "all_reduce")
      continue;
    REQUIRE(event["tid"].as<int>() == kCommStream);
    REQUIRE(event["ts"].as<double>() == Approx(2000.0));
    REQUIRE(event["dur"].as<double>() == Approx(3000.0));
  }
  REQUIRE(complete == 6);
  REQUIRE(events[1]["name"].as<std::string>() == "thread_name");
  REQUIRE(events[1]["args"]["name"].as<std::string>() == "compute");
  REQUIRE(events[2]["args"]["name"].as<std::string>() == "communication");
  REQUIRE(events[4]["name"].as<std::string>() == "wgrad \"q\"");
}

TEST_CASE("given the plan, the Chrome trace counts the activations live as "
          "each node starts",
          "[planner]") {
  //  compute  |a 0-1|          |b 4-5|
  //  comm           |ar 1-4 |
  // a writes x (1 MiB), ar reads x and writes y (0.5 MiB), b reads y and
  // writes a gradient, which is not an activation.
  ScheduleGraph graph = {gemm("a", 1), allReduce(3, {0}), gemm("b", 1, {1})};
  graph[0].writes = {0};
  graph[1].reads = {0};
  graph[1].writes = {1};
  graph[2].reads = {1};
  graph[2].writes = {2};
  plan::Plan plan;
  for (auto [bytes, region] :
       {std::pair{int64_t{1} << 20, plan::Region::Activation},
        {int64_t{1} << 19, plan::Region::Activation},
        {int64_t{256}, plan::Region::Gradient}}) {
    plan::Buffer buffer;
    buffer.id = static_cast<int64_t>(plan.buffers.size());
    buffer.numBytes = bytes;
    buffer.region = region;
    plan.buffers.push_back(buffer);
  }
  Timeline timeline = run(graph, programOrder(graph));
  YAML::Node events =
      YAML::Load(chromeTrace({timeline}, graph, {}, &plan))["traceEvents"];
  std::vector<std::pair<double, double>> samples; // (ts us, MiB)
  for (const YAML::Node &event : events)
    if (event["ph"].as<std::string>() == "C") {
      REQUIRE(event["name"].as<std::string>() == "activations MiB");
      samples.emplace_back(event["ts"].as<double>(),
                           event["args"]["live"].as<double>());
    }
  REQUIRE(samples.size() == 3);
  CHECK(samples[0].first == Approx(0.0));
  CHECK(samples[0].second == Approx(1.0));
  CHECK(samples[1].first == Approx(1000.0));
  CHECK(samples[1].second == Approx(1.5));
  CHECK(samples[2].first == Approx(4000.0));
  CHECK(samples[2].second == Approx(0.5));
  // Without the plan, no counter.
  REQUIRE(chromeTrace({timeline}, graph).find("\"ph\":\"C\"") ==
          std::string::npos);
}
