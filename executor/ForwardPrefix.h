//===- ForwardPrefix.h - the instructions that compute the loss -*- C++ -*-===//
// defines: forwardLossEnd
//
// Evaluation runs the plan's training step only up to the loss: the
// instructions 0 .. end-1, end being one past the last instruction that
// writes the `loss` output. The prefix is self-contained because the plan
// lists instructions in a topological order and every wait after its
// signal (docs/plan-format.md), so every producer of the loss and every
// event a prefix instruction waits for lies in the prefix. Backward
// instructions the schedule placed before the loss's last reduction may be
// in it; they only write activations and gradients, which the next step
// rewrites. What makes a prefix unusable is an instruction that writes a
// parameter or optimizer state (adamw): then evaluation would train.
#pragma once

#include "executor/OpTable.h"
#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>

namespace sharc::exec {

/// One past the last instruction writing `loss` (or bytes of its buffer);
/// invalid input when the plan has no loss output or an instruction of the
/// prefix writes the param or opt_state region (results and operands the
/// op updates in place, OpDef::updatedOperands).
Result<int64_t> forwardLossEnd(const plan::Plan &plan, const OpTable &ops);

} // namespace sharc::exec
