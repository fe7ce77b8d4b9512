//===- Timeline.cpp - one rank's simulated step, and its Chrome trace -----===//

#include "planner/Timeline.h"
#include "planner/StepSimulation.h"
#include "planner/plan/ActivationLiveness.h"
#include "planner/plan/JsonText.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <utility>

namespace sharc {

Timeline simulate(const ScheduleGraph &graph, const StreamAssignment &streams,
                  const std::vector<int64_t> &order, const Machine &machine) {
  return simulateStep(graph, streams, order, machine, {}).ranks.front();
}

namespace {

/// Microseconds with nanosecond resolution, as Chrome's ts/dur expect.
std::string micros(double seconds) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", seconds * 1e6);
  return text;
}

void appendMetadata(std::string &json, size_t rank, const Timeline &timeline) {
  const std::string pid = std::to_string(rank);
  json += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid +
          ",\"args\":{\"name\":\"rank " + pid + "\"}},\n";
  for (size_t stream = 0; stream < timeline.busySeconds.size(); ++stream)
    json +=
        "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid +
        ",\"tid\":" + std::to_string(stream) + ",\"args\":{\"name\":" +
        plan::jsonString(plan::traceStreamName(static_cast<int64_t>(stream))) +
        "}},\n";
}

/// ",\"wait_us\":W" when the node waited for another rank, else "".
std::string waited(const Timeline &timeline, size_t node) {
  if (node >= timeline.waitSeconds.size() || !(timeline.waitSeconds[node] > 0))
    return "";
  return ",\"wait_us\":" + micros(timeline.waitSeconds[node]);
}

/// ",\"launch\":0" when the node paid no launch of its own (it rode on
/// the launch of its run of updates), else "": calibration subtracts one
/// launch per node that paid one.
std::string sharedLaunch(const Timeline &timeline, size_t node) {
  return node < timeline.sharedLaunch.size() && timeline.sharedLaunch[node]
             ? ",\"launch\":0"
             : "";
}

/// A flow arrow (Chrome's "s" and "f" events, bound to the enclosing
/// slices) from each send to the recv that waited for it.
void appendTransfers(std::string &json, const std::vector<Timeline> &perRank,
                     const std::vector<CrossRankWait> &transfers) {
  auto middle = [](const Timeline &timeline, int64_t node) {
    return 0.5 * (timeline.start[node] + timeline.end[node]);
  };
  for (size_t id = 0; id < transfers.size(); ++id) {
    const CrossRankWait &wait = transfers[id];
    if (wait.fromRank >= static_cast<int64_t>(perRank.size()) ||
        wait.toRank >= static_cast<int64_t>(perRank.size()))
      continue;
    const Timeline &from = perRank[wait.fromRank];
    const Timeline &to = perRank[wait.toRank];
    for (bool head : {false, true}) {
      const Timeline &side = head ? to : from;
      int64_t rank = head ? wait.toRank : wait.fromRank;
      int64_t node = head ? wait.toNode : wait.fromNode;
      json += std::string("{\"name\":\"transfer\",\"cat\":\"transfer\",") +
              "\"ph\":\"" + (head ? "f\",\"bp\":\"e" : "s") +
              "\",\"id\":" + std::to_string(id) +
              ",\"pid\":" + std::to_string(rank) +
              ",\"tid\":" + std::to_string(side.stream[node]) +
              ",\"ts\":" + micros(middle(side, node)) + "},\n";
    }
  }
}

void appendNodes(std::string &json, size_t rank, const Timeline &timeline,
                 const ScheduleGraph &graph) {
  for (size_t node = 0; node < timeline.start.size(); ++node) {
    if (std::isnan(timeline.start[node]))
      continue;
    const std::string op = node < graph.size() ? graph[node].op : "?";
    json += "{\"name\":" + plan::jsonString(op) + ",\"cat\":" +
            plan::jsonString(plan::traceStreamName(timeline.stream[node])) +
            ",\"ph\":\"X\",\"pid\":" + std::to_string(rank) +
            ",\"tid\":" + std::to_string(timeline.stream[node]) +
            ",\"ts\":" + micros(timeline.start[node]) +
            ",\"dur\":" + micros(timeline.end[node] - timeline.start[node]) +
            ",\"args\":{\"node\":" + std::to_string(node) +
            waited(timeline, node) + sharedLaunch(timeline, node) + "}},\n";
  }
}

/// The plan's activation bytes live at each node the rank ran, sampled as
/// it starts: its buffers live from the first node to start that touches
/// them to the last (plan/ActivationLiveness.h).
void appendLiveCounter(std::string &json, size_t rank, const Timeline &timeline,
                       const ScheduleGraph &graph, const plan::Plan &plan) {
  std::vector<size_t> started;
  for (size_t node = 0; node < timeline.start.size() && node < graph.size();
       ++node)
    if (!std::isnan(timeline.start[node]))
      started.push_back(node);
  std::stable_sort(started.begin(), started.end(), [&](size_t a, size_t b) {
    return timeline.start[a] < timeline.start[b];
  });
  std::vector<std::vector<int64_t>> touches;
  for (size_t node : started) {
    touches.push_back(graph[node].reads);
    touches.back().insert(touches.back().end(), graph[node].writes.begin(),
                          graph[node].writes.end());
  }
  std::vector<int64_t> live = plan::liveActivationBytesOfSteps(plan, touches);
  for (size_t step = 0; step < started.size(); ++step)
    json += plan::activationCounterEvent(std::to_string(rank),
                                         micros(timeline.start[started[step]]),
                                         live[step]);
}

} // namespace

std::string chromeTrace(const std::vector<Timeline> &perRank,
                        const ScheduleGraph &graph,
                        const std::vector<CrossRankWait> &transfers,
                        const plan::Plan *plan) {
  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t rank = 0; rank < perRank.size(); ++rank) {
    appendMetadata(json, rank, perRank[rank]);
    appendNodes(json, rank, perRank[rank], graph);
    if (plan)
      appendLiveCounter(json, rank, perRank[rank], graph, *plan);
  }
  appendTransfers(json, perRank, transfers);
  return plan::closeTraceEvents(std::move(json));
}

} // namespace sharc
