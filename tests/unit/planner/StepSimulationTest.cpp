//===- StepSimulationTest.cpp - every rank's step, simulated together -----===//
//
// Hand-drawn pipelines on the round machine of TimelineTest (1e12 FLOP/s,
// no launch overhead: 1e9 flops take 1 ms; a pp link of 1e9 B/s, so 1e6
// bytes take 1 ms, or free when the test sends none). The expected steps
// are the schedules' textbook makespans, the bubble (P-1)/(M+P-1) of equal
// stages (Huang et al., GPipe, 2019; Narayanan et al., 2021, for 1F1B).

#include "planner/StepSimulation.h"
#include "planner/StageSchedule.h"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

using namespace sharc;

namespace {

constexpr int64_t kMilli = 1'000'000'000; // flops per ms

Machine roundMachine() {
  Machine machine;
  machine.name = "round";
  machine.peakFlops = {{"bf16", 1.0e12}};
  machine.memoryBandwidth = 1.0e12;
  machine.launchOverhead = 0.0;
  machine.links = {{"tp", {0.0, 1.0e9}}, {"pp", {0.0, 1.0e9}}};
  return machine;
}

/// Builds a graph stage by stage; each stage's nodes in its program order.
struct PipelineBuilder {
  ScheduleGraph graph;
  std::vector<int64_t> stageOf;

  int64_t add(ScheduleNode node, int64_t stage) {
    node.stage = stage;
    graph.push_back(std::move(node));
    stageOf.push_back(stage);
    return static_cast<int64_t>(graph.size()) - 1;
  }
  int64_t compute(const std::string &op, double ms, int64_t stage,
                  std::vector<int64_t> inputs) {
    ScheduleNode node;
    node.op = op;
    node.flops = static_cast<int64_t>(ms * kMilli);
    node.inputs = std::move(inputs);
    return add(std::move(node), stage);
  }
  int64_t transfer(bool send, int64_t stage, int64_t peer, int64_t tag,
                   int64_t bytes, std::vector<int64_t> inputs) {
    ScheduleNode node;
    node.op = send ? "send" : "recv";
    node.kind = NodeKind::Collective;
    node.axis = "pp";
    node.commBytes = send ? bytes : 0;
    node.peer = peer;
    node.tag = tag;
    node.inputs = std::move(inputs);
    return add(std::move(node), stage);
  }
  /// Each stage planned alone in its program order, as the emitter does.
  StepSimulation simulate(const MeshShape &mesh, int64_t numStages) const {
    PlanOne programOrder = [](const ScheduleGraph &stage,
                              std::vector<int64_t> &order,
                              StreamAssignment &streams) {
      order.resize(stage.size());
      for (size_t i = 0; i < stage.size(); ++i)
        order[i] = static_cast<int64_t>(i);
      streams = assignStreams(stage, order);
    };
    std::vector<int64_t> order;
    StreamAssignment streams;
    planByStage(graph, stageOf, numStages, programOrder, order, streams);
    return simulateStep(graph, streams, order, roundMachine(), mesh);
  }
};

/// Tags: forward activations and backward gradients of microbatch m
/// between stage s and s+1.
int64_t forwardTag(int64_t s, int64_t m) { return 1000 * s + m; }
int64_t backwardTag(int64_t s, int64_t m) { return 1000 * s + 500 + m; }

/// P stages, M microbatches, a forward of `forwardMs` and a backward of
/// `backwardMs` per stage and microbatch, transfers of `bytes`. Stage s
/// runs `steps(s)`: (microbatch, is backward) in its schedule's order.
struct PipelineRun {
  ScheduleGraph graph;
  StepSimulation sim;
};

template <typename Steps>
PipelineRun pipeline(int64_t stages, double forwardMs, double backwardMs,
                     int64_t bytes, Steps steps) {
  PipelineBuilder b;
  for (int64_t s = 0; s < stages; ++s) {
    std::map<int64_t, int64_t> forwardOf;
    for (auto [m, backward] : steps(s)) {
      if (!backward) {
        std::vector<int64_t> in;
        if (s > 0)
          in.push_back(
              b.transfer(false, s, s - 1, forwardTag(s - 1, m), 0, {}));
        int64_t f = b.compute("forward", forwardMs, s, in);
        forwardOf[m] = f;
        if (s + 1 < stages)
          b.transfer(true, s, s + 1, forwardTag(s, m), bytes, {f});
        continue;
      }
      std::vector<int64_t> in = {forwardOf[m]};
      if (s + 1 < stages)
        in.push_back(b.transfer(false, s, s + 1, backwardTag(s, m), 0, {}));
      int64_t g = b.compute("backward", backwardMs, s, in);
      if (s > 0)
        b.transfer(true, s, s - 1, backwardTag(s - 1, m), bytes, {g});
    }
  }
  StepSimulation sim = b.simulate({{"pp", stages}}, stages);
  return {std::move(b.graph), std::move(sim)};
}

using Steps = std::vector<std::pair<int64_t, bool>>;

Steps gpipe(int64_t numMicrobatches) {
  Steps steps;
  for (int64_t m = 0; m < numMicrobatches; ++m)
    steps.push_back({m, false});
  for (int64_t m = 0; m < numMicrobatches; ++m)
    steps.push_back({m, true});
  return steps;
}

/// seed-system.md 4.4: min(P-s-1, M) warm-up forwards, then one forward
/// one backward, then the remaining backwards.
Steps oneFOneB(int64_t stage, int64_t stages, int64_t numMicrobatches) {
  int64_t warmup = std::min(stages - stage - 1, numMicrobatches);
  Steps steps;
  int64_t forward = 0, backward = 0;
  for (; forward < warmup; ++forward)
    steps.push_back({forward, false});
  for (; forward < numMicrobatches; ++forward, ++backward) {
    steps.push_back({forward, false});
    steps.push_back({backward, true});
  }
  for (; backward < numMicrobatches; ++backward)
    steps.push_back({backward, true});
  return steps;
}

} // namespace

TEST_CASE("GPipe on equal stages: the bubble is (P-1)/(M+P-1)", "[planner]") {
  for (auto [stages, microbatches] :
       {std::pair<int64_t, int64_t>{2, 4}, {4, 8}, {3, 1}}) {
    StepSimulation sim = pipeline(stages, 1, 2, 0, [&](int64_t) {
                           return gpipe(microbatches);
                         }).sim;
    INFO("P " << stages << ", M " << microbatches);
    REQUIRE(!sim.deadlocked);
    REQUIRE(sim.stepSeconds == Approx((microbatches + stages - 1) * 3e-3));
    REQUIRE(sim.stageBusySeconds.size() == static_cast<size_t>(stages));
    for (double busy : sim.stageBusySeconds)
      REQUIRE(busy == Approx(microbatches * 3e-3));
    double analytic = static_cast<double>(stages - 1) /
                      static_cast<double>(microbatches + stages - 1);
    REQUIRE(sim.bubble == Approx(analytic).margin(1e-12));
  }
}

TEST_CASE("1F1B on equal stages: the same bubble as GPipe", "[planner]") {
  for (auto [stages, microbatches] :
       {std::pair<int64_t, int64_t>{2, 4}, {4, 8}, {4, 2}}) {
    StepSimulation sim = pipeline(stages, 1, 2, 0, [&](int64_t s) {
                           return oneFOneB(s, stages, microbatches);
                         }).sim;
    INFO("P " << stages << ", M " << microbatches);
    REQUIRE(!sim.deadlocked);
    REQUIRE(sim.stepSeconds == Approx((microbatches + stages - 1) * 3e-3));
    double analytic = static_cast<double>(stages - 1) /
                      static_cast<double>(microbatches + stages - 1);
    REQUIRE(sim.bubble == Approx(analytic).margin(1e-12));
  }
}

TEST_CASE("a recv ends when its send has crossed the link", "[planner]") {
  //  stage 0  compute |f 0-1|
  //           comm          |send 1-2|
  //  stage 1  comm    |recv 0-2 (waits 2)|
  //           compute                     |g 2-3|
  PipelineBuilder b;
  int64_t f = b.compute("f", 1, 0, {});
  int64_t send = b.transfer(true, 0, 1, 7, 1'000'000, {f});
  int64_t recv = b.transfer(false, 1, 0, 7, 0, {});
  int64_t g = b.compute("g", 1, 1, {recv});
  StepSimulation sim = b.simulate({{"pp", 2}}, 2);
  REQUIRE(!sim.deadlocked);
  REQUIRE(sim.stageOfRank == std::vector<int64_t>{0, 1});
  REQUIRE(sim.ranks[0].end[send] == Approx(2e-3));
  REQUIRE(sim.ranks[1].start[recv] == Approx(0.0));
  REQUIRE(sim.ranks[1].end[recv] == Approx(2e-3));
  REQUIRE(sim.ranks[1].waitSeconds[recv] == Approx(2e-3));
  REQUIRE(sim.ranks[1].start[g] == Approx(2e-3));
  REQUIRE(sim.stepSeconds == Approx(3e-3));
  // Each rank runs its own stage's nodes only.
  REQUIRE(std::isnan(sim.ranks[0].start[g]));
  REQUIRE(std::isnan(sim.ranks[1].start[f]));
  REQUIRE(sim.transfers.size() == 1);
  REQUIRE(sim.transfers[0].fromRank == 0);
  REQUIRE(sim.transfers[0].fromNode == send);
  REQUIRE(sim.transfers[0].toRank == 1);
  REQUIRE(sim.transfers[0].toNode == recv);
  // Stage 0 computes 1 of 3 ms, stage 1 too: both idle 2/3.
  REQUIRE(sim.bubble == Approx(2.0 / 3.0));
}

TEST_CASE("a collective starts when the last rank of its group arrives",
          "[planner]") {
  // An all_reduce over pp that every rank runs, after 3 ms of compute on
  // stage 0 and 1 ms on stage 1, all on one stream: both end at 3 + 1 ms,
  // stage 1 waited 2.
  PipelineBuilder b;
  int64_t slow = b.compute("slow", 3, 0, {});
  int64_t fast = b.compute("fast", 1, 1, {});
  ScheduleNode reduce;
  reduce.op = "all_reduce";
  reduce.kind = NodeKind::Collective;
  reduce.axis = "pp";
  reduce.commBytes = 1'000'000;
  b.graph.push_back(reduce);
  int64_t all = static_cast<int64_t>(b.graph.size()) - 1;
  std::vector<int64_t> order = {slow, fast, all};
  StreamAssignment streams;
  streams.stream.assign(3, kComputeStream);
  streams.waits.assign(3, {});
  streams.signals.assign(3, {});
  streams.position = order;
  // {pp 2, tp 2}: ranks 0, 1 are stage 0, ranks 2, 3 stage 1.
  StepSimulation sim = simulateStep(b.graph, streams, order, roundMachine(),
                                    {{"pp", 2}, {"tp", 2}});
  REQUIRE(!sim.deadlocked);
  REQUIRE(sim.ranks.size() == 4);
  for (const Timeline &rank : sim.ranks)
    REQUIRE(rank.end[all] == Approx(4e-3));
  REQUIRE(sim.ranks[0].start[all] == Approx(3e-3));
  REQUIRE(sim.ranks[3].start[all] == Approx(1e-3));
  REQUIRE(sim.ranks[3].waitSeconds[all] == Approx(2e-3));
  REQUIRE(sim.ranks[0].waitSeconds[all] == Approx(0.0));
  REQUIRE(sim.stepSeconds == Approx(4e-3));
}

TEST_CASE("ranks of a plan without stages predict the one-rank step",
          "[planner]") {
  // tp-like: a GEMM, its all_reduce over tp, then dp's over "dp,tp" beside
  // a deferred wgrad.
  ScheduleGraph graph(4);
  graph[0].op = "dgrad";
  graph[0].flops = 2 * kMilli;
  graph[1].op = "all_reduce";
  graph[1].kind = NodeKind::Collective;
  graph[1].axis = "tp";
  graph[1].commBytes = 3'000'000;
  graph[1].inputs = {0};
  graph[2].op = "wgrad";
  graph[2].flops = 2 * kMilli;
  graph[3] = graph[1];
  graph[3].axis = "dp,tp";
  graph[3].inputs = {2};
  Machine machine = roundMachine();
  machine.links["dp"] = {0.0, 1.0e9};
  std::vector<int64_t> order = {0, 1, 2, 3};
  StreamAssignment streams = assignStreams(graph, order);
  Timeline one = simulate(graph, streams, order, machine);
  StepSimulation all =
      simulateStep(graph, streams, order, machine, {{"dp", 2}, {"tp", 2}});
  //  compute |dgrad 0-2|wgrad 2-4|
  //  comm              |ar tp 2-5 |ar dp,tp 5-8|
  REQUIRE(one.stepSeconds == Approx(8e-3));
  REQUIRE(all.ranks.size() == 4);
  REQUIRE(all.stepSeconds == one.stepSeconds);
  for (const Timeline &rank : all.ranks) {
    REQUIRE(rank.start == one.start);
    REQUIRE(rank.end == one.end);
  }
}

TEST_CASE("a run of optimizer updates pays one launch, as the runtime "
          "groups it",
          "[planner]") {
  // An all_reduce on the communication stream, then three updates of 1 ms
  // each; the third reads the all_reduce's result, so it waits for it and
  // starts its own launch (executor findAdamWRuns' rule).
  ScheduleGraph graph(4);
  graph[0].op = "all_reduce";
  graph[0].kind = NodeKind::Collective;
  graph[0].axis = "tp";
  graph[0].commBytes = 1'000'000;
  for (int64_t node : {1, 2, 3}) {
    graph[node].op = "adamw";
    graph[node].flops = kMilli;
  }
  graph[3].inputs = {0};
  Machine machine = roundMachine();
  machine.launchOverhead = 1e-3;
  std::vector<int64_t> order = {0, 1, 2, 3};
  StreamAssignment streams = assignStreams(graph, order);
  REQUIRE(streams.waits[3].size() == 1);
  Timeline timeline = simulate(graph, streams, order, machine);
  //  compute |launch + adamw 0-2|adamw 2-3|launch + adamw 3-5|
  REQUIRE(timeline.end[1] == Approx(2e-3));
  REQUIRE(timeline.end[2] == Approx(3e-3));
  REQUIRE(timeline.end[3] == Approx(5e-3));
  // Other ops in a row each pay their launch.
  for (int64_t node : {1, 2, 3})
    graph[node].op = "add";
  streams = assignStreams(graph, order);
  REQUIRE(simulate(graph, streams, order, machine).end[3] == Approx(6e-3));
}

TEST_CASE("the trace shows every rank and an arrow per transfer", "[planner]") {
  PipelineRun run =
      pipeline(2, 1, 2, 1'000'000, [](int64_t) { return gpipe(2); });
  const StepSimulation &sim = run.sim;
  REQUIRE(!sim.deadlocked);
  // Forward and backward of each microbatch cross once.
  REQUIRE(sim.transfers.size() == 4);
  YAML::Node root =
      YAML::Load(chromeTrace(sim.ranks, run.graph, sim.transfers));
  int starts = 0, finishes = 0, waited = 0;
  std::set<int> pids;
  for (const YAML::Node &event : root["traceEvents"]) {
    std::string phase = event["ph"].as<std::string>();
    starts += phase == "s";
    finishes += phase == "f";
    if (phase == "X") {
      pids.insert(event["pid"].as<int>());
      waited += event["args"]["wait_us"] ? 1 : 0;
    }
  }
  REQUIRE(pids == std::set<int>{0, 1});
  REQUIRE(starts == 4);
  REQUIRE(finishes == 4);
  // Stage 1's first recv waits for stage 0's forward and send.
  REQUIRE(waited > 0);
}
