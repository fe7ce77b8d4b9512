//===- PlanContract.cpp - the rules a plan obeys besides its syntax -------===//
//
// Buffer overlap uses the plan's happens-before order (docs/plan-format.md):
// two buffers may share bytes when every instruction touching one
// happens-before every instruction touching the other, which is what the
// planner's arena guarantees with its cross-stream lifetime extension
// (planner/Streams.h). With one stream this is "the live ranges in plan
// order do not intersect". Happens-before is computed with one vector clock
// per instruction, in plan order, which the event rule makes a valid order.
// A declared view (a gradient inside its bucket's slab) shares its base's
// bytes by design: the pair is exempt, and every use of the view counts as
// a use of the base, so the base's liveness covers all its views' and any
// third buffer on those bytes is checked against the whole. Two views of
// one base, one inside the other, are exempt too (sharc-fuse-projections).
//
// This file holds those rules and runs the contract's parts in order: the
// rules on single instructions (ContractInstructions.h), then event order
// and buffer overlap, then the rules on values (ContractValues.h).
//
//===----------------------------------------------------------------------===//

#include "planner/plan/PlanContract.h"
#include "planner/plan/ContractChecker.h"
#include "planner/plan/ContractInstructions.h"
#include "planner/plan/ContractValues.h"

#include <algorithm>
#include <tuple>

namespace sharc::plan {
namespace {

constexpr int64_t kNever = INT64_MAX;

bool isPersistentRegion(Region region) {
  return region != Region::Activation && region != Region::Gradient;
}

/// What the overlap rule needs to know of a buffer in a reused region.
struct Liveness {
  bool liveAtStart = false, liveAtEnd = false;
  int64_t firstUse = kNever;
  /// Per stream: the position of the last instruction touching the buffer
  /// (0 for none) and that instruction.
  std::vector<int64_t> lastPos, lastInstr;
  /// Per stream s: the fewest instructions of s that happen-before an
  /// instruction touching the buffer (kNever for none), and that
  /// instruction.
  std::vector<int64_t> minBefore, minInstr;
  /// The pipeline stage of every instruction touching it; -1 when they
  /// differ or run on every stage, kNoStage before the first.
  int64_t stage = kNoStage;
  static constexpr int64_t kNoStage = -2;
};

/// Event order, then buffer overlap under the happens-before order the
/// events give.
class OrderChecker : public ContractChecker {
public:
  // Counts below their minimum leave every id out of range, which
  // ContractInstructions.cpp reports before this checker runs.
  explicit OrderChecker(const Plan &plan)
      : ContractChecker(plan),
        numStreams(std::max<int64_t>(plan.numStreams, 1)),
        numEvents(std::max<int64_t>(plan.numEvents, 0)) {}

  Violation run() {
    if (Violation v = checkEvents())
      return v;
    if (Violation v = checkViews())
      return v;
    computeClocks();
    return checkOverlaps();
  }

private:
  Violation checkEvents() {
    signaller.assign(numEvents, -1);
    for (int64_t i = 0; i < numInstrs(); ++i) {
      const Instruction &instr = plan.instructions[i];
      for (int64_t event : instr.waits) {
        if (signaller[event] >= 0)
          continue;
        std::string detail = "waits for event " + std::to_string(event);
        for (int64_t later = i; later < numInstrs(); ++later) {
          const std::vector<int64_t> &signals =
              plan.instructions[later].signals;
          if (std::find(signals.begin(), signals.end(), event) != signals.end())
            return atInstr(i, "event order",
                           detail + ", signalled by " + instrName(later) +
                               ", which does not come before it; a wait "
                               "must come after its signal in instruction "
                               "order");
        }
        return atInstr(i, "event order",
                       detail + ", which no instruction signals");
      }
      for (int64_t event : instr.signals) {
        if (signaller[event] >= 0 && signaller[event] != i)
          return atInstr(i, "event order",
                         "signals event " + std::to_string(event) + ", which " +
                             instrName(signaller[event]) +
                             " already signals; an event has one signaller");
        signaller[event] = i;
      }
    }
    return std::nullopt;
  }

  Violation atBuffer(int64_t id, const std::string &detail) const {
    return ContractViolation{ContractViolation::Site::Buffer, id, "",
                             bufferName(id) + ": buffer overlap: " + detail};
  }

  /// A view lies inside an earlier buffer of its region that is no view
  /// itself, so that the overlap rule can treat the two as one.
  Violation checkViews() const {
    for (const Buffer &view : plan.buffers) {
      if (view.viewOf < 0)
        continue;
      int64_t id = view.id, baseId = view.viewOf;
      if (baseId >= id)
        return atBuffer(id, "view_of " + std::to_string(baseId) +
                                " names no earlier buffer");
      const Buffer &base = plan.buffers[baseId];
      if (base.viewOf >= 0)
        return atBuffer(id, "views " + bufferName(baseId) +
                                ", which is a view itself");
      if (base.region != view.region)
        return atBuffer(id, "views " + bufferName(baseId) + " of region " +
                                regionName(base.region) + " from region " +
                                regionName(view.region));
      if (view.offset < base.offset ||
          view.offset + view.numBytes > base.offset + base.numBytes)
        return atBuffer(id, "its bytes " + range(view) + " lie outside " +
                                range(base) + " of " + bufferName(baseId) +
                                ", which it views");
      if (view.isStrided() && view.rowPitch() != base.rowPitch())
        return atBuffer(id, "its row_stride " + std::to_string(view.rowStride) +
                                " is not the row of " + bufferName(baseId) +
                                " (" + std::to_string(base.rowPitch()) +
                                " elements)");
    }
    return std::nullopt;
  }

  static std::string range(const Buffer &buffer) {
    return "[" + std::to_string(buffer.offset) + ", " +
           std::to_string(buffer.offset + buffer.numBytes) + ")";
  }

  void computeClocks() {
    position.assign(numInstrs(), 0);
    clock.assign(numInstrs(), std::vector<int64_t>(numStreams, 0));
    std::vector<int64_t> lastOf(numStreams, -1), count(numStreams, 0);
    for (int64_t i = 0; i < numInstrs(); ++i) {
      const Instruction &instr = plan.instructions[i];
      std::vector<int64_t> &mine = clock[i];
      if (lastOf[instr.stream] >= 0)
        mine = clock[lastOf[instr.stream]];
      for (int64_t event : instr.waits)
        for (int64_t s = 0; s < numStreams; ++s)
          mine[s] = std::max(mine[s], clock[signaller[event]][s]);
      position[i] = mine[instr.stream] = ++count[instr.stream];
      lastOf[instr.stream] = i;
    }
  }

  std::vector<Liveness> liveness() const {
    std::vector<Liveness> result(plan.buffers.size());
    for (Liveness &live : result) {
      live.lastPos.assign(numStreams, 0);
      live.lastInstr.assign(numStreams, -1);
      live.minBefore.assign(numStreams, kNever);
      live.minInstr.assign(numStreams, -1);
    }
    // The runtime writes inputs before a step and reads outputs after it;
    // parameters and their state persist across steps.
    // A view's uses are uses of the buffer it views: a slab lives from its
    // first member's producer to its last member's consumer.
    auto withBase = [&](int64_t id) {
      std::vector<int64_t> ids = {id};
      if (plan.buffers[id].viewOf >= 0)
        ids.push_back(plan.buffers[id].viewOf);
      return ids;
    };
    auto mark = [&](int64_t id, bool atStart, bool atEnd) {
      if (id < 0 || id >= static_cast<int64_t>(result.size()))
        return;
      for (int64_t touched : withBase(id)) {
        result[touched].liveAtStart |= atStart;
        result[touched].liveAtEnd |= atEnd;
      }
    };
    for (const IoEntry &entry : plan.inputs)
      mark(entry.buffer, true, false);
    for (const IoEntry &entry : plan.outputs)
      mark(entry.buffer, false, true);
    for (const ParamEntry &param : plan.params) {
      mark(param.buffer, true, true);
      for (int64_t id : param.state)
        mark(id, true, true);
    }
    for (int64_t i = 0; i < numInstrs(); ++i) {
      const Instruction &instr = plan.instructions[i];
      for (const auto *ids : {&instr.operands, &instr.results})
        for (int64_t used : *ids)
          for (int64_t id : withBase(used)) {
            Liveness &live = result[id];
            live.firstUse = std::min(live.firstUse, i);
            live.stage =
                live.stage == Liveness::kNoStage || live.stage == instr.stage
                    ? instr.stage
                    : -1;
            live.lastPos[instr.stream] = position[i];
            live.lastInstr[instr.stream] = i;
            for (int64_t s = 0; s < numStreams; ++s) {
              // Instructions of s that happen strictly before i.
              int64_t before = clock[i][s] - (s == instr.stream ? 1 : 0);
              if (before < live.minBefore[s]) {
                live.minBefore[s] = before;
                live.minInstr[s] = i;
              }
            }
          }
    }
    return result;
  }

  /// The stream on which some touch of x does not happen-before some touch
  /// of y, or -1 when all of x's touches happen-before all of y's.
  static int64_t unorderedStream(const Liveness &x, const Liveness &y) {
    for (size_t s = 0; s < x.lastPos.size(); ++s)
      if (x.lastPos[s] > 0 && y.minBefore[s] != kNever &&
          x.lastPos[s] > y.minBefore[s])
        return static_cast<int64_t>(s);
    return -1;
  }

  static bool comesBefore(const Liveness &x, const Liveness &y) {
    return !x.liveAtEnd && !y.liveAtStart && unorderedStream(x, y) < 0;
  }

  /// Why a (touched first) and b are live at once.
  std::string whyLive(int64_t a, int64_t b,
                      const std::vector<Liveness> &live) const {
    const Liveness &x = live[a], &y = live[b];
    if (x.liveAtEnd)
      return bufferName(a) + " is live at the end of the step";
    if (y.liveAtStart)
      return bufferName(b) + " is live from the start of the step";
    int64_t s = unorderedStream(x, y);
    if (x.lastInstr[s] == y.minInstr[s])
      return instrName(x.lastInstr[s]) + " uses both";
    return instrName(x.lastInstr[s]) + ", which uses buffer " +
           std::to_string(a) + ", does not happen-before " +
           instrName(y.minInstr[s]) + ", which uses buffer " +
           std::to_string(b);
  }

  /// Two views of one base, one inside the other: a fused weight gradient
  /// in a bucket's slab and the parameters' gradients in its rows.
  static bool nestedViews(const Buffer &a, const Buffer &b) {
    auto inside = [](const Buffer &inner, const Buffer &outer) {
      return inner.offset >= outer.offset &&
             inner.offset + inner.numBytes <= outer.offset + outer.numBytes;
    };
    return a.viewOf >= 0 && a.viewOf == b.viewOf &&
           (inside(a, b) || inside(b, a));
  }

  /// Two column views of one base whose columns do not meet: their byte
  /// ranges interleave row by row but share no element.
  bool disjointColumns(const Buffer &a, const Buffer &b) const {
    if (a.viewOf < 0 || a.viewOf != b.viewOf || a.dtype != b.dtype ||
        a.rowPitch() != b.rowPitch() || a.shape.empty() || b.shape.empty())
      return false;
    int64_t size = dtypeSize(a.dtype), row = a.rowPitch() * size;
    int64_t base = plan.buffers[a.viewOf].offset;
    int64_t columnA = (a.offset - base) % row,
            columnB = (b.offset - base) % row;
    if (a.offset - columnA != b.offset - columnB)
      return false; // not the same rows: leave it to the general rule
    return columnA + a.shape.back() * size <= columnB ||
           columnB + b.shape.back() * size <= columnA;
  }

  Violation checkOverlaps() const {
    std::vector<int64_t> order;
    for (size_t id = 0; id < plan.buffers.size(); ++id)
      if (plan.buffers[id].numBytes > 0)
        order.push_back(static_cast<int64_t>(id));
    auto key = [&](int64_t id) {
      const Buffer &buffer = plan.buffers[id];
      return std::tuple(buffer.region, buffer.offset, id);
    };
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return key(a) < key(b); });
    std::vector<Liveness> live = liveness();
    for (size_t i = 0; i < order.size(); ++i) {
      int64_t aId = order[i];
      const Buffer &a = plan.buffers[aId];
      for (size_t j = i + 1; j < order.size(); ++j) {
        int64_t bId = order[j];
        const Buffer &b = plan.buffers[bId];
        if (b.region != a.region || b.offset >= a.offset + a.numBytes)
          break;
        if (a.viewOf == bId || b.viewOf == aId || nestedViews(a, b))
          continue; // declared: the view's uses count as its base's
        // Column views of one base are its columns for as long as it
        // lives, written and read through the base: they never meet.
        if (a.viewOf >= 0 && a.viewOf == b.viewOf &&
            (a.isStrided() || b.isStrided())) {
          if (disjointColumns(a, b))
            continue;
          return atBuffer(bId, "its columns meet those of " + bufferName(aId) +
                                   ", both views of " + bufferName(a.viewOf));
        }
        // Buffers of two pipeline stages live on different ranks.
        if (live[aId].stage >= 0 && live[bId].stage >= 0 &&
            live[aId].stage != live[bId].stage)
          continue;
        bool persistent = isPersistentRegion(a.region);
        if (!persistent && (comesBefore(live[aId], live[bId]) ||
                            comesBefore(live[bId], live[aId])))
          continue;
        int64_t first = aId, second = bId;
        if (std::tie(live[second].firstUse, second) <
            std::tie(live[first].firstUse, first))
          std::swap(first, second);
        int64_t site = std::max(aId, bId), other = std::min(aId, bId);
        int64_t end = std::min(a.offset + a.numBytes, b.offset + b.numBytes);
        std::string detail =
            bufferName(site) + ": buffer overlap: shares bytes [" +
            std::to_string(b.offset) + ", " + std::to_string(end) +
            ") of region " + regionName(a.region) + " with " +
            bufferName(other);
        detail += persistent
                      ? "; buffers of this region never share bytes "
                        "(an op working in place names one buffer "
                        "twice)"
                      : " while both are live: " + whyLive(first, second, live);
        return ContractViolation{ContractViolation::Site::Buffer, site, "",
                                 detail};
      }
    }
    return std::nullopt;
  }

  const int64_t numStreams, numEvents;
  std::vector<int64_t> signaller, position;
  std::vector<std::vector<int64_t>> clock;
};

} // namespace

std::optional<ContractViolation> findContractViolation(const Plan &plan) {
  if (auto violation = findInstructionViolation(plan))
    return violation;
  if (auto violation = OrderChecker(plan).run())
    return violation;
  return findValueViolation(plan);
}

Status checkPlanContract(const Plan &plan) {
  if (auto violation = findContractViolation(plan))
    return Status::invalidInput(violation->message);
  return Status::ok();
}

} // namespace sharc::plan
