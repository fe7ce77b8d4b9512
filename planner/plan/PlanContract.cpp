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
//===----------------------------------------------------------------------===//

#include "planner/plan/PlanContract.h"
#include "planner/plan/ContractValues.h"
#include "planner/plan/OpSchema.h"
#include "planner/plan/PlanText.h"

#include <algorithm>
#include <tuple>

namespace sharc::plan {
namespace {

using Violation = std::optional<ContractViolation>;

constexpr int64_t kNever = INT64_MAX;

std::string counted(size_t count, const char *noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

std::string describeValue(const AttrValue &value) {
  if (const auto *integer = std::get_if<int64_t>(&value))
    return "the integer " + std::to_string(*integer);
  if (const auto *real = std::get_if<double>(&value))
    return "the float " + text::formatDouble(*real);
  if (const auto *string = std::get_if<std::string>(&value))
    return "the string " + text::quoted(*string);
  return "a list";
}

std::string joined(const std::vector<std::string> &names, const char *last) {
  std::string result;
  for (size_t i = 0; i < names.size(); ++i)
    result += (i == 0 ? "" : i + 1 == names.size() ? last : ", ") + names[i];
  return result;
}

bool isPersistentRegion(Region region) {
  return region != Region::Activation && region != Region::Gradient;
}

/// An operand or result of one instruction, as the dtype rule sees it.
struct Slot {
  std::string role; ///< "w", or "x[2]" in a variadic op
  char type;        ///< SlotSpec::type
  int64_t buffer;
};

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

class Checker {
public:
  // Counts below their minimum leave every id out of range (checkIds).
  explicit Checker(const Plan &plan)
      : plan(plan), numStreams(std::max<int64_t>(plan.numStreams, 1)),
        numEvents(std::max<int64_t>(plan.numEvents, 0)) {}

  Violation run() {
    for (int64_t i = 0; i < numInstrs(); ++i)
      if (Violation v = checkIds(i))
        return v;
    for (int64_t i = 0; i < numInstrs(); ++i) {
      const OpSchema *schema = findOpSchema(plan.instructions[i].op);
      if (!schema)
        return atInstr(i, "op schema", "unknown op");
      if (Violation v = checkCounts(i, *schema))
        return v;
      if (Violation v = checkAttrs(i, *schema))
        return v;
      if (Violation v = checkDTypes(i, *schema))
        return v;
    }
    if (Violation v = checkEvents())
      return v;
    if (Violation v = checkViews())
      return v;
    computeClocks();
    return checkOverlaps();
  }

private:
  int64_t numInstrs() const {
    return static_cast<int64_t>(plan.instructions.size());
  }

  std::string instrName(int64_t i) const {
    return "instr " + std::to_string(i) + " (" + plan.instructions[i].op + ")";
  }

  std::string bufferName(int64_t id) const {
    return "buffer " + std::to_string(id) + " '" + plan.buffers[id].name + "'";
  }

  Violation atInstr(int64_t i, const char *rule, const std::string &detail,
                    const std::string &attr = "") const {
    return ContractViolation{ContractViolation::Site::Instruction, i, attr,
                             instrName(i) + ": " + rule + ": " + detail};
  }

  /// The reader guarantees these; a plan built in memory may not.
  Violation checkIds(int64_t i) const {
    const Instruction &instr = plan.instructions[i];
    int64_t numBuffers = static_cast<int64_t>(plan.buffers.size());
    for (const auto *ids : {&instr.operands, &instr.results})
      for (int64_t id : *ids)
        if (id < 0 || id >= numBuffers || plan.buffers[id].id != id)
          return atInstr(i, "ids",
                         "buffer " + std::to_string(id) + " is not entry " +
                             std::to_string(id) + " of the buffer table");
    for (const auto *events : {&instr.waits, &instr.signals})
      for (int64_t event : *events)
        if (event < 0 || event >= plan.numEvents)
          return atInstr(i, "ids",
                         "event " + std::to_string(event) + " outside [0, " +
                             std::to_string(plan.numEvents) + ")");
    if (instr.stream < 0 || instr.stream >= plan.numStreams)
      return atInstr(i, "ids",
                     "stream " + std::to_string(instr.stream) +
                         " outside [0, " + std::to_string(plan.numStreams) +
                         ")");
    int64_t numStages = plan.axisSize(kStageAxis);
    if (instr.stage < -1 || instr.stage >= numStages)
      return atInstr(i, "ids",
                     "stage " + std::to_string(instr.stage) + " outside [-1, " +
                         std::to_string(numStages) + ")");
    return std::nullopt;
  }

  Violation checkCounts(int64_t i, const OpSchema &schema) const {
    const Instruction &instr = plan.instructions[i];
    size_t numIn = instr.operands.size(), numOut = instr.results.size();
    size_t maxIn = schema.operands.size();
    size_t minIn = maxIn - schema.optionalOperands;
    bool ok = schema.variadic ? numIn >= 1 && numOut == numIn
              : schema.repeatedOperand
                  ? numIn >= 1 && numOut == schema.results.size()
                  : numIn >= minIn && numIn <= maxIn &&
                        numOut == schema.results.size();
    if (ok)
      return std::nullopt;
    std::string results = counted(schema.results.size(), "result");
    std::string takes =
        schema.variadic          ? "one or more operands and as many results"
        : schema.repeatedOperand ? "one or more operands and " + results
        : minIn < maxIn          ? std::to_string(minIn) + " or " +
                              counted(maxIn, "operand") + " and " + results
                        : counted(maxIn, "operand") + " and " + results;
    return atInstr(i, "op schema",
                   "takes " + takes + ", got " + counted(numIn, "operand") +
                       " and " + counted(numOut, "result"));
  }

  Violation checkAttrs(int64_t i, const OpSchema &schema) const {
    const Instruction &instr = plan.instructions[i];
    for (const auto &[key, value] : instr.attrs) {
      const AttrSpec *spec = schema.findAttr(key);
      if (!spec) {
        std::vector<std::string> names;
        for (const AttrSpec &known : schema.attrs)
          names.push_back(known.name);
        return atInstr(i, "op schema",
                       "unknown attribute '" + key + "' (" + schema.name +
                           " takes " +
                           (names.empty() ? "none" : joined(names, ", ")) + ")",
                       key);
      }
      if (Violation v = checkAttrValue(i, *spec, value))
        return v;
    }
    for (const AttrSpec &spec : schema.attrs)
      if (spec.required && !instr.attrs.count(spec.name))
        return atInstr(i, "op schema",
                       "missing attribute '" + spec.name + "' (" +
                           attrKindName(spec.kind) + ")");
    return std::nullopt;
  }

  Violation checkAttrValue(int64_t i, const AttrSpec &spec,
                           const AttrValue &value) const {
    const auto *integer = std::get_if<int64_t>(&value);
    const auto *string = std::get_if<std::string>(&value);
    const auto *list = std::get_if<std::vector<int64_t>>(&value);
    bool kindOk =
        spec.kind == AttrKind::Int ? integer != nullptr
        : spec.kind == AttrKind::Float
            ? integer != nullptr || std::holds_alternative<double>(value)
        : spec.kind == AttrKind::IntList ? list != nullptr
                                         : string != nullptr;
    std::string attr = "attribute '" + spec.name + "'";
    if (!kindOk)
      return atInstr(i, "op schema",
                     attr + " must be " + attrKindName(spec.kind) + ", got " +
                         describeValue(value),
                     spec.name);
    if (spec.kind == AttrKind::Int && *integer < spec.minimum)
      return atInstr(i, "op schema",
                     attr + " must be >= " + std::to_string(spec.minimum) +
                         ", got " + std::to_string(*integer),
                     spec.name);
    if (spec.kind == AttrKind::IntList)
      for (int64_t element : *list)
        if (element < spec.minimum)
          return atInstr(
              i, "op schema",
              attr + " must hold integers >= " + std::to_string(spec.minimum) +
                  ", got " + std::to_string(element),
              spec.name);
    if (spec.kind == AttrKind::String &&
        std::find(spec.choices.begin(), spec.choices.end(), *string) ==
            spec.choices.end()) {
      std::vector<std::string> choices;
      for (const std::string &choice : spec.choices)
        choices.push_back(text::quoted(choice));
      return atInstr(i, "op schema",
                     attr + " must be " + joined(choices, " or ") + ", got " +
                         text::quoted(*string),
                     spec.name);
    }
    // An all_reduce over several axes at once names them joined by ','
    // ("dp,tp"); each must be an axis of the mesh.
    auto isMeshAxis = [&](const std::string &name) {
      return std::any_of(
          plan.mesh.begin(), plan.mesh.end(),
          [&](const MeshAxis &axis) { return axis.name == name; });
    };
    bool allMeshAxes = true;
    if (spec.kind == AttrKind::Axis) {
      size_t start = 0;
      while (start <= string->size()) {
        size_t end = std::min(string->find(',', start), string->size());
        allMeshAxes &= isMeshAxis(string->substr(start, end - start));
        start = end + 1;
      }
      allMeshAxes &= string->find(',') == std::string::npos ||
                     spec.name == std::string("axis");
    }
    if (spec.kind == AttrKind::Axis && !allMeshAxes) {
      std::vector<std::string> axes;
      for (const MeshAxis &axis : plan.mesh)
        axes.push_back(axis.name);
      return atInstr(i, "mesh axis",
                     attr + " names '" + *string +
                         "', which is not an axis of the mesh (" +
                         (axes.empty() ? "it has none" : joined(axes, ", ")) +
                         ")",
                     spec.name);
    }
    return std::nullopt;
  }

  /// Operands, then results.
  std::vector<Slot> slots(int64_t i, const OpSchema &schema) const {
    const Instruction &instr = plan.instructions[i];
    std::vector<Slot> result;
    for (auto [ids, specs] : {std::pair{&instr.operands, &schema.operands},
                              {&instr.results, &schema.results}})
      for (size_t k = 0; k < ids->size(); ++k) {
        bool repeats = schema.variadic ||
                       (schema.repeatedOperand && ids == &instr.operands);
        const SlotSpec &spec = repeats ? specs->front() : (*specs)[k];
        std::string role = spec.role;
        if (repeats)
          role += "[" + std::to_string(k) + "]";
        result.push_back({role, spec.type, (*ids)[k]});
      }
    return result;
  }

  Violation checkDTypes(int64_t i, const OpSchema &schema) const {
    std::vector<Slot> all = slots(i, schema);
    // A variadic op's pairs each have their own float type, as each
    // repeated operand does.
    if (schema.repeatedOperand) {
      for (const Slot &slot : all)
        if (Violation v = checkGroup(i, schema, {slot}))
          return v;
      return std::nullopt;
    }
    size_t numGroups =
        schema.variadic ? plan.instructions[i].operands.size() : 1;
    for (size_t group = 0; group < numGroups; ++group) {
      std::vector<Slot> members;
      for (size_t k = 0; k < all.size(); ++k)
        if (!schema.variadic || k % numGroups == group)
          members.push_back(all[k]);
      if (Violation v = checkGroup(i, schema, members))
        return v;
    }
    return std::nullopt;
  }

  /// Slots marked 'T' share one float type, those marked 'A' one type of
  /// any kind; 'F' and 'I' are fixed.
  Violation checkGroup(int64_t i, const OpSchema &schema,
                       const std::vector<Slot> &members) const {
    const Slot *firstFloat = nullptr, *firstAny = nullptr;
    std::vector<std::string> floatRoles;
    for (const Slot &slot : members)
      if (slot.type == 'T')
        floatRoles.push_back(slot.role);
    for (const Slot &slot : members) {
      DType dtype = plan.buffers[slot.buffer].dtype;
      std::string what = slot.role + " (" + bufferName(slot.buffer) + ") is " +
                         dtypeName(dtype);
      if (slot.type == 'F' && dtype != DType::F32)
        return atInstr(i, "dtype", what + ", must be f32");
      if (slot.type == 'I' && dtype != DType::I32)
        return atInstr(i, "dtype", what + ", must be i32");
      if (slot.type == 'A') {
        if (!firstAny)
          firstAny = &slot;
        else if (dtype != plan.buffers[firstAny->buffer].dtype)
          return atInstr(i, "dtype",
                         what + " but " + firstAny->role + " (" +
                             bufferName(firstAny->buffer) + ") is " +
                             dtypeName(plan.buffers[firstAny->buffer].dtype));
        continue;
      }
      if (slot.type != 'T')
        continue;
      if (dtype != DType::F32 && dtype != DType::BF16)
        return atInstr(i, "dtype", what + ", must be f32 or bf16");
      if (!firstFloat) {
        firstFloat = &slot;
        continue;
      }
      DType first = plan.buffers[firstFloat->buffer].dtype;
      if (dtype != first)
        return atInstr(i, "dtype",
                       what + " but " + firstFloat->role + " (" +
                           bufferName(firstFloat->buffer) + ") is " +
                           dtypeName(first) + "; " + schema.name +
                           " takes one float type for " +
                           joined(floatRoles, " and "));
    }
    return std::nullopt;
  }

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

  const Plan &plan;
  const int64_t numStreams, numEvents;
  std::vector<int64_t> signaller, position;
  std::vector<std::vector<int64_t>> clock;
};

} // namespace

std::optional<ContractViolation> findContractViolation(const Plan &plan) {
  if (auto violation = Checker(plan).run())
    return violation;
  return findValueViolation(plan);
}

Status checkPlanContract(const Plan &plan) {
  if (auto violation = findContractViolation(plan))
    return Status::invalidInput(violation->message);
  return Status::ok();
}

} // namespace sharc::plan
