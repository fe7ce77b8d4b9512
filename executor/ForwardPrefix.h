//===- ForwardPrefix.h - the instructions one output needs ------*- C++ -*-===//
// defines: outputInstructions
//
// Evaluation runs only the instructions of the training step that one
// output depends on (the loss for validation, the logits for generation):
// the writers of that output, and transitively, for each
// instruction taken, every earlier writer of a buffer it reads (or updates
// in place), the signaller of every event it waits for and, for a recv,
// the send it receives (pipeline stages). Buffers are
// compared by identity and view family (a slab and its views), not by the
// arena bytes they share with other tenants over time. Run in plan order,
// one instruction after another whatever their streams (RuntimeEval.cpp),
// the subset is a valid program: the plan's order is topological and
// every wait follows its signal. Run on its streams it would not be: an
// order between two taken instructions may run through one that is left
// out (a recv ordered after the readers of the bytes it overwrites only by
// the backward's send before it on its stream, 1F1B). The
// schedule may place work the output does not need (the backward, the
// optimizer) before the output's last instruction (a microbatched plan
// scales the summed loss at the very end); that work is left out. A taken
// instruction that writes a parameter or optimizer state would make
// evaluation train, so such a plan is refused.
#pragma once

#include "executor/OpTable.h"
#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sharc::exec {

/// The instructions output `name` depends on, ascending; invalid input when
/// the plan has no such output, nothing writes it, or one of them writes the
/// param or opt_state region (results and operands the op updates in
/// place, OpDef::updatedOperands).
Result<std::vector<int64_t>> outputInstructions(const plan::Plan &plan,
                                                const OpTable &ops,
                                                const std::string &name);

} // namespace sharc::exec
