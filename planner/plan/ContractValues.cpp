//===- ContractValues.cpp - the contract's rules on values ----------------===//

#include "planner/plan/ContractValues.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace sharc::plan {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

ContractViolation atInstr(const Plan &plan, int64_t i, const std::string &attr,
                          const std::string &rule, const std::string &detail) {
  return {ContractViolation::Site::Instruction, i, attr,
          "instr " + std::to_string(i) + " (" + plan.instructions[i].op +
              "): " + rule + ": " + detail};
}

std::optional<ContractViolation> checkOptimizer(const Plan &plan, int64_t i) {
  const Instruction &instr = plan.instructions[i];
  struct Bound {
    const char *attr;
    double low;
    bool lowOpen;
    double high; ///< exclusive
  };
  for (const Bound &bound :
       {Bound{"lr", 0, false, INFINITY}, Bound{"beta1", 0, false, 1},
        Bound{"beta2", 0, false, 1}, Bound{"eps", 0, true, INFINITY},
        Bound{"weight_decay", 0, false, INFINITY}}) {
    double value = instr.getFloat(bound.attr, NAN);
    bool inside = std::isfinite(value) &&
                  (bound.lowOpen ? value > bound.low : value >= bound.low) &&
                  value < bound.high;
    if (!inside)
      return atInstr(plan, i, bound.attr, "optimizer",
                     std::string(bound.attr) + " " + number(value) +
                         " is outside " + (bound.lowOpen ? "(" : "[") +
                         number(bound.low) + ", " + number(bound.high) + ")");
  }
  // Clipping: the step's squared global norm as the last operand (the
  // fifth of adamw, the sixth of adamw_master) and the largest norm as
  // max_norm, both or neither.
  bool clips = instr.operands.size() == (instr.op == "adamw" ? 5u : 6u);
  bool hasMaxNorm = instr.attrs.count("max_norm") != 0;
  if (clips != hasMaxNorm)
    return atInstr(plan, i, hasMaxNorm ? "max_norm" : "", "optimizer",
                   hasMaxNorm ? "max_norm without a grad_norm_sq operand"
                              : "a grad_norm_sq operand without max_norm");
  double maxNorm = instr.getFloat("max_norm", NAN);
  if (clips && !(std::isfinite(maxNorm) && maxNorm > 0))
    return atInstr(plan, i, "max_norm", "optimizer",
                   "max_norm " + number(maxNorm) + " is outside (0, inf)");
  return std::nullopt;
}

std::optional<ContractViolation> checkSumSquares(const Plan &plan, int64_t i) {
  const Instruction &instr = plan.instructions[i];
  size_t numReplicas = instr.getInts("replicas").size();
  if (numReplicas != instr.operands.size())
    return atInstr(plan, i, "replicas", "op schema",
                   "replicas has " + std::to_string(numReplicas) +
                       " entries for " + std::to_string(instr.operands.size()) +
                       " operands; it needs one per operand");
  return std::nullopt;
}

/// ring_shift moves a block one rank along a chain of the axis' ranks, or
/// round the whole ring (wrap 1, from rank 0).
std::optional<ContractViolation> checkRingShift(const Plan &plan, int64_t i) {
  const Instruction &instr = plan.instructions[i];
  int64_t offset = instr.getInt("offset"), first = instr.getInt("first");
  if (offset != 1 && offset != -1)
    return atInstr(plan, i, "offset", "op schema",
                   "offset " + std::to_string(offset) + " is not 1 or -1");
  int64_t size = plan.axisSize(instr.getString("axis"));
  if (first >= size)
    return atInstr(plan, i, "first", "op schema",
                   "first " + std::to_string(first) + " is not a rank of " +
                       instr.getString("axis") + " (" + std::to_string(size) +
                       ")");
  int64_t wrap = instr.getInt("wrap", 0);
  if (wrap != 0 && wrap != 1)
    return atInstr(plan, i, "wrap", "op schema",
                   "wrap " + std::to_string(wrap) + " is not 0 or 1");
  if (wrap == 1 && first != 0)
    return atInstr(plan, i, "first", "op schema",
                   "a wrapping ring_shift takes the whole ring: first must be "
                   "0, got " +
                       std::to_string(first));
  return std::nullopt;
}

/// permute_blocks's order is a permutation of 0..n-1 whose n blocks cut
/// dimension 0 of x evenly, or the copy would read past x or leave rows
/// of y unwritten.
std::optional<ContractViolation> checkPermutation(const Plan &plan, int64_t i) {
  const Instruction &instr = plan.instructions[i];
  std::vector<int64_t> order = instr.getInts("order");
  auto n = static_cast<int64_t>(order.size());
  std::vector<bool> seen(order.size(), false);
  bool isPermutation = n > 0;
  for (int64_t block : order) {
    isPermutation = isPermutation && block < n && !seen[block];
    if (block >= 0 && block < n)
      seen[block] = true;
  }
  const std::vector<int64_t> &shape = plan.buffers[instr.operands.at(0)].shape;
  if (isPermutation && !shape.empty() && shape[0] % n == 0)
    return std::nullopt;
  return atInstr(
      plan, i, "order", "op schema",
      "order of " + std::to_string(n) + " blocks is not a permutation of 0.." +
          std::to_string(n - 1) + " cutting dimension 0 of x " + "evenly");
}

std::optional<ContractViolation> checkVocabulary(const Plan &plan, int64_t i) {
  const Instruction &instr = plan.instructions[i];
  if (instr.op == "embedding" || instr.op == "embedding_grad") {
    int64_t table =
        instr.op == "embedding" ? instr.operands[0] : instr.results[0];
    const std::vector<int64_t> &shape = plan.buffers[table].shape;
    if (shape.size() != 2)
      return std::nullopt; // the kernel's bind refuses it, naming the rank
    std::string axis = instr.getString("vocab_axis");
    int64_t parts = axis.empty() ? 1 : plan.axisSize(axis);
    int64_t start = instr.getInt("vocab_start", 0);
    int64_t end = start + shape[0] * parts;
    if (start > 0 || end < plan.vocabSize)
      return atInstr(plan, i, start > 0 ? "vocab_start" : "", "vocabulary",
                     "the table's rows cover token ids [" +
                         std::to_string(start) + ", " + std::to_string(end) +
                         "), but vocab_size is " +
                         std::to_string(plan.vocabSize));
  }
  auto valid = instr.attrs.find("valid_vocab");
  if (valid != instr.attrs.end() &&
      instr.getInt("valid_vocab") < plan.vocabSize)
    return atInstr(
        plan, i, "valid_vocab", "vocabulary",
        "valid_vocab " + std::to_string(instr.getInt("valid_vocab")) +
            " is below vocab_size " + std::to_string(plan.vocabSize) +
            ": a label would fall outside the softmax");
  return std::nullopt;
}

std::optional<ContractViolation> checkInPlace(const Plan &plan, int64_t i) {
  const Instruction &instr = plan.instructions[i];
  if (instr.op == "all_reduce" || instr.op == "all_reduce_coalesced" ||
      instr.op == "replicate")
    return std::nullopt;
  for (int64_t result : instr.results)
    if (std::find(instr.operands.begin(), instr.operands.end(), result) !=
        instr.operands.end())
      return atInstr(plan, i, "", "in place",
                     "writes buffer " + std::to_string(result) + " '" +
                         plan.buffers[result].name +
                         "', which it also reads; only all_reduce, "
                         "all_reduce_coalesced and replicate work in place");
  return std::nullopt;
}

} // namespace

std::optional<ContractViolation> findValueViolation(const Plan &plan) {
  if (plan.instructions.empty())
    return ContractViolation{ContractViolation::Site::Instruction, 0, "",
                             "program: the plan has no instructions, so a "
                             "run would train nothing"};
  for (int64_t i = 0; i < static_cast<int64_t>(plan.instructions.size()); ++i) {
    if (auto violation = checkInPlace(plan, i))
      return violation;
    if (plan.instructions[i].op == "adamw" ||
        plan.instructions[i].op == "adamw_master")
      if (auto violation = checkOptimizer(plan, i))
        return violation;
    if (plan.instructions[i].op == "sum_squares")
      if (auto violation = checkSumSquares(plan, i))
        return violation;
    if (plan.instructions[i].op == "ring_shift")
      if (auto violation = checkRingShift(plan, i))
        return violation;
    if (plan.instructions[i].op == "permute_blocks")
      if (auto violation = checkPermutation(plan, i))
        return violation;
    if (auto violation = checkVocabulary(plan, i))
      return violation;
  }
  return std::nullopt;
}

} // namespace sharc::plan
