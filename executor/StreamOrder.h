//===- StreamOrder.h - happens-before over a plan's streams -----*- C++ -*-===//
// defines: StreamOrder, analyzeStreams, findHazard, lastUses
//
// Each rank runs one thread per stream. A stream runs the instructions that
// carry its id in list order; before starting one it waits until every event
// in `waits` has been signalled in the current step, after finishing it
// signals every event in `signals`. An event is signalled by at most one
// instruction and resets every step, so a wait orders its instruction after
// exactly one other. That gives the order the plan guarantees, whatever the
// timing: A happens-before B when they share a stream and A comes first, or
// when B waits for an event signalled by A or by an instruction A
// happens-before. It is computed with one vector clock per instruction.
//
// analyzeStreams rejects what can never finish: an event waited for that no
// instruction signals, a second signaller, and waits that form a cycle. The
// hazard check then asks, for every two instructions on different streams
// that touch overlapping bytes of one region (at least one writing), whether
// either happens-before the other; if neither does, their order is timing
// luck, and the plan is wrong even where every run so far came out right.
// Instructions of two pipeline stages (Instruction::stage) run on different
// ranks and never conflict; the plan lists stage after stage, so a stage's
// happens-before never passes through another's.
//
//   auto order = analyzeStreams(plan);             // invalidInput on a bad
//   wait bool ordered = order->happensBefore(3, 7); SHARC_TRY(findHazard(plan,
//   *order, updatedOperands)); // runtimeError
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <vector>

namespace sharc::exec {

struct StreamOrder {
  int64_t numStreams = 1;
  /// For each stream, its instructions' indices in list order.
  std::vector<std::vector<int64_t>> streamInstrs;
  /// For each event, the instruction that signals it, -1 for none.
  std::vector<int64_t> signaller;
  /// Per instruction: its stream and its 1-based position in that stream.
  std::vector<int64_t> streamOf, position;
  /// Per instruction: clock[i][s] is how many instructions of stream s
  /// happen-before i or are i.
  std::vector<std::vector<int64_t>> clock;

  /// True when a != b and a is guaranteed to finish before b starts.
  bool happensBefore(int64_t a, int64_t b) const {
    return a != b && clock[b][streamOf[a]] >= position[a];
  }
  bool ordered(int64_t a, int64_t b) const {
    return happensBefore(a, b) || happensBefore(b, a);
  }
};

/// Checks the streams and events of every instruction and computes the
/// happens-before order; errors are invalidInput naming the instruction.
Result<StreamOrder> analyzeStreams(const plan::Plan &plan);

/// The first pair of instructions (smallest later index, then smallest
/// earlier index) that touch overlapping bytes, one of them writing, with no
/// happens-before either way: a runtimeError naming both. Operands are read
/// except operand k of instruction i when bit k of updatedOperands[i] is set
/// (an in-place update, as adamw's); results are written.
Status findHazard(const plan::Plan &plan, const StreamOrder &order,
                  const std::vector<uint32_t> &updatedOperands);

/// For each instruction, the activation buffers it is the last use of: every
/// other use of the buffer happens-before it. A buffer whose uses are not
/// ordered that way has no last use and is left out.
std::vector<std::vector<int64_t>> lastUses(const plan::Plan &plan,
                                           const StreamOrder &order);

} // namespace sharc::exec
