//===- ContractValuesTest.cpp - plans whose numbers contradict them -------===//
//
// Each case takes a valid plan, breaks one value rule of ContractValues.h
// and asserts the exact message; before these rules every one of them ran
// to exit 0 (an empty program at loss 0, ids past the embedding table read
// as zeros, a label past the softmax read the next row's logits).

#include "planner/plan/ContractValues.h"
#include "planner/plan/PlanIO.h"
#include "tests/unit/executor/TestPlans.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::plan;

namespace {

Plan linearPlan(int64_t tp = 1) {
  exec::test::LinearModel model;
  model.vocabParallel = tp > 1;
  return exec::test::makeLinearPlan(model, 1, tp);
}

int64_t indexOf(const Plan &plan, const std::string &op) {
  for (size_t i = 0; i < plan.instructions.size(); ++i)
    if (plan.instructions[i].op == op)
      return static_cast<int64_t>(i);
  FAIL("no " << op);
  return -1;
}

std::string violation(const Plan &plan) {
  std::optional<ContractViolation> found = findContractViolation(plan);
  REQUIRE(found);
  return found->message;
}

} // namespace

TEST_CASE("program: a plan without instructions is refused", "[plan]") {
  Plan plan = linearPlan();
  REQUIRE_FALSE(findContractViolation(plan));
  plan.instructions.clear();
  REQUIRE(violation(plan) ==
          "program: the plan has no instructions, so a run would train "
          "nothing");
  // Read from a file, it points at the instructions key.
  std::string text = writePlan(plan);
  Result<Plan> read = parsePlan(text, "p.yaml");
  REQUIRE(read.status().exitCode() == 2);
  REQUIRE_THAT(read.status().message(),
               Catch::Matchers::StartsWith("p.yaml:") &&
                   Catch::Matchers::EndsWith(": program: the plan has no "
                                             "instructions, so a run would "
                                             "train nothing"));
}

TEST_CASE("optimizer: adamw hyperparameters stay in range", "[plan]") {
  struct Case {
    const char *attr;
    double value;
    const char *message;
  };
  for (const Case &bad :
       {Case{"lr", -1e-3, "lr -0.001 is outside [0, inf)"},
        Case{"beta1", 1.5, "beta1 1.5 is outside [0, 1)"},
        Case{"beta2", 1.0, "beta2 1 is outside [0, 1)"},
        Case{"eps", 0.0, "eps 0 is outside (0, inf)"},
        Case{"weight_decay", NAN, "weight_decay nan is outside [0, inf)"}}) {
    Plan plan = linearPlan();
    int64_t adamw = indexOf(plan, "adamw");
    plan.instructions[adamw].attrs[bad.attr] = bad.value;
    std::optional<ContractViolation> found = findContractViolation(plan);
    REQUIRE(found);
    CHECK(found->attr == bad.attr);
    CHECK(found->message == "instr " + std::to_string(adamw) +
                                " (adamw): optimizer: " + bad.message);
  }
}

TEST_CASE("optimizer: max_norm comes with the squared norm operand", "[plan]") {
  Plan plan = linearPlan();
  int64_t adamw = indexOf(plan, "adamw");
  int64_t loss = plan.findOutput("loss")->buffer; // an f32 scalar
  std::string prefix = "instr " + std::to_string(adamw) + " (adamw): ";
  Instruction &update = plan.instructions[adamw];
  update.attrs["max_norm"] = 1.0;
  REQUIRE(violation(plan) ==
          prefix + "optimizer: max_norm without a grad_norm_sq operand");
  update.operands.push_back(loss);
  REQUIRE_FALSE(findContractViolation(plan));
  update.attrs["max_norm"] = 0.0;
  REQUIRE(violation(plan) == prefix + "optimizer: max_norm 0 is outside "
                                      "(0, inf)");
  update.attrs.erase("max_norm");
  REQUIRE(violation(plan) ==
          prefix + "optimizer: a grad_norm_sq operand without max_norm");
}

TEST_CASE("op schema: sum_squares has one replica count per operand",
          "[plan]") {
  Plan plan = linearPlan();
  Instruction &update = plan.instructions[indexOf(plan, "adamw")];
  int64_t grad = update.operands[1];
  int64_t loss = plan.findOutput("loss")->buffer;
  Instruction sum;
  sum.op = "sum_squares";
  sum.operands = {grad};
  sum.results = {loss};
  sum.attrs["replicas"] = std::vector<int64_t>{2};
  plan.instructions.insert(plan.instructions.begin() + indexOf(plan, "adamw"),
                           sum);
  int64_t at = indexOf(plan, "sum_squares");
  std::string prefix = "instr " + std::to_string(at) + " (sum_squares): ";
  REQUIRE_FALSE(findContractViolation(plan));
  plan.instructions[at].attrs["replicas"] = std::vector<int64_t>{2, 1};
  REQUIRE(violation(plan) == prefix + "op schema: replicas has 2 entries for "
                                      "1 operands; it needs one per operand");
  plan.instructions[at].attrs["replicas"] = std::vector<int64_t>{0};
  REQUIRE(violation(plan) ==
          prefix + "op schema: attribute 'replicas' must hold integers >= 1, "
                   "got 0");
  plan.instructions[at].attrs["replicas"] = int64_t{1};
  REQUIRE(violation(plan) ==
          prefix + "op schema: attribute 'replicas' must be a list of "
                   "integers, got the integer 1");
  plan.instructions[at].attrs["replicas"] = std::vector<int64_t>{};
  plan.instructions[at].operands.clear();
  REQUIRE(violation(plan) == prefix + "op schema: takes one or more operands "
                                      "and 1 result, got 0 operands and 1 "
                                      "result");
}

TEST_CASE("vocabulary: every token id has a row and a softmax column",
          "[plan]") {
  Plan plan = linearPlan();
  plan.vocabSize = 9; // the table has 8 rows
  REQUIRE(violation(plan) == "instr 0 (embedding): vocabulary: the table's "
                             "rows cover token ids [0, 8), but vocab_size "
                             "is 9");
  plan = linearPlan();
  plan.instructions[0].attrs["vocab_start"] = int64_t{2};
  REQUIRE(violation(plan) == "instr 0 (embedding): vocabulary: the table's "
                             "rows cover token ids [2, 10), but vocab_size "
                             "is 8");
  plan = linearPlan();
  int64_t loss = indexOf(plan, "cross_entropy");
  plan.instructions[loss].attrs["valid_vocab"] = int64_t{7};
  REQUIRE(violation(plan) ==
          "instr " + std::to_string(loss) +
              " (cross_entropy): vocabulary: valid_vocab 7 is below "
              "vocab_size 8: a label would fall outside the softmax");
  // Split over tp, the shards together must cover the vocabulary.
  plan = linearPlan(2);
  REQUIRE_FALSE(findContractViolation(plan));
}

TEST_CASE("in place: only collectives may write a buffer they read", "[plan]") {
  Plan plan = linearPlan();
  int64_t matmul = indexOf(plan, "matmul");
  Instruction &instr = plan.instructions[matmul];
  instr.results[0] = instr.operands[0];
  REQUIRE_THAT(violation(plan),
               Catch::Matchers::StartsWith(
                   "instr " + std::to_string(matmul) +
                   " (matmul): in place: writes buffer " +
                   std::to_string(instr.operands[0]) +
                   " 'x', which it also "
                   "reads; only all_reduce, all_reduce_coalesced and "
                   "replicate work in place"));
  // The vocab-parallel loss all-reduces its statistics in place.
  Plan split = linearPlan(2);
  REQUIRE(split.instructions[indexOf(split, "all_reduce")].results ==
          split.instructions[indexOf(split, "all_reduce")].operands);
  REQUIRE_FALSE(findContractViolation(split));
}

TEST_CASE("op schema: ring_shift moves one rank along a chain of its axis "
          "or round the ring",
          "[plan]") {
  Plan plan = linearPlan(/*tp=*/2);
  Instruction &update = plan.instructions[indexOf(plan, "adamw")];
  Instruction shift;
  shift.op = "ring_shift";
  shift.operands = {update.operands[1]}; // the gradient
  shift.results = {update.operands[2]};  // a moment of its shape and type
  shift.attrs["axis"] = std::string("tp");
  shift.attrs["offset"] = int64_t{1};
  shift.attrs["first"] = int64_t{0};
  shift.stream = update.stream;
  plan.instructions.insert(plan.instructions.begin() + indexOf(plan, "adamw"),
                           shift);
  int64_t at = indexOf(plan, "ring_shift");
  std::string prefix = "instr " + std::to_string(at) + " (ring_shift): ";
  REQUIRE_FALSE(findContractViolation(plan));
  plan.instructions[at].attrs["offset"] = int64_t{0};
  REQUIRE(violation(plan) == prefix + "op schema: offset 0 is not 1 or -1");
  plan.instructions[at].attrs["offset"] = int64_t{-1};
  plan.instructions[at].attrs["first"] = int64_t{2};
  REQUIRE(violation(plan) ==
          prefix + "op schema: first 2 is not a rank of tp (2)");
  // The whole ring (the balanced split's): wrap 1, from rank 0 only.
  plan.instructions[at].attrs["first"] = int64_t{0};
  plan.instructions[at].attrs["wrap"] = int64_t{1};
  REQUIRE_FALSE(findContractViolation(plan));
  plan.instructions[at].attrs["wrap"] = int64_t{2};
  REQUIRE(violation(plan) == prefix + "op schema: wrap 2 is not 0 or 1");
  plan.instructions[at].attrs["wrap"] = int64_t{1};
  plan.instructions[at].attrs["first"] = int64_t{1};
  REQUIRE(violation(plan) == prefix + "op schema: a wrapping ring_shift takes "
                                      "the whole ring: first must be 0, got 1");
}
