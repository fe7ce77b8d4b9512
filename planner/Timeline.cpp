//===- Timeline.cpp - a step simulated on two streams ---------------------===//
//
// The simulation advances each stream as far as its events allow and
// repeats until no stream moves. A node's times depend only on its stream
// predecessor and the nodes it waits for, so the interleaving of the
// passes does not change the result.
//
//===----------------------------------------------------------------------===//

#include "planner/Timeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace sharc {
namespace {

constexpr double kNotRun = std::numeric_limits<double>::quiet_NaN();

/// Time at least two streams are busy. Intervals of one stream never
/// overlap, so the number of open intervals is the number of busy streams.
double overlapOf(const Timeline &timeline) {
  std::vector<std::pair<double, int>> edges; // (time, +1 open / -1 close)
  for (size_t node = 0; node < timeline.start.size(); ++node)
    if (timeline.end[node] > timeline.start[node]) {
      edges.emplace_back(timeline.start[node], +1);
      edges.emplace_back(timeline.end[node], -1);
    }
  // At equal times closes sort first: touching intervals do not overlap.
  std::sort(edges.begin(), edges.end());
  double overlap = 0.0, previous = 0.0;
  int busy = 0;
  for (const auto &[time, delta] : edges) {
    if (busy >= 2)
      overlap += time - previous;
    busy += delta;
    previous = time;
  }
  return overlap;
}

/// Runs the ready nodes at the head of `queue` from `next` on; returns
/// whether any ran.
bool advanceStream(const ScheduleGraph &graph, const StreamAssignment &streams,
                   const Machine &machine, const std::vector<int64_t> &queue,
                   size_t &next, double &freeAt, std::vector<double> &eventTime,
                   Timeline &timeline) {
  bool ran = false;
  for (; next < queue.size(); ++next) {
    const int64_t node = queue[next];
    double start = freeAt;
    for (int64_t event : streams.waits[node]) {
      if (event < 0 || event >= static_cast<int64_t>(eventTime.size()) ||
          std::isnan(eventTime[event]))
        return ran;
      start = std::max(start, eventTime[event]);
    }
    timeline.start[node] = start;
    timeline.end[node] = start + nodeSeconds(machine, graph[node]);
    freeAt = timeline.end[node];
    for (int64_t event : streams.signals[node])
      if (event >= 0 && event < static_cast<int64_t>(eventTime.size()))
        eventTime[event] = timeline.end[node];
    ran = true;
  }
  return ran;
}

void summarize(Timeline &timeline) {
  for (size_t node = 0; node < timeline.start.size(); ++node) {
    if (std::isnan(timeline.start[node])) {
      timeline.deadlocked = true;
      continue;
    }
    double seconds = timeline.end[node] - timeline.start[node];
    timeline.busySeconds[timeline.stream[node]] += seconds;
    timeline.serialSeconds += seconds;
    timeline.stepSeconds = std::max(timeline.stepSeconds, timeline.end[node]);
  }
  timeline.overlapSeconds = overlapOf(timeline);
}

} // namespace

Timeline simulate(const ScheduleGraph &graph, const StreamAssignment &streams,
                  const std::vector<int64_t> &order, const Machine &machine) {
  Timeline timeline;
  timeline.start.assign(graph.size(), kNotRun);
  timeline.end.assign(graph.size(), kNotRun);
  timeline.stream = streams.stream;
  int64_t numStreams = kCommStream + 1;
  for (int64_t stream : streams.stream)
    numStreams = std::max(numStreams, stream + 1);
  timeline.busySeconds.assign(numStreams, 0.0);

  std::vector<std::vector<int64_t>> queues(numStreams);
  for (int64_t node : order)
    queues[streams.stream[node]].push_back(node);
  std::vector<size_t> next(numStreams, 0);
  std::vector<double> freeAt(numStreams, 0.0);
  std::vector<double> eventTime(streams.numEvents, kNotRun);
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (int64_t stream = 0; stream < numStreams; ++stream)
      progressed |=
          advanceStream(graph, streams, machine, queues[stream], next[stream],
                        freeAt[stream], eventTime, timeline);
  }
  summarize(timeline);
  return timeline;
}

namespace {

std::string jsonString(const std::string &text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      quoted += escaped;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string streamName(int64_t stream) {
  if (stream == kComputeStream)
    return "compute";
  if (stream == kCommStream)
    return "communication";
  return "stream " + std::to_string(stream);
}

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
    json += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid +
            ",\"tid\":" + std::to_string(stream) + ",\"args\":{\"name\":" +
            jsonString(streamName(static_cast<int64_t>(stream))) + "}},\n";
}

void appendNodes(std::string &json, size_t rank, const Timeline &timeline,
                 const ScheduleGraph &graph) {
  for (size_t node = 0; node < timeline.start.size(); ++node) {
    if (std::isnan(timeline.start[node]))
      continue;
    const std::string op = node < graph.size() ? graph[node].op : "?";
    json += "{\"name\":" + jsonString(op) +
            ",\"cat\":" + jsonString(streamName(timeline.stream[node])) +
            ",\"ph\":\"X\",\"pid\":" + std::to_string(rank) +
            ",\"tid\":" + std::to_string(timeline.stream[node]) +
            ",\"ts\":" + micros(timeline.start[node]) +
            ",\"dur\":" + micros(timeline.end[node] - timeline.start[node]) +
            ",\"args\":{\"node\":" + std::to_string(node) + "}},\n";
  }
}

} // namespace

std::string chromeTrace(const std::vector<Timeline> &perRank,
                        const ScheduleGraph &graph) {
  std::string json = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t rank = 0; rank < perRank.size(); ++rank) {
    appendMetadata(json, rank, perRank[rank]);
    appendNodes(json, rank, perRank[rank], graph);
  }
  // JSON allows no trailing comma after the last event.
  if (json.size() >= 2 && json.compare(json.size() - 2, 2, ",\n") == 0)
    json.erase(json.size() - 2, 1);
  return json + "]}\n";
}

} // namespace sharc
