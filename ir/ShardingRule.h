//===- ShardingRule.h - what a sharding rule is asked and says --*- C++ -*-===//
// defines: AxisQuery, AxisRule
//
// An op's ShardingRuleOpInterface answers one mesh axis at a time: given
// the placements its local operands have on that axis, which placements it
// needs them in and which its results then have. sharc-spmdize brings the
// operands there with the generic reshard (passes/Reshard.h) and asks the
// op to build itself on them.
//
//   AxisQuery query{"tp", 2, {kR, 0}, /*activation=*/0};
//   AxisRule rule;
//   if (succeeded(rules.getAxisRule(query, rule)))  // matmul: column
//     ... rule.operands == {kR, 0}, rule.results == {2}
#pragma once

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace sharc {

struct AxisQuery {
  llvm::StringRef axis;
  int64_t size = 1;
  /// Each operand's current code on the axis (placement::kI, ... or d).
  llvm::SmallVector<int64_t> operands;
  /// The code [S, B, H] activations take between layers on this axis, the
  /// layout's choice: a partial sum is brought here (S(0) under sequence
  /// parallelism, S(1) for a batch split, I when the axis splits weights
  /// only).
  int64_t activation = -1;
};

struct AxisRule {
  llvm::SmallVector<int64_t> operands; ///< the codes the op needs
  llvm::SmallVector<int64_t> results;  ///< the codes its results have
};

} // namespace sharc
