//===- ContractValues.h - the contract's rules on values --------*- C++ -*-===//
// defines: findValueViolation
//
// The rules of PlanContract.h that look at what numbers mean rather than
// at ids and kinds; each is a plan that reads well and computes the wrong
// thing with exit 0 (issue 11):
//   program     at least one instruction (an empty one "trains" to loss 0)
//   optimizer   adamw: lr and weight_decay finite and >= 0, beta1 and
//               beta2 in [0, 1), eps finite and > 0
//   vocabulary  every token id in [0, vocab_size) has an embedding row
//               (vocab_start <= 0 and vocab_start + rows * size(vocab_axis)
//               >= vocab_size), and every valid_vocab is at least
//               vocab_size, or a label would index past the softmax
//   op schema   permute_blocks's order is a permutation whose blocks cut
//               dimension 0 of x evenly
//   in place    no instruction writes a buffer it also reads, except
//               all_reduce, all_reduce_coalesced and replicate, whose
//               kernels work in place
#pragma once

#include "planner/plan/Plan.h"
#include "planner/plan/PlanContract.h"

#include <optional>

namespace sharc::plan {

/// The first broken value rule, for a plan whose ids are all in range
/// (PlanContract.cpp checks those first).
std::optional<ContractViolation> findValueViolation(const Plan &plan);

} // namespace sharc::plan
