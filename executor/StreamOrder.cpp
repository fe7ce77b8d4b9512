//===- StreamOrder.cpp - happens-before over a plan's streams -------------===//

#include "executor/StreamOrder.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace sharc::exec {

namespace {

std::string instrName(const plan::Plan &plan, int64_t index) {
  return "instr " + std::to_string(index) + " (" + plan.instructions[index].op +
         ")";
}

Status checkIds(const plan::Plan &plan) {
  if (plan.numStreams < 1)
    return Status::invalidInput("num_streams must be at least 1, got " +
                                std::to_string(plan.numStreams));
  if (plan.numEvents < 0)
    return Status::invalidInput("num_events must not be negative, got " +
                                std::to_string(plan.numEvents));
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    std::string what = instrName(plan, static_cast<int64_t>(i));
    if (instr.stream < 0 || instr.stream >= plan.numStreams)
      return Status::invalidInput(
          what + ": stream " + std::to_string(instr.stream) + " outside [0, " +
          std::to_string(plan.numStreams) + ")");
    for (const auto *events : {&instr.waits, &instr.signals})
      for (int64_t event : *events)
        if (event < 0 || event >= plan.numEvents)
          return Status::invalidInput(what + ": event " +
                                      std::to_string(event) + " outside [0, " +
                                      std::to_string(plan.numEvents) + ")");
  }
  return Status::ok();
}

/// Runs the streams abstractly: a stream's next instruction may start once
/// the signallers of its waits are done. Every instruction runs exactly when
/// the plan can finish, and they complete in an order that respects
/// happens-before, in which the clocks are computed.
Status simulate(const plan::Plan &plan, StreamOrder &order) {
  size_t numInstrs = plan.instructions.size();
  std::vector<bool> done(numInstrs, false);
  std::vector<size_t> next(order.numStreams, 0);
  size_t numDone = 0;
  auto ready = [&](int64_t index) {
    for (int64_t event : plan.instructions[index].waits)
      if (!done[order.signaller[event]])
        return false;
    return true;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (int64_t s = 0; s < order.numStreams; ++s) {
      const std::vector<int64_t> &instrs = order.streamInstrs[s];
      while (next[s] < instrs.size() && ready(instrs[next[s]])) {
        int64_t index = instrs[next[s]];
        std::vector<int64_t> clock(order.numStreams, 0);
        if (next[s] > 0)
          clock = order.clock[instrs[next[s] - 1]];
        for (int64_t event : plan.instructions[index].waits) {
          const std::vector<int64_t> &other =
              order.clock[order.signaller[event]];
          for (int64_t t = 0; t < order.numStreams; ++t)
            clock[t] = std::max(clock[t], other[t]);
        }
        clock[s] = order.position[index];
        order.clock[index] = std::move(clock);
        done[index] = true;
        ++next[s];
        ++numDone;
        progress = true;
      }
    }
  }
  if (numDone == numInstrs)
    return Status::ok();
  // Report the stuck stream head that comes first in the list.
  int64_t stuck = -1;
  for (int64_t s = 0; s < order.numStreams; ++s)
    if (next[s] < order.streamInstrs[s].size())
      stuck = stuck < 0 ? order.streamInstrs[s][next[s]]
                        : std::min(stuck, order.streamInstrs[s][next[s]]);
  for (int64_t event : plan.instructions[stuck].waits) {
    int64_t by = order.signaller[event];
    if (!done[by])
      return Status::invalidInput(
          instrName(plan, stuck) + ": waits for event " +
          std::to_string(event) + ", signalled by " + instrName(plan, by) +
          ", which can only run after it: the waits form a cycle");
  }
  return Status::invalidInput(instrName(plan, stuck) + ": can never start");
}

struct Access {
  plan::Region region;
  int64_t lo = 0, hi = 0; ///< bytes [lo, hi) of the region
  int64_t instr = 0, buffer = 0;
  bool isWrite = false;
};

std::vector<Access> collectAccesses(const plan::Plan &plan,
                                    const std::vector<uint32_t> &updated) {
  std::vector<Access> accesses;
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    auto add = [&](int64_t id, bool isWrite) {
      const plan::Buffer &buffer = plan.buffers[id];
      if (buffer.numBytes > 0)
        accesses.push_back({buffer.region, buffer.offset,
                            buffer.offset + buffer.numBytes,
                            static_cast<int64_t>(i), id, isWrite});
    };
    uint32_t mask = i < updated.size() ? updated[i] : 0;
    for (size_t k = 0; k < instr.operands.size(); ++k)
      add(instr.operands[k], k < 32 && (mask >> k & 1u));
    for (int64_t id : instr.results)
      add(id, true);
  }
  std::sort(accesses.begin(), accesses.end(),
            [](const Access &a, const Access &b) {
              return std::tie(a.region, a.lo, a.instr) <
                     std::tie(b.region, b.lo, b.instr);
            });
  return accesses;
}

std::string describe(const plan::Plan &plan, const StreamOrder &order,
                     const Access &access) {
  const plan::Buffer &buffer = plan.buffers[access.buffer];
  return instrName(plan, access.instr) + " on stream " +
         std::to_string(order.streamOf[access.instr]) +
         (access.isWrite ? " writes '" : " reads '") + buffer.name + "' [" +
         std::to_string(access.lo) + ", " + std::to_string(access.hi) + ")";
}

} // namespace

Result<StreamOrder> analyzeStreams(const plan::Plan &plan) {
  SHARC_TRY(checkIds(plan));
  StreamOrder order;
  size_t numInstrs = plan.instructions.size();
  order.numStreams = plan.numStreams;
  order.streamInstrs.resize(plan.numStreams);
  order.signaller.assign(plan.numEvents, -1);
  order.streamOf.resize(numInstrs);
  order.position.resize(numInstrs);
  order.clock.resize(numInstrs);
  for (size_t i = 0; i < numInstrs; ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    int64_t index = static_cast<int64_t>(i);
    std::vector<int64_t> &streamInstrs = order.streamInstrs[instr.stream];
    streamInstrs.push_back(index);
    order.streamOf[i] = instr.stream;
    order.position[i] = static_cast<int64_t>(streamInstrs.size());
    for (int64_t event : instr.signals) {
      int64_t &by = order.signaller[event];
      // A second signal would satisfy nothing new: events reset only at the
      // end of a step, so it would mean a wait the plan cannot express.
      if (by >= 0 && by != index)
        return Status::invalidInput(instrName(plan, index) +
                                    ": signals event " + std::to_string(event) +
                                    ", which " + instrName(plan, by) +
                                    " already signals; an event has one "
                                    "signaller per step");
      by = index;
    }
  }
  for (size_t i = 0; i < numInstrs; ++i)
    for (int64_t event : plan.instructions[i].waits)
      if (order.signaller[event] < 0)
        return Status::invalidInput(
            instrName(plan, static_cast<int64_t>(i)) + ": waits for event " +
            std::to_string(event) + ", which no instruction signals");
  SHARC_TRY(simulate(plan, order));
  return order;
}

Status findHazard(const plan::Plan &plan, const StreamOrder &order,
                  const std::vector<uint32_t> &updatedOperands) {
  std::vector<Access> accesses = collectAccesses(plan, updatedOperands);
  // Sorted by start, so the accesses overlapping accesses[i] from the right
  // are exactly those after it that start before it ends.
  const Access *firstA = nullptr, *firstB = nullptr;
  auto key = [](const Access &a, const Access &b) {
    return std::make_pair(std::max(a.instr, b.instr),
                          std::min(a.instr, b.instr));
  };
  for (size_t i = 0; i < accesses.size(); ++i) {
    const Access &a = accesses[i];
    for (size_t j = i + 1; j < accesses.size(); ++j) {
      const Access &b = accesses[j];
      if (b.region != a.region || b.lo >= a.hi)
        break;
      // Two pipeline stages run on different ranks: their bytes are apart.
      int64_t stageA = plan.instructions[a.instr].stage;
      int64_t stageB = plan.instructions[b.instr].stage;
      if (stageA >= 0 && stageB >= 0 && stageA != stageB)
        continue;
      if (order.streamOf[a.instr] == order.streamOf[b.instr] ||
          !(a.isWrite || b.isWrite) || order.ordered(a.instr, b.instr))
        continue;
      if (!firstA || key(a, b) < key(*firstA, *firstB)) {
        firstA = &a;
        firstB = &b;
      }
    }
  }
  if (!firstA)
    return Status::ok();
  if (firstA->instr > firstB->instr)
    std::swap(firstA, firstB);
  return Status::runtimeError("hazard: " + describe(plan, order, *firstA) +
                              " and " + describe(plan, order, *firstB) +
                              " of region " + plan::regionName(firstA->region) +
                              ", and no event orders them");
}

std::vector<std::vector<int64_t>> lastUses(const plan::Plan &plan,
                                           const StreamOrder &order) {
  size_t numInstrs = plan.instructions.size();
  // A view inside another view of its base (a parameter's gradient in a
  // fused gradient, sharc-fuse-projections) is a use of the outer one too.
  std::vector<int64_t> enclosing(plan.buffers.size(), -1);
  for (const plan::Buffer &inner : plan.buffers)
    for (const plan::Buffer &outer : plan.buffers)
      if (inner.viewOf >= 0 && outer.viewOf == inner.viewOf &&
          outer.id != inner.id && outer.offset <= inner.offset &&
          inner.offset + inner.numBytes <= outer.offset + outer.numBytes &&
          outer.numBytes > inner.numBytes)
        enclosing[inner.id] = outer.id;
  // A read of a base reads its views' bytes: a fused weight gathered
  // whole (ZeRO-3) is written member by member and read as one.
  std::vector<std::vector<int64_t>> viewsOf(plan.buffers.size());
  for (const plan::Buffer &buffer : plan.buffers)
    if (buffer.viewOf >= 0 &&
        buffer.viewOf < static_cast<int64_t>(viewsOf.size()))
      viewsOf[buffer.viewOf].push_back(buffer.id);
  std::vector<std::vector<int64_t>> users(plan.buffers.size());
  auto use = [&](int64_t id, size_t i) {
    if (id >= 0 && id < static_cast<int64_t>(users.size()) &&
        (users[id].empty() || users[id].back() != static_cast<int64_t>(i)))
      users[id].push_back(static_cast<int64_t>(i));
  };
  for (size_t i = 0; i < numInstrs; ++i) {
    const plan::Instruction &instr = plan.instructions[i];
    for (const auto *ids : {&instr.operands, &instr.results})
      for (int64_t used : *ids)
        // A use of a view (a gradient in its bucket's slab) uses its base:
        // the slab must outlive the members read after its all_reduce. The
        // contract, checked later, refuses a view_of out of range.
        for (int64_t id : {used, plan.buffers[used].viewOf, enclosing[used]})
          use(id, i);
    for (int64_t read : instr.operands)
      if (read >= 0 && read < static_cast<int64_t>(viewsOf.size()))
        for (int64_t view : viewsOf[read])
          use(view, i);
  }
  auto overlaps = [&](int64_t a, int64_t b) {
    const plan::Buffer &x = plan.buffers[a], &y = plan.buffers[b];
    return x.region == y.region && x.offset < y.offset + y.numBytes &&
           y.offset < x.offset + x.numBytes;
  };
  std::vector<std::vector<int64_t>> result(numInstrs);
  for (const plan::Buffer &buffer : plan.buffers) {
    // A column view's bytes interleave with its siblings': only its base
    // is poisoned, after the last use of any of them.
    if ((buffer.region != plan::Region::Activation &&
         buffer.region != plan::Region::Gradient) ||
        buffer.numBytes == 0 || buffer.isStrided())
      continue;
    const std::vector<int64_t> &uses = users[buffer.id];
    for (int64_t last : uses) {
      bool isLast = std::all_of(uses.begin(), uses.end(), [&](int64_t use) {
        return use == last || order.happensBefore(use, last);
      });
      if (!isLast)
        continue;
      // Another buffer on the same bytes in the same instruction is an
      // in-place alias whose data must survive.
      const plan::Instruction &instr = plan.instructions[last];
      bool aliased = false;
      for (const auto *ids : {&instr.operands, &instr.results})
        for (int64_t id : *ids)
          aliased |= id != buffer.id && overlaps(id, buffer.id);
      if (!aliased)
        result[last].push_back(buffer.id);
      break;
    }
  }
  return result;
}

} // namespace sharc::exec
