//===- ContractInstructions.h - the contract per instruction ----*- C++ -*-===//
// defines: findInstructionViolation
//
// The rules of PlanContract.h that each instruction keeps on its own, read
// off it and its op's schema (OpSchema.h) without looking at any other
// instruction:
//   ids          every buffer, event, stream and stage it names exists
//   op schema    the op exists, with its operand and result counts and its
//                required attributes, each of its kind; no unknown
//                attribute
//   mesh axis    every axis an attribute names is an axis of the mesh
//   dtype        every operand and result has an element type its kernel
//                takes
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/PlanContract.h"

#include <optional>

namespace sharc::plan {

/// The first broken rule: every instruction's ids first, so that no later
/// rule follows an id out of range, then the schema, mesh axes and dtypes
/// instruction by instruction.
std::optional<ContractViolation> findInstructionViolation(const Plan &plan);

} // namespace sharc::plan
