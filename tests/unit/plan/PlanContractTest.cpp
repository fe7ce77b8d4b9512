//===- PlanContractTest.cpp - hand-edited plans that break a rule ---------===//

#include "planner/plan/PlanContract.h"
#include "planner/plan/OpSchema.h"
#include "planner/plan/PlanIO.h"
#include "tests/unit/executor/TestPlans.h"

#include <catch2/catch.hpp>

using namespace sharc;
using namespace sharc::plan;
using Catch::Matchers::Contains;

namespace {

/// A valid two-stream plan: rms_norm and matmul on stream 0, the matmul's
/// result all-reduced on stream 1, then an add that waits for it, writing
/// the bytes of 'h' (dead by then), and a scale into the output.
const std::string kBase = R"(sharc_plan: 1
mesh: [{name: dp, size: 1}, {name: tp, size: 2}]
num_streams: 2
num_events: 2
regions: {param: 80, input: 64, output: 64, activation: 192}
buffers:
  - {id: 0, name: "w", region: param, offset: 0, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 1, name: "n", region: param, offset: 64, bytes: 16, dtype: f32, shape: [4]}
  - {id: 2, name: "x", region: input, offset: 0, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 3, name: "h", region: activation, offset: 0, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 4, name: "y", region: activation, offset: 64, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 5, name: "s", region: activation, offset: 128, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 6, name: "z", region: activation, offset: 0, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 7, name: "o", region: output, offset: 0, bytes: 64, dtype: f32, shape: [4, 4]}
inputs:
  - {name: "x", buffer: 2, global_shape: [4, 4]}
outputs:
  - {name: "o", buffer: 7, global_shape: [4, 4]}
instructions:
  - {op: rms_norm, in: [2, 1], out: [3], attrs: {eps: 1e-06, group_size: 4}}
  - {op: matmul, in: [3, 0], out: [4], signals: [0]}
  - {op: all_reduce, in: [4], out: [5], stream: 1, waits: [0], signals: [1], attrs: {axis: "tp", reduce: "sum"}}
  - {op: add, in: [4, 5], out: [6], waits: [1]}
  - {op: scale, in: [6], out: [7], attrs: {factor: 0.5}}
)";

/// kBase with `from` replaced by `to` on line `line` (1-based).
std::string edit(int line, const std::string &from, const std::string &to) {
  size_t begin = 0;
  for (int i = 1; i < line; ++i)
    begin = kBase.find('\n', begin) + 1;
  size_t at = kBase.find(from, begin);
  REQUIRE(at < kBase.find('\n', begin));
  return std::string(kBase).replace(at, from.size(), to);
}

std::string contractError(const std::string &text) {
  Result<Plan> result = parsePlan(text, "plan.yaml");
  REQUIRE_FALSE(result.isOk());
  REQUIRE(result.status().exitCode() == 2);
  // The same plan read without the contract is well formed.
  REQUIRE(parsePlan(text, "plan.yaml", PlanChecks::FormatOnly).isOk());
  return result.status().message();
}

} // namespace

TEST_CASE("the base plan keeps every rule", "[plan]") {
  Result<Plan> plan = parsePlan(kBase, "plan.yaml");
  INFO(plan.status().message());
  REQUIRE(plan.isOk());
  REQUIRE(checkPlanContract(*plan).isOk());
}

TEST_CASE("op schema: ops, counts and typed attributes", "[plan]") {
  SECTION("unknown op") {
    REQUIRE(contractError(edit(23, "op: add", "op: addd")) ==
            "plan.yaml:23:5: instr 3 (addd): op schema: unknown op");
  }
  SECTION("operand count") {
    REQUIRE(contractError(edit(21, "in: [3, 0]", "in: [3]")) ==
            "plan.yaml:21:5: instr 1 (matmul): op schema: takes 2 operands "
            "and 1 result, got 1 operand and 1 result");
  }
  SECTION("missing attribute, no default") {
    REQUIRE(contractError(edit(20, "eps: 1e-06, ", "")) ==
            "plan.yaml:20:5: instr 0 (rms_norm): op schema: missing "
            "attribute 'eps' (a float)");
    REQUIRE(contractError(edit(22, ", reduce: \"sum\"", "")) ==
            "plan.yaml:22:5: instr 2 (all_reduce): op schema: missing "
            "attribute 'reduce' (a string)");
  }
  SECTION("unknown attribute") {
    REQUIRE(contractError(edit(20, "eps:", "epsilon:")) ==
            "plan.yaml:20:59: instr 0 (rms_norm): op schema: unknown "
            "attribute 'epsilon' (rms_norm takes eps, group_size)");
    REQUIRE_THAT(
        contractError(edit(21, "signals: [0]", "signals: [0], attrs: {t: 1}")),
        Contains("instr 1 (matmul): op schema: unknown attribute 't' (matmul "
                 "takes none)"));
  }
  SECTION("mistyped attribute") {
    REQUIRE(contractError(edit(20, "1e-06", "\"small\"")) ==
            "plan.yaml:20:55: instr 0 (rms_norm): op schema: attribute 'eps' "
            "must be a float, got the string \"small\"");
    REQUIRE_THAT(contractError(edit(20, "group_size: 4", "group_size: 4.0")),
                 Contains("instr 0 (rms_norm): op schema: attribute "
                          "'group_size' must be an integer, got the float "
                          "4.0"));
    REQUIRE_THAT(contractError(edit(22, "\"tp\"", "1")),
                 Contains("attribute 'axis' must be a mesh axis name, got "
                          "the integer 1"));
    REQUIRE_THAT(contractError(edit(24, "0.5", "[1]")),
                 Contains("attribute 'factor' must be a float, got a list"));
  }
  SECTION("attribute out of its range") {
    REQUIRE_THAT(contractError(edit(20, "group_size: 4", "group_size: 0")),
                 Contains("instr 0 (rms_norm): op schema: attribute "
                          "'group_size' must be >= 1, got 0"));
    REQUIRE_THAT(contractError(edit(22, "\"sum\"", "\"mean\"")),
                 Contains("instr 2 (all_reduce): op schema: attribute "
                          "'reduce' must be \"sum\" or \"max\", got \"mean\""));
  }
  SECTION("an integer is taken as a float") {
    REQUIRE(parsePlan(edit(24, "0.5", "2"), "plan.yaml").isOk());
  }
  SECTION("permute_blocks takes a permutation cutting dimension 0 evenly") {
    auto permute = [](const std::string &order) {
      return edit(24, "scale, in: [6], out: [7], attrs: {factor: 0.5}",
                  "permute_blocks, in: [6], out: [7], attrs: {order: " + order +
                      "}");
    };
    REQUIRE(parsePlan(permute("[1, 0]"), "plan.yaml").isOk());
    REQUIRE_THAT(contractError(permute("[0, 0]")),
                 Contains("instr 4 (permute_blocks): op schema: order of 2 "
                          "blocks is not a permutation of 0..1"));
    REQUIRE_THAT(contractError(permute("[0, 2, 1]")),
                 Contains("order of 3 blocks is not a permutation of 0..2 "
                          "cutting dimension 0 of x evenly"));
  }
}

TEST_CASE("mesh axis: attributes name axes of the mesh", "[plan]") {
  REQUIRE(contractError(edit(22, "\"tp\"", "\"pp\"")) ==
          "plan.yaml:22:92: instr 2 (all_reduce): mesh axis: attribute "
          "'axis' names 'pp', which is not an axis of the mesh (dp, tp)");
  std::string noMesh =
      edit(2, "[{name: dp, size: 1}, {name: tp, size: 2}]", "[]");
  REQUIRE_THAT(contractError(noMesh),
               Contains("instr 2 (all_reduce): mesh axis: attribute 'axis' "
                        "names 'tp', which is not an axis of the mesh (it "
                        "has none)"));
}

TEST_CASE("dtype: operands and results have types their kernel takes",
          "[plan]") {
  SECTION("one float type per GEMM") {
    REQUIRE(contractError(edit(7, "f32", "bf16")) ==
            "plan.yaml:21:5: instr 1 (matmul): dtype: w (buffer 0 'w') is "
            "bf16 but x (buffer 3 'h') is f32; matmul takes one float type "
            "for x, w and y");
  }
  SECTION("a float slot") {
    REQUIRE(contractError(edit(9, "f32", "i32")) ==
            "plan.yaml:20:5: instr 0 (rms_norm): dtype: x (buffer 2 'x') is "
            "i32, must be f32 or bf16");
  }
  SECTION("the collective's input and output") {
    REQUIRE_THAT(contractError(edit(12, "f32", "bf16")),
                 Contains("instr 2 (all_reduce): dtype: y (buffer 5 's') is "
                          "bf16 but x (buffer 4 'y') is f32; all_reduce takes "
                          "one float type for x and y"));
  }
}

TEST_CASE("event order: every wait comes after its one signal", "[plan]") {
  SECTION("a wait listed before its signal") {
    REQUIRE(contractError(edit(20, "out: [3],", "out: [3], waits: [0],")) ==
            "plan.yaml:20:5: instr 0 (rms_norm): event order: waits for "
            "event 0, signalled by instr 1 (matmul), which does not come "
            "before it; a wait must come after its signal in instruction "
            "order");
  }
  SECTION("a wait nobody signals") {
    std::string text = edit(4, "2", "3");
    text.replace(text.find("waits: [1]}"), 11, "waits: [1, 2]}");
    REQUIRE_THAT(contractError(text),
                 Contains("instr 3 (add): event order: waits for event 2, "
                          "which no instruction signals"));
  }
  SECTION("a second signaller") {
    REQUIRE_THAT(contractError(edit(24, "out: [7],",
                                    "out: [7], signals: "
                                    "[1],")),
                 Contains("instr 4 (scale): event order: signals event 1, "
                          "which instr 2 (all_reduce) already signals; an "
                          "event has one signaller"));
  }
}

TEST_CASE("buffer overlap: no shared bytes while both buffers live", "[plan]") {
  SECTION("persistent regions never share bytes") {
    REQUIRE(contractError(edit(8, "offset: 64", "offset: 48")) ==
            "plan.yaml:8:5: buffer 1 'n': buffer overlap: shares bytes "
            "[48, 64) of region param with buffer 0 'w'; buffers of this "
            "region never share bytes (an op working in place names one "
            "buffer twice)");
  }
  SECTION("activations live at once") {
    REQUIRE(contractError(edit(12, "offset: 128", "offset: 96")) ==
            "plan.yaml:12:5: buffer 5 's': buffer overlap: shares bytes "
            "[96, 128) of region activation with buffer 4 'y' while both are "
            "live: instr 3 (add), which uses buffer 4, does not "
            "happen-before instr 2 (all_reduce), which uses buffer 5");
  }
  SECTION("reuse across streams needs an event") {
    // s on h's bytes (z moves to s's): fine while the all_reduce waits for
    // the matmul, the last use of h; without the wait, h may still be read.
    std::string reused = edit(12, "offset: 128", "offset: 0");
    reused.replace(reused.find("offset: 0, bytes: 64, dtype: f32, shape: [4, "
                               "4]}\n  - {id: 7"),
                   9, "offset: 128");
    REQUIRE(parsePlan(reused, "plan.yaml").isOk());
    std::string text = reused;
    text.replace(text.find("waits: [0], "), 12, "");
    REQUIRE_THAT(contractError(text),
                 Contains("buffer 5 's': buffer overlap: shares bytes [0, "
                          "64) of region activation with buffer 3 'h' while "
                          "both are live: instr 1 (matmul), which uses buffer "
                          "3, does not happen-before instr 2 (all_reduce), "
                          "which uses buffer 5"));
  }
  SECTION("one instruction using both") {
    REQUIRE_THAT(contractError(edit(13, "offset: 0", "offset: 128")),
                 Contains("buffer 6 'z': buffer overlap: shares bytes [128, "
                          "192) of region activation with buffer 5 's' while "
                          "both are live: instr 3 (add) uses both"));
  }
  SECTION("an output is live at the end of the step") {
    // y becomes an output as well, and o (written later) takes its bytes.
    std::string text =
        edit(14, "region: output, offset: 0", "region: activation, offset: 64");
    text.replace(text.find("instructions:"), 0,
                 "  - {name: \"y\", buffer: 4, global_shape: [4, 4]}\n");
    REQUIRE_THAT(contractError(text),
                 Contains("buffer 7 'o': buffer overlap: shares bytes [64, "
                          "128) of region activation with buffer 4 'y' while "
                          "both are live: buffer 4 'y' is live at the end of "
                          "the step"));
  }
}

namespace {

/// A data-parallel bucket of two gradients as one slab: each scale writes
/// its member's slot, one all_reduce sums the slab in place on stream 1,
/// and the two updates read the slots; instr 4 writes a spare buffer t.
//
//  192 +-----+-----+-----+-----+-----+-----+
//      |                       |  t  |     |   t: instr 4
//  128 +-----+-----+-----+-----+-----+-----+
//      |     |         grad:n              |   grad:n: instrs 1-5
//   64 +-----+-----+-----+-----+-----+-----+   grad:w: instrs 0-3
//      |        grad:w         |           |   bucket#0, both: instrs 0-5
//    0 +-----+-----+-----+-----+-----+-----+
//      0     1     2     3     4     5     6
const std::string kSlab = R"(sharc_plan: 1
mesh: [{name: dp, size: 2}]
num_streams: 2
num_events: 2
regions: {param: 128, opt_state: 256, gradient: 192}
buffers:
  - {id: 0, name: "w", region: param, offset: 0, bytes: 64, dtype: f32, shape: [16]}
  - {id: 1, name: "n", region: param, offset: 64, bytes: 64, dtype: f32, shape: [16]}
  - {id: 2, name: "m:w", region: opt_state, offset: 0, bytes: 64, dtype: f32, shape: [16]}
  - {id: 3, name: "v:w", region: opt_state, offset: 64, bytes: 64, dtype: f32, shape: [16]}
  - {id: 4, name: "m:n", region: opt_state, offset: 128, bytes: 64, dtype: f32, shape: [16]}
  - {id: 5, name: "v:n", region: opt_state, offset: 192, bytes: 64, dtype: f32, shape: [16]}
  - {id: 6, name: "bucket#0", region: gradient, offset: 0, bytes: 128, dtype: f32, shape: [32]}
  - {id: 7, name: "grad:w", region: gradient, offset: 0, bytes: 64, dtype: f32, shape: [16], view_of: 6}
  - {id: 8, name: "grad:n", region: gradient, offset: 64, bytes: 64, dtype: f32, shape: [16], view_of: 6}
  - {id: 9, name: "t", region: gradient, offset: 128, bytes: 64, dtype: f32, shape: [16]}
instructions:
  - {op: scale, in: [0], out: [7], attrs: {factor: 2.0}}
  - {op: scale, in: [1], out: [8], signals: [0], attrs: {factor: 2.0}}
  - {op: all_reduce, in: [6], out: [6], stream: 1, waits: [0], signals: [1], attrs: {axis: "dp", reduce: "sum"}}
  - {op: adamw, in: [0, 7, 2, 3], waits: [1], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: scale, in: [0], out: [9], attrs: {factor: 2.0}}
  - {op: adamw, in: [1, 8, 4, 5], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
)";

std::string slabWith(const std::string &from, const std::string &to) {
  size_t at = kSlab.find(from);
  REQUIRE(at != std::string::npos);
  return std::string(kSlab).replace(at, from.size(), to);
}

} // namespace

TEST_CASE("buffer overlap: a declared view shares its slab's bytes", "[plan]") {
  SECTION("members inside the slab, reduced in place, are accepted") {
    Result<Plan> plan = parsePlan(kSlab, "plan.yaml");
    INFO(plan.status().message());
    REQUIRE(plan.isOk());
    REQUIRE(plan->buffers[8].viewOf == 6);
  }
  SECTION("so are a slab and views among the step's outputs") {
    std::string text = kSlab;
    for (std::string from = "region: gradient"; text.find(from) < text.size();)
      text.replace(text.find(from), from.size(), "region: output");
    text.replace(text.find("gradient: 192"), 13, "output: 192");
    text.replace(text.find("instructions:"), 0,
                 "outputs:\n  - {name: \"grad:w\", buffer: 7, global_shape: "
                 "[16]}\n  - {name: \"grad:n\", buffer: 8, global_shape: "
                 "[16]}\n");
    Result<Plan> plan = parsePlan(text, "plan.yaml");
    INFO(plan.status().message());
    REQUIRE(plan.isOk());
  }
  SECTION("the same bytes without the declaration are an overlap") {
    REQUIRE(contractError(slabWith("[16], view_of: 6}\n  - {id: 9",
                                   "[16]}\n  - {id: 9")) ==
            "plan.yaml:15:5: buffer 8 'grad:n': buffer overlap: shares bytes "
            "[64, 128) of region gradient with buffer 6 'bucket#0' while "
            "both are live: instr 3 (adamw), which uses buffer 6, does not "
            "happen-before instr 1 (scale), which uses buffer 8");
  }
  SECTION("a buffer on a member's bytes while the slab lives") {
    // t moves onto grad:w, which its last update has read by then; but the
    // slab lives on until grad:n's update, so t would clobber it.
    REQUIRE(contractError(slabWith("\"t\", region: gradient, offset: 128",
                                   "\"t\", region: gradient, offset: 0")) ==
            "plan.yaml:16:5: buffer 9 't': buffer overlap: shares bytes [0, "
            "64) of region gradient with buffer 6 'bucket#0' while both are "
            "live: instr 5 (adamw), which uses buffer 6, does not "
            "happen-before instr 4 (scale), which uses buffer 9");
  }
  SECTION("a view lies inside what it views") {
    REQUIRE(contractError(slabWith("offset: 64, bytes: 64, dtype: f32, shape: "
                                   "[16], view_of",
                                   "offset: 96, bytes: 64, dtype: f32, shape: "
                                   "[16], view_of")) ==
            "plan.yaml:15:5: buffer 8 'grad:n': buffer overlap: its bytes "
            "[96, 160) lie outside [0, 128) of buffer 6 'bucket#0', which it "
            "views");
  }
  SECTION("a view of a view, or across regions") {
    REQUIRE_THAT(contractError(slabWith("[16], view_of: 6}\n  - {id: 9",
                                        "[16], view_of: 7}\n  - {id: 9")),
                 Contains("buffer 8 'grad:n': buffer overlap: views buffer 7 "
                          "'grad:w', which is a view itself"));
    REQUIRE_THAT(
        contractError(slabWith("\"grad:n\", region: gradient, offset: 64",
                               "\"grad:n\", region: opt_state, offset: 64")),
        Contains("buffer 8 'grad:n': buffer overlap: views buffer 6 "
                 "'bucket#0' of region gradient from region opt_state"));
  }
}

TEST_CASE("the contract reports ids out of range in a plan built in memory",
          "[plan]") {
  Plan plan = *parsePlan(kBase, "plan.yaml");
  plan.instructions[1].operands[1] = 42;
  std::optional<ContractViolation> violation = findContractViolation(plan);
  REQUIRE(violation);
  REQUIRE(violation->site == ContractViolation::Site::Instruction);
  REQUIRE(violation->index == 1);
  REQUIRE(violation->message == "instr 1 (matmul): ids: buffer 42 is not "
                                "entry 42 of the buffer table");
  plan = *parsePlan(kSlab, "plan.yaml");
  plan.buffers[8].viewOf = 9;
  violation = findContractViolation(plan);
  REQUIRE(violation);
  REQUIRE(violation->site == ContractViolation::Site::Buffer);
  REQUIRE(violation->message == "buffer 8 'grad:n': buffer overlap: view_of 9 "
                                "names no earlier buffer");
  // Counts below their minimum do not crash the checks; the one thing
  // wrong with an empty plan is that it does nothing (ContractValues.h).
  Plan empty;
  empty.numStreams = 0;
  empty.numEvents = -1;
  violation = findContractViolation(empty);
  REQUIRE(violation);
  REQUIRE(violation->message == "program: the plan has no instructions, so "
                                "a run would train nothing");
}

TEST_CASE("the executor's hand-built test plans keep the contract", "[plan]") {
  exec::test::LinearModel model;
  for (int64_t dp : {1, 2})
    for (int64_t tp : {1, 2})
      for (bool vocabParallel : {false, true})
        for (DType dtype : {DType::F32, DType::BF16}) {
          model.vocabParallel = vocabParallel;
          Plan plan = exec::test::makeLinearPlan(model, dp, tp, dtype);
          INFO("dp " << dp << " tp " << tp << " vp " << vocabParallel);
          REQUIRE(checkPlanContract(plan).message() == "");
          Plan async = exec::test::withAsyncCollectives(plan);
          REQUIRE(checkPlanContract(async).message() == "");
        }
}

TEST_CASE("every op of the schema names its slots and attributes", "[plan]") {
  for (const char *op :
       {"embedding", "rms_norm_grad", "attention_grad", "all_reduce_coalesced",
        "column_slice", "vocab_parallel_loss_grad", "valid_count",
        "count_scale", "adamw", "sum_squares", "permute_blocks"}) {
    const OpSchema *schema = findOpSchema(op);
    REQUIRE(schema);
    for (const auto *slots : {&schema->operands, &schema->results})
      for (const SlotSpec &slot : *slots) {
        REQUIRE_FALSE(slot.role.empty());
        REQUIRE(std::string("TFIA").find(slot.type) != std::string::npos);
      }
  }
  REQUIRE(findOpSchema("embedding")->findAttr("vocab_axis")->kind ==
          AttrKind::Axis);
  REQUIRE_FALSE(findOpSchema("embedding")->findAttr("vocab_axis")->required);
  REQUIRE(findOpSchema("vocab_max")->findAttr("vocab_axis")->required);
  REQUIRE(findOpSchema("adamw")->attrs.size() == 6);
  REQUIRE_FALSE(findOpSchema("adamw")->findAttr("max_norm")->required);
  REQUIRE(findOpSchema("sum_squares")->findAttr("replicas")->kind ==
          AttrKind::IntList);
  REQUIRE(findOpSchema("rope")->findAttr("position_split")->choices ==
          std::vector<std::string>{"balanced"});
  REQUIRE_FALSE(
      findOpSchema("attention")->findAttr("position_split")->required);
  REQUIRE(findOpSchema("frobnicate") == nullptr);
}

namespace {

/// A fused projection's output [2, 2, 6] and two column views of it, q
/// (columns 0-3) and v (4-5), each read in place by rms_norm_rope.
const std::string kColumns = R"(sharc_plan: 1
mesh: [{name: dp, size: 1}, {name: tp, size: 1}]
num_streams: 1
num_events: 0
regions: {param: 104, input: 64, output: 96, activation: 96}
buffers:
  - {id: 0, name: "w", region: param, offset: 0, bytes: 96, dtype: f32, shape: [6, 4]}
  - {id: 1, name: "n", region: param, offset: 96, bytes: 8, dtype: f32, shape: [2]}
  - {id: 2, name: "x", region: input, offset: 0, bytes: 64, dtype: f32, shape: [2, 2, 4]}
  - {id: 3, name: "qkv", region: activation, offset: 0, bytes: 96, dtype: f32, shape: [2, 2, 6]}
  - {id: 4, name: "q", region: activation, offset: 0, bytes: 88, dtype: f32, shape: [2, 2, 4], view_of: 3, row_stride: 6}
  - {id: 5, name: "v", region: activation, offset: 16, bytes: 80, dtype: f32, shape: [2, 2, 2], view_of: 3, row_stride: 6}
  - {id: 6, name: "y", region: output, offset: 0, bytes: 64, dtype: f32, shape: [2, 2, 4]}
  - {id: 7, name: "z", region: output, offset: 64, bytes: 32, dtype: f32, shape: [2, 2, 2]}
inputs:
  - {name: "x", buffer: 2, global_shape: [2, 2, 4]}
outputs:
  - {name: "y", buffer: 6, global_shape: [2, 2, 4]}
  - {name: "z", buffer: 7, global_shape: [2, 2, 2]}
instructions:
  - {op: matmul, in: [2, 0], out: [3]}
  - {op: rms_norm_rope, in: [4, 1], out: [6], attrs: {head_dim: 2, eps: 1e-06, theta: 10000.0}}
  - {op: rms_norm_rope, in: [5, 1], out: [7], attrs: {head_dim: 2, eps: 1e-06, theta: 10000.0}}
)";

std::string columnsWith(const std::string &from, const std::string &to) {
  std::string text = kColumns;
  size_t at = text.find(from);
  REQUIRE(at < text.size());
  return text.replace(at, from.size(), to);
}

} // namespace

TEST_CASE("buffer overlap: column views of one base share its rows", "[plan]") {
  SECTION("disjoint columns, row_stride the base's row, are accepted") {
    Result<Plan> plan = parsePlan(kColumns, "plan.yaml");
    INFO(plan.status().message());
    REQUIRE(plan.isOk());
    REQUIRE(plan->buffers[4].rowStride == 6);
    REQUIRE(plan->buffers[5].rowPitch() == 6);
    REQUIRE(plan->buffers[3].rowPitch() == 6);
    REQUIRE(writePlan(*plan) == writePlan(*parsePlan(writePlan(*plan), "x")));
    REQUIRE(writePlan(*plan).find("view_of: 3, row_stride: 6}") <
            std::string::npos);
  }
  SECTION("columns that meet are an overlap") {
    // v moved onto q's last column.
    REQUIRE_THAT(contractError(columnsWith("offset: 16, bytes: 80",
                                           "offset: 12, bytes: 80")),
                 Contains("buffer 5 'v': buffer overlap: its columns meet "
                          "those of buffer 4 'q', both views of buffer 3 "
                          "'qkv'"));
  }
  SECTION("a row_stride that is not the base's row") {
    REQUIRE_THAT(contractError(columnsWith("bytes: 80, dtype: f32, shape: [2, "
                                           "2, 2], view_of: 3, row_stride: 6",
                                           "bytes: 80, dtype: f32, shape: [2, "
                                           "2, 2], view_of: 3, row_stride: 5")),
                 Contains("buffer 5 'v': buffer overlap: its row_stride 5 is "
                          "not the row of buffer 3 'qkv' (6 elements)"));
  }
  SECTION("the format: a view's rows fit in the stride, bytes span them") {
    Result<Plan> narrow =
        parsePlan(columnsWith("view_of: 3, row_stride: 6}\n  - {id: 5",
                              "view_of: 3, row_stride: 3}\n  - {id: 5"),
                  "plan.yaml", PlanChecks::FormatOnly);
    REQUIRE_THAT(narrow.status().message(),
                 Contains("row_stride 3 needs a view whose rows (the last "
                          "dimension) fit in it"));
    Result<Plan> unviewed = parsePlan(
        columnsWith("\"y\", region: output, offset: 0, bytes: 64, dtype: "
                    "f32, shape: [2, 2, 4]}",
                    "\"y\", region: output, offset: 0, bytes: 64, dtype: "
                    "f32, shape: [2, 2, 4], row_stride: 8}"),
        "plan.yaml", PlanChecks::FormatOnly);
    REQUIRE_THAT(unviewed.status().message(),
                 Contains("row_stride 8 needs a view"));
    Result<Plan> short_ =
        parsePlan(columnsWith("offset: 0, bytes: 88", "offset: 0, bytes: 64"),
                  "plan.yaml", PlanChecks::FormatOnly);
    REQUIRE_THAT(short_.status().message(),
                 Contains("buffer 4 holds 64 bytes, too few for shape [2, 2, "
                          "4]"));
  }
}

namespace {

/// A bf16 attention backward with cuDNN's workspace planned as a fourth
/// result (f32 scratch in the activation arena).
const std::string kWorkspacePlan = R"(sharc_plan: 1
mesh: [{name: dp, size: 1}]
num_streams: 1
num_events: 0
regions: {input: 1024, activation: 1408}
buffers:
  - {id: 0, name: "q", region: input, offset: 0, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 1, name: "k", region: input, offset: 128, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 2, name: "v", region: input, offset: 256, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 3, name: "out", region: input, offset: 384, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 4, name: "lse", region: input, offset: 512, bytes: 16, dtype: f32, shape: [1, 1, 4]}
  - {id: 5, name: "dout", region: input, offset: 768, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 6, name: "dq", region: activation, offset: 0, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 7, name: "dk", region: activation, offset: 128, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 8, name: "dv", region: activation, offset: 256, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 9, name: "ws", region: activation, offset: 384, bytes: 1024, dtype: f32, shape: [256]}
instructions:
  - {op: attention_grad, in: [0, 1, 2, 3, 4, 5], out: [6, 7, 8, 9], attrs: {head_dim: 16}}
)";

std::string withWorkspaceEdit(const std::string &from, const std::string &to) {
  std::string text = kWorkspacePlan;
  size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

} // namespace

TEST_CASE("op schema: attention_grad may name a workspace as its last result",
          "[plan]") {
  for (const char *out : {"out: [6, 7, 8, 9]", "out: [6, 7, 8]"}) {
    Result<Plan> plan =
        parsePlan(withWorkspaceEdit("out: [6, 7, 8, 9]", out), "plan.yaml");
    INFO(out << ": " << plan.status().message());
    CHECK(plan.isOk());
  }
  SECTION("no more than one") {
    REQUIRE(contractError(withWorkspaceEdit("out: [6, 7, 8, 9]",
                                            "out: [6, 7, 8, 9, 9]")) ==
            "plan.yaml:18:5: instr 0 (attention_grad): op schema: takes 6 "
            "operands and 3 or 4 results (the last a workspace), got 6 "
            "operands and 5 results");
  }
  SECTION("f32, whatever the gradients' type") {
    REQUIRE_THAT(contractError(withWorkspaceEdit("bytes: 1024, dtype: f32",
                                                 "bytes: 1024, dtype: bf16")),
                 Contains("instr 0 (attention_grad): dtype: workspace (buffer "
                          "9 'ws') is bf16, must be f32"));
  }
}
