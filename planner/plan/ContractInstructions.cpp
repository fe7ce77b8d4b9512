//===- ContractInstructions.cpp - the contract's rules per instruction ----===//
//
// Each rule here reads one instruction and its op's schema, so a message
// points at the instruction and, where one is at fault, the attribute.
// Ids come first for every instruction: the rules after them index the
// buffer table with the instruction's ids.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/ContractInstructions.h"
#include "planner/plan/ContractChecker.h"
#include "planner/plan/OpSchema.h"
#include "planner/plan/PlanText.h"

#include <algorithm>

namespace sharc::plan {
namespace {

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

/// An operand or result of one instruction, as the dtype rule sees it.
struct Slot {
  std::string role; ///< "w", or "x[2]" in a variadic op
  char type;        ///< SlotSpec::type
  int64_t buffer;
};

class InstructionChecker : public ContractChecker {
public:
  explicit InstructionChecker(const Plan &plan) : ContractChecker(plan) {}

  Violation run() const {
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
    return std::nullopt;
  }

private:
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
    size_t maxOut = schema.results.size();
    size_t minOut = maxOut - schema.workspaceResults;
    bool ok = schema.variadic ? numIn >= 1 && numOut == numIn
              : schema.repeatedOperand
                  ? numIn >= 1 && numOut == maxOut
                  : numIn >= minIn && numIn <= maxIn && numOut >= minOut &&
                        numOut <= maxOut;
    if (ok)
      return std::nullopt;
    std::string results = minOut < maxOut ? std::to_string(minOut) + " or " +
                                                counted(maxOut, "result") +
                                                " (the last a workspace)"
                                          : counted(maxOut, "result");
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
};

} // namespace

std::optional<ContractViolation> findInstructionViolation(const Plan &plan) {
  return InstructionChecker(plan).run();
}

} // namespace sharc::plan
