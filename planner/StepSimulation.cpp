//===- StepSimulation.cpp - every rank's step, simulated together ---------===//
//
// The simulation advances every stream of every rank as far as its events,
// its collectives' groups and its recvs' sends allow, and repeats until no
// stream moves. A node's times depend only on its stream predecessor, its
// events and its peers' nodes, so the order of the passes does not change
// the result; ranks that run the same nodes at the same times (every rank
// of a plan without stages) give the single-rank timeline exactly.
//
//===----------------------------------------------------------------------===//

#include "planner/StepSimulation.h"
#include "planner/plan/UpdateRuns.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace sharc {
namespace {

constexpr double kNotRun = std::numeric_limits<double>::quiet_NaN();

bool isTransfer(const ScheduleNode &node) {
  return node.op == "send" || node.op == "recv";
}

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

/// Totals of a rank's timeline over the nodes it runs; one that never
/// ended is a deadlock and counts in none of them.
void summarize(Timeline &timeline, const std::vector<bool> &runs) {
  for (size_t node = 0; node < timeline.start.size(); ++node) {
    if (!runs[node])
      continue;
    if (std::isnan(timeline.end[node])) {
      timeline.start[node] = kNotRun;
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

class Simulator {
public:
  Simulator(const ScheduleGraph &graph, const StreamAssignment &streams,
            const std::vector<int64_t> &order, const Machine &machine,
            const MeshShape &mesh);
  StepSimulation run();

private:
  struct Stream {
    std::vector<int64_t> queue; ///< this rank's nodes on the stream, in order
    size_t next = 0;            ///< the first node not finished
    double freeAt = 0.0;
    /// A transfer group that has started: its end in `queue` and its start.
    size_t groupEnd = 0;
    double groupStart = kNotRun;
  };
  struct Rank {
    std::vector<int64_t> coords; ///< per mesh axis
    int64_t stage = -1;
    std::vector<Stream> streams;
    std::vector<double> eventTime;
    Timeline timeline;
  };
  /// A collective's group: how many have arrived, the latest arrival.
  struct Meeting {
    int64_t arrived = 0;
    double lastReady = 0.0;
  };

  bool advance(Rank &rank, Stream &stream);
  bool advanceGroup(Rank &rank, Stream &stream, bool &finished);
  bool readyTime(const Rank &rank, int64_t node, double freeAt,
                 double &start) const;
  void finish(Rank &rank, int64_t node, double start, double end);
  /// The members of a collective over `axisList` with `rank`, and the key
  /// they share (the rank's number with those axes' coordinates zeroed).
  std::pair<int64_t, int64_t> group(const Rank &rank,
                                    const std::string &axisList) const;
  int64_t rankWithStage(const Rank &rank, int64_t stage) const;
  int64_t indexOf(const Rank &rank) const;

  /// Nodes the runtime launches with the update before them
  /// (plan::joinsUpdateRun, the rule executor findAdamWRuns applies): they
  /// pay no launch of their own.
  std::vector<bool> joinsUpdateRun;

  const ScheduleGraph &graph;
  const StreamAssignment &streams;
  const Machine &machine;
  const MeshShape &mesh;
  int64_t stageAxis = -1; ///< index of "pp" in the mesh, if any
  std::vector<Rank> ranks;
  std::map<int64_t, int64_t> sendOfTag;
  std::map<std::pair<int64_t, int64_t>, Meeting> meetings;
  std::vector<CrossRankWait> transfers;
};

Simulator::Simulator(const ScheduleGraph &graph,
                     const StreamAssignment &streams,
                     const std::vector<int64_t> &order, const Machine &machine,
                     const MeshShape &mesh)
    : graph(graph), streams(streams), machine(machine), mesh(mesh) {
  int64_t worldSize = 1;
  for (size_t a = 0; a < mesh.size(); ++a) {
    worldSize *= std::max<int64_t>(mesh[a].second, 1);
    if (mesh[a].first == "pp")
      stageAxis = static_cast<int64_t>(a);
  }
  int64_t numStreams = kCommStream + 1;
  for (int64_t stream : streams.stream)
    numStreams = std::max(numStreams, stream + 1);
  for (size_t node = 0; node < graph.size(); ++node)
    if (graph[node].op == "send")
      sendOfTag[graph[node].tag] = static_cast<int64_t>(node);
  auto slot = [&](int64_t node) {
    return plan::UpdateSlot{.op = graph[node].op,
                            .stream = streams.stream[node],
                            .stage = graph[node].stage,
                            .waits = !streams.waits[node].empty(),
                            .signals = !streams.signals[node].empty()};
  };
  joinsUpdateRun.assign(graph.size(), false);
  for (size_t i = 1; i < order.size(); ++i)
    joinsUpdateRun[order[i]] =
        plan::joinsUpdateRun(slot(order[i - 1]), slot(order[i]));
  ranks.resize(worldSize);
  for (int64_t r = 0; r < worldSize; ++r) {
    Rank &rank = ranks[r];
    rank.coords.assign(mesh.size(), 0);
    for (int64_t a = static_cast<int64_t>(mesh.size()) - 1, rest = r; a >= 0;
         --a) {
      int64_t size = std::max<int64_t>(mesh[a].second, 1);
      rank.coords[a] = rest % size;
      rest /= size;
    }
    if (stageAxis >= 0)
      rank.stage = rank.coords[stageAxis];
    rank.streams.resize(numStreams);
    for (int64_t node : order) {
      int64_t stage = graph[node].stage;
      if (stageAxis < 0 || stage < 0 || stage == rank.stage)
        rank.streams[streams.stream[node]].queue.push_back(node);
    }
    rank.eventTime.assign(streams.numEvents, kNotRun);
    Timeline &timeline = rank.timeline;
    timeline.start.assign(graph.size(), kNotRun);
    timeline.end.assign(graph.size(), kNotRun);
    timeline.waitSeconds.assign(graph.size(), 0.0);
    timeline.sharedLaunch = joinsUpdateRun;
    timeline.stream = streams.stream;
    timeline.busySeconds.assign(numStreams, 0.0);
  }
}

int64_t Simulator::indexOf(const Rank &rank) const {
  int64_t index = 0;
  for (size_t a = 0; a < mesh.size(); ++a)
    index = index * std::max<int64_t>(mesh[a].second, 1) + rank.coords[a];
  return index;
}

std::pair<int64_t, int64_t>
Simulator::group(const Rank &rank, const std::string &axisList) const {
  int64_t size = 1, key = 0;
  for (size_t a = 0; a < mesh.size(); ++a) {
    bool inGroup = false;
    for (size_t start = 0; start <= axisList.size();) {
      size_t end = std::min(axisList.find(',', start), axisList.size());
      inGroup |= axisList.compare(start, end - start, mesh[a].first) == 0;
      start = end + 1;
    }
    int64_t extent = std::max<int64_t>(mesh[a].second, 1);
    size *= inGroup ? extent : 1;
    key = key * extent + (inGroup ? 0 : rank.coords[a]);
  }
  return {size, key};
}

int64_t Simulator::rankWithStage(const Rank &rank, int64_t stage) const {
  if (stageAxis < 0 || stage < 0 || stage >= mesh[stageAxis].second)
    return indexOf(rank);
  Rank peer;
  peer.coords = rank.coords;
  peer.coords[stageAxis] = stage;
  return indexOf(peer);
}

bool Simulator::readyTime(const Rank &rank, int64_t node, double freeAt,
                          double &start) const {
  start = freeAt;
  for (int64_t event : streams.waits[node]) {
    if (event < 0 || event >= static_cast<int64_t>(rank.eventTime.size()) ||
        std::isnan(rank.eventTime[event]))
      return false;
    start = std::max(start, rank.eventTime[event]);
  }
  return true;
}

void Simulator::finish(Rank &rank, int64_t node, double start, double end) {
  rank.timeline.start[node] = start;
  rank.timeline.end[node] = end;
  for (int64_t event : streams.signals[node])
    if (event >= 0 && event < static_cast<int64_t>(rank.eventTime.size()))
      rank.eventTime[event] = end;
}

/// Starts the transfer group at the head of `stream` (its sends run at
/// once) and ends it when every recv's send has ended; `finished` says it
/// did. Returns whether anything moved.
bool Simulator::advanceGroup(Rank &rank, Stream &stream, bool &finished) {
  finished = false;
  bool moved = false;
  Timeline &timeline = rank.timeline;
  const std::vector<int64_t> &queue = stream.queue;
  if (std::isnan(stream.groupStart)) {
    double start = 0.0;
    if (!readyTime(rank, queue[stream.next], stream.freeAt, start))
      return false;
    // Runtime::groupTransfers' rule: a transfer joins the run unless it
    // waits or the one before it signals.
    size_t end = stream.next + 1;
    while (end < queue.size() && isTransfer(graph[queue[end]]) &&
           streams.waits[queue[end]].empty() &&
           streams.signals[queue[end - 1]].empty())
      ++end;
    stream.groupStart = start;
    stream.groupEnd = end;
    for (size_t k = stream.next; k < end; ++k)
      if (graph[queue[k]].op == "send") {
        timeline.start[queue[k]] = start;
        timeline.end[queue[k]] = start + nodeSeconds(machine, graph[queue[k]]);
      }
    moved = true;
  }
  double groupFinish = stream.groupStart;
  for (size_t k = stream.next; k < stream.groupEnd; ++k) {
    int64_t node = queue[k];
    if (std::isnan(timeline.end[node])) {
      // A recv: its own time, or its send's end if that is later.
      double own = stream.groupStart + nodeSeconds(machine, graph[node]);
      double end = own;
      auto send = sendOfTag.find(graph[node].tag);
      if (send != sendOfTag.end()) {
        int64_t peer = rankWithStage(rank, graph[node].peer);
        double sent = ranks[peer].timeline.end[send->second];
        if (std::isnan(sent))
          return moved;
        end = std::max(own, sent);
        transfers.push_back({peer, send->second, indexOf(rank), node});
      }
      timeline.start[node] = stream.groupStart;
      timeline.end[node] = end;
      timeline.waitSeconds[node] = end - own;
      moved = true;
    }
    groupFinish = std::max(groupFinish, timeline.end[node]);
  }
  // The group is one launch: what it signals is done when all of it is.
  for (size_t k = stream.next; k < stream.groupEnd; ++k)
    for (int64_t event : streams.signals[queue[k]])
      if (event >= 0 && event < static_cast<int64_t>(rank.eventTime.size()))
        rank.eventTime[event] = groupFinish;
  stream.freeAt = groupFinish;
  stream.next = stream.groupEnd;
  stream.groupStart = kNotRun;
  finished = true;
  return true;
}

/// Runs the nodes at the head of `stream` that can run; returns whether
/// any moved.
bool Simulator::advance(Rank &rank, Stream &stream) {
  bool moved = false;
  Timeline &timeline = rank.timeline;
  while (stream.next < stream.queue.size()) {
    const int64_t node = stream.queue[stream.next];
    const ScheduleNode &record = graph[node];
    if (isTransfer(record)) {
      bool finished = false;
      moved |= advanceGroup(rank, stream, finished);
      if (!finished)
        return moved;
      continue;
    }
    double start = 0.0;
    if (!readyTime(rank, node, stream.freeAt, start))
      return moved;
    double seconds = nodeSeconds(machine, record);
    if (joinsUpdateRun[node])
      seconds -= launchSeconds(machine, record.op);
    double end = start + seconds;
    // Local copies (slice_to_rank, replicate) move no bytes: no meeting.
    auto [groupSize, key] =
        record.kind == NodeKind::Collective && record.commBytes > 0
            ? group(rank, record.axis)
            : std::pair<int64_t, int64_t>{1, 0};
    if (groupSize > 1) {
      Meeting &meeting = meetings[{node, key}];
      if (std::isnan(timeline.start[node])) {
        timeline.start[node] = start;
        meeting.arrived += 1;
        meeting.lastReady = std::max(meeting.lastReady, start);
        moved = true;
      }
      if (meeting.arrived < groupSize)
        return moved;
      start = timeline.start[node];
      end = meeting.lastReady + seconds;
      timeline.waitSeconds[node] = meeting.lastReady - start;
    }
    finish(rank, node, start, end);
    stream.freeAt = end;
    stream.next += 1;
    moved = true;
  }
  return moved;
}

StepSimulation Simulator::run() {
  bool moved = true;
  while (moved) {
    moved = false;
    for (Rank &rank : ranks)
      for (Stream &stream : rank.streams)
        moved |= advance(rank, stream);
  }
  StepSimulation result;
  int64_t numStages = stageAxis >= 0 ? mesh[stageAxis].second : 1;
  result.stageBusySeconds.assign(std::max<int64_t>(numStages, 1), -1.0);
  for (Rank &rank : ranks) {
    std::vector<bool> runs(graph.size(), false);
    for (const Stream &stream : rank.streams)
      for (int64_t node : stream.queue)
        runs[node] = true;
    summarize(rank.timeline, runs);
    result.deadlocked |= rank.timeline.deadlocked;
    result.stepSeconds =
        std::max(result.stepSeconds, rank.timeline.stepSeconds);
    result.stageOfRank.push_back(rank.stage);
    double &busy = result.stageBusySeconds[std::max<int64_t>(rank.stage, 0)];
    if (busy >= 0)
      continue;
    busy = 0.0;
    for (size_t node = 0; node < graph.size(); ++node)
      if (graph[node].kind == NodeKind::Compute &&
          !std::isnan(rank.timeline.start[node]))
        busy += rank.timeline.end[node] - rank.timeline.start[node];
  }
  for (double busy : result.stageBusySeconds)
    if (result.stepSeconds > 0)
      result.bubble += std::max(0.0, result.stepSeconds - busy) /
                       result.stepSeconds /
                       static_cast<double>(result.stageBusySeconds.size());
  for (Rank &rank : ranks)
    result.ranks.push_back(std::move(rank.timeline));
  result.transfers = std::move(transfers);
  return result;
}

} // namespace

StepSimulation simulateStep(const ScheduleGraph &graph,
                            const StreamAssignment &streams,
                            const std::vector<int64_t> &order,
                            const Machine &machine, const MeshShape &mesh) {
  return Simulator(graph, streams, order, machine, mesh).run();
}

RecomputeCost recomputeCost(const ScheduleGraph &graph,
                            const StepSimulation &simulation) {
  RecomputeCost most;
  for (size_t r = 0; r < simulation.ranks.size(); ++r) {
    const Timeline &timeline = simulation.ranks[r];
    int64_t stage = r < simulation.stageOfRank.size()
                        ? simulation.stageOfRank[r]
                        : int64_t{-1};
    RecomputeCost cost;
    for (size_t n = 0; n < graph.size(); ++n) {
      const ScheduleNode &node = graph[n];
      if (node.stage >= 0 && node.stage != stage)
        continue;
      bool compute = node.kind == NodeKind::Compute;
      cost.stepFlops += compute ? node.flops : 0;
      if (!node.reruns)
        continue;
      ++cost.ops;
      cost.collectives += compute ? 0 : 1;
      if (compute) {
        cost.flops += node.flops;
        cost.memBytes += node.memBytes;
        cost.seconds += timeline.end[n] - timeline.start[n];
      }
    }
    if (r == 0 || cost.seconds > most.seconds)
      most = cost;
  }
  return most;
}

} // namespace sharc
