//===- ContractChecker.h - what the contract's checkers share ---*- C++ -*-===//
// defines: ContractChecker
//
// The contract (PlanContract.h) is checked in parts, each a class over one
// plan: the rules an instruction keeps on its own (ContractInstructions.h)
// and the rules on order, events and buffer overlap (PlanContract.cpp).
// Their messages name instructions and buffers alike ("instr 7 (rms_norm):
// RULE: detail", "buffer 3 'x'"), so the naming is written once, here.
#pragma once

#include "planner/plan/PlanContract.h"

#include <optional>
#include <string>

namespace sharc::plan {

class ContractChecker {
protected:
  using Violation = std::optional<ContractViolation>;

  explicit ContractChecker(const Plan &plan) : plan(plan) {}

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

  const Plan &plan;
};

} // namespace sharc::plan
