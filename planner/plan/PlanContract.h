//===- PlanContract.h - the rules a plan obeys besides syntax ---*- C++ -*-===//
// defines: ContractViolation, findContractViolation, checkPlanContract
//
// The reader (PlanIO.h) checks that a plan is well formed; the contract
// checks that it means what the runtime will do, because a GPU run that
// silently does the wrong thing is the worst outcome. Five rules, each
// named in its message (docs/plan-format.md, "The contract"):
//   op schema    the op exists, with its operand and result counts and its
//                required attributes, each of its kind (OpSchema.h); no
//                unknown attribute
//   mesh axis    every axis an attribute names is an axis of the mesh
//   dtype        every operand and result has an element type its kernel
//                takes
//   event order  every waited event is signalled by exactly one
//                instruction, listed before the wait
//   buffer overlap  no two buffers share bytes while both are live, unless
//                one is a declared view of the other (Buffer::viewOf), which
//                lies inside it
// then the rules on values (ContractValues.h): program, optimizer,
// vocabulary and in place.
//
//   if (auto violation = findContractViolation(plan))
//     puts(violation->message.c_str()); // "instr 7 (rms_norm): op schema:
//                                       //  missing attribute 'eps' ..."
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <optional>
#include <string>

namespace sharc::plan {

struct ContractViolation {
  enum class Site : uint8_t { Instruction, Buffer };
  Site site = Site::Instruction;
  int64_t index = 0; ///< the instruction's index or the buffer's id
  std::string attr;  ///< the attribute at fault, if any
  std::string message;
};

/// The first broken rule, checked instruction by instruction (schema, mesh
/// axes, dtypes), then the events, then the buffers; nothing when the plan
/// keeps every rule. Ids out of range are reported, never followed.
std::optional<ContractViolation> findContractViolation(const Plan &plan);

/// invalidInput(message) for the first broken rule.
Status checkPlanContract(const Plan &plan);

} // namespace sharc::plan
