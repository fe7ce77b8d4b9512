//===- PlanIOTest.cpp - plan file round trip and validation ---------------===//

#include "planner/plan/PlanIO.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

using namespace sharc;
using namespace sharc::plan;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

/// A plan with every field set to a non-default value and every attribute
/// kind, including the doubles and strings that are hardest to write.
Plan makeFullPlan() {
  Plan plan;
  plan.modelName = "tiny \"quoted\" model";
  plan.mode = "tp_sp";
  plan.mesh = {{"dp", 2}, {"tp", 4}};
  plan.seqLen = 64;
  plan.batchSize = 8;
  plan.vocabSize = 512;
  plan.computeDType = DType::BF16;
  plan.numStreams = 3;
  plan.numEvents = 5;
  plan.regionBytes = {{Region::Param, 4096},
                      {Region::OptState, 8192},
                      {Region::Input, 1024},
                      {Region::Output, 256},
                      {Region::Activation, 65536}};
  plan.buffers = {
      {0, "embed.weight", Region::Param, 0, 2048, DType::BF16, {32, 32}},
      {1, "m", Region::OptState, 0, 4096, DType::F32, {32, 32}},
      {2, "v", Region::OptState, 4096, 4096, DType::F32, {32, 32}},
      {3, "tokens", Region::Input, 512, 512, DType::I32, {2, 64}},
      {4, "loss", Region::Output, 0, 8, DType::F64, {}},
      {5,
       "%12 = sharc.matmul",
       Region::Activation,
       256,
       1024,
       DType::F32,
       {16, 16}},
      {6, "", Region::Activation, 65280, 256, DType::F32, {0, 7}},
      {7, "grad:x", Region::Activation, 512, 512, DType::F32, {128}, 5},
  };
  ParamEntry embed;
  embed.name = "embed.weight";
  embed.buffer = 0;
  embed.globalShape = {512, 32};
  embed.sharding.dimOfAxis = {{"dp", -1}, {"tp", 0}};
  embed.init = {"normal", 0.0123456789012345678};
  embed.state = {1, 2};
  // ZeRO-1's moments: a dp block inside each tp shard of the rows.
  embed.stateSharding = Sharding{{{"dp", 0}, {"tp", 0}}};
  embed.stateSharding->order = {"tp", "dp"};
  ParamEntry head;
  head.name = "lm_head.weight";
  head.buffer = 0;
  head.globalShape = {512, 32};
  head.init = {"zeros", 0.0};
  head.tiedTo = "embed.weight";
  plan.params = {embed, head};
  plan.inputs = {{"tokens", 3, {8, 64}, {{{"dp", 0}}, "dp"}}};
  plan.outputs = {{"loss", 4, {}, {}}, {"grad:embed.weight", 0, {512, 32}, {}}};

  Instruction matmul;
  matmul.op = "matmul";
  matmul.operands = {3, 0};
  matmul.results = {5};
  matmul.stream = 2;
  matmul.waits = {0, 4};
  matmul.signals = {1};
  matmul.loc = "models/tiny.yaml:4:3";
  matmul.attrs = {
      {"int", int64_t{-7}},
      {"big", std::numeric_limits<int64_t>::max()},
      {"small", std::numeric_limits<int64_t>::min()},
      {"eps", 1e-6},
      {"one", 1.0},
      {"third", 1.0 / 3.0},
      {"huge", 1.7976931348623157e308},
      {"tiny", 4.9406564584124654e-324},
      {"negzero", -0.0},
      {"inf", std::numeric_limits<double>::infinity()},
      {"neginf", -std::numeric_limits<double>::infinity()},
      {"axis", std::string("tp")},
      {"digits", std::string("12")},
      {"escapes", std::string("a \"b\" \\c\n\td\x01 \xc3\xa9")},
      {"empty", std::string()},
      {"dims", std::vector<int64_t>{0, -1, 3}},
      {"none", std::vector<int64_t>{}},
      {"null", int64_t{3}},
      {"has space", int64_t{4}},
  };
  Instruction gather;
  gather.op = "all_gather";
  gather.operands = {5};
  gather.results = {6};
  gather.recompute = "sp-allgather";
  plan.instructions = {matmul, gather};
  return plan;
}

void requireSameSharding(const Sharding &a, const Sharding &b) {
  REQUIRE(a.dimOfAxis == b.dimOfAxis);
  REQUIRE(a.balancedAxis == b.balancedAxis);
  REQUIRE(a.order == b.order);
}

/// Field by field, so that a failure names the field that differs.
void requireSamePlan(const Plan &a, const Plan &b) {
  REQUIRE(a.version == b.version);
  REQUIRE(a.modelName == b.modelName);
  REQUIRE(a.mode == b.mode);
  REQUIRE(a.mesh.size() == b.mesh.size());
  for (size_t i = 0; i < a.mesh.size(); ++i) {
    REQUIRE(a.mesh[i].name == b.mesh[i].name);
    REQUIRE(a.mesh[i].size == b.mesh[i].size);
  }
  REQUIRE(a.seqLen == b.seqLen);
  REQUIRE(a.batchSize == b.batchSize);
  REQUIRE(a.vocabSize == b.vocabSize);
  REQUIRE(a.computeDType == b.computeDType);
  REQUIRE(a.numStreams == b.numStreams);
  REQUIRE(a.numEvents == b.numEvents);
  REQUIRE(a.regionBytes == b.regionBytes);
  REQUIRE(a.buffers.size() == b.buffers.size());
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const Buffer &x = a.buffers[i], &y = b.buffers[i];
    REQUIRE(x.id == y.id);
    REQUIRE(x.name == y.name);
    REQUIRE(x.region == y.region);
    REQUIRE(x.offset == y.offset);
    REQUIRE(x.numBytes == y.numBytes);
    REQUIRE(x.dtype == y.dtype);
    REQUIRE(x.shape == y.shape);
    REQUIRE(x.viewOf == y.viewOf);
  }
  REQUIRE(a.params.size() == b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    const ParamEntry &x = a.params[i], &y = b.params[i];
    REQUIRE(x.name == y.name);
    REQUIRE(x.buffer == y.buffer);
    REQUIRE(x.globalShape == y.globalShape);
    requireSameSharding(x.sharding, y.sharding);
    REQUIRE(x.stateSharding.has_value() == y.stateSharding.has_value());
    if (x.stateSharding)
      requireSameSharding(*x.stateSharding, *y.stateSharding);
    REQUIRE(x.init.kind == y.init.kind);
    REQUIRE(x.init.stddev == y.init.stddev);
    REQUIRE(x.tiedTo == y.tiedTo);
    REQUIRE(x.state == y.state);
  }
  for (auto [xs, ys] :
       {std::pair{&a.inputs, &b.inputs}, std::pair{&a.outputs, &b.outputs}}) {
    REQUIRE(xs->size() == ys->size());
    for (size_t i = 0; i < xs->size(); ++i) {
      REQUIRE((*xs)[i].name == (*ys)[i].name);
      REQUIRE((*xs)[i].buffer == (*ys)[i].buffer);
      REQUIRE((*xs)[i].globalShape == (*ys)[i].globalShape);
      requireSameSharding((*xs)[i].sharding, (*ys)[i].sharding);
    }
  }
  REQUIRE(a.instructions.size() == b.instructions.size());
  for (size_t i = 0; i < a.instructions.size(); ++i) {
    const Instruction &x = a.instructions[i], &y = b.instructions[i];
    REQUIRE(x.op == y.op);
    REQUIRE(x.operands == y.operands);
    REQUIRE(x.results == y.results);
    REQUIRE(x.stream == y.stream);
    REQUIRE(x.waits == y.waits);
    REQUIRE(x.signals == y.signals);
    REQUIRE(x.loc == y.loc);
    REQUIRE(x.stage == y.stage);
    REQUIRE(x.recompute == y.recompute);
    REQUIRE(x.attrs.size() == y.attrs.size());
    for (const auto &[key, value] : x.attrs) {
      INFO("attribute " << key);
      REQUIRE(y.attrs.count(key) == 1);
      REQUIRE(value.index() == y.attrs.at(key).index());
      REQUIRE(value == y.attrs.at(key));
      if (const auto *real = std::get_if<double>(&value))
        REQUIRE(std::signbit(*real) ==
                std::signbit(std::get<double>(y.attrs.at(key))));
    }
  }
}

// These tests are of the file format, so they read without the contract
// (PlanContractTest.cpp): their plans use attributes no op has.
Plan parseOk(const std::string &text) {
  Result<Plan> result = parsePlan(text, "plan.yaml", PlanChecks::FormatOnly);
  INFO(result.status().message());
  REQUIRE(result.isOk());
  return result.value();
}

/// A small valid plan; each malformed case edits one line of it, so the
/// expected line:col is read off this text.
const std::string kBase = R"(sharc_plan: 1
model: "tiny"
mode: "tp"
mesh: [{name: dp, size: 1}, {name: tp, size: 2}]
num_streams: 2
num_events: 2
regions: {param: 64, activation: 128}
buffers:
  - {id: 0, name: "w", region: param, offset: 0, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 1, name: "x", region: activation, offset: 0, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 2, name: "y", region: activation, offset: 64, bytes: 64, dtype: f32, shape: [4, 4]}
params:
  - {name: "w", buffer: 0, global_shape: [4, 8], sharding: {tp: 1}, init: {kind: normal, stddev: 0.02}}
inputs:
  - {name: "x", buffer: 1, global_shape: [4, 4], sharding: {}}
outputs: []
instructions:
  - {op: matmul, in: [1, 0], out: [2], stream: 0, signals: [0], attrs: {transpose_b: 1}}
  - {op: all_gather, in: [2], out: [1], stream: 1, waits: [0], attrs: {axis: "tp", dim: 0}}
)";

/// kBase with `from` replaced by `to` on line `line` (1-based).
std::string edit(int line, const std::string &from, const std::string &to) {
  size_t begin = 0;
  for (int i = 1; i < line; ++i)
    begin = kBase.find('\n', begin) + 1;
  size_t end = kBase.find('\n', begin);
  size_t at = kBase.find(from, begin);
  REQUIRE(at != std::string::npos);
  REQUIRE(at < end);
  std::string text = kBase;
  return text.replace(at, from.size(), to);
}

std::string parseError(const std::string &text) {
  Result<Plan> result = parsePlan(text, "plan.yaml", PlanChecks::FormatOnly);
  REQUIRE_FALSE(result.isOk());
  REQUIRE(result.status().code() == Status::Code::InvalidInput);
  REQUIRE(result.status().exitCode() == 2);
  return result.status().message();
}

/// How a malformed plan's message must read: all of it, its start (the rest
/// lists what was expected, which grows with the format) or a part of it.
enum class Match { Exact, Prefix, Substring };

/// kBase with `from` replaced by `to` on `line`, and the message it gets.
struct Malformed {
  const char *what;
  int line;
  const char *from, *to, *message;
  Match match = Match::Exact;
};

const Malformed kMalformed[] = {
    {"unsupported version", 1, "1", "7",
     "plan.yaml:1:13: plan version 7 is not supported (expected 1)"},
    {"header numbers beyond what a run could hold", 5, "2", "65",
     "plan.yaml:5:14: expected an integer <= 64, got 65"},
    {"header numbers beyond what a run could hold", 6, "2", "99999999999",
     "plan.yaml:6:13: expected an integer <= 16777216, got 99999999999"},
    {"header numbers beyond what a run could hold", 4, "size: 2", "size: 70000",
     "plan.yaml:4:46: expected an integer <= 65536, got 70000"},
    {"header numbers beyond what a run could hold", 4,
     "size: 1}, {name: tp, size: 2}", "size: 1024}, {name: tp, size: 1024}",
     "plan.yaml:4:49: the mesh's 1048576 ranks exceed the limit of 65536"},
    {"header numbers beyond what a run could hold", 7, "128",
     "2000000000000000000",
     "plan.yaml:7:34: expected an integer <= 1125899906842624, got "
     "2000000000000000000"},
    {"unknown top-level key", 5, "num_streams", "num_stream",
     "plan.yaml:5:1: unknown key 'num_stream' in the plan (expected one of: "
     "sharc_plan, model,",
     Match::Prefix},
    {"unknown instruction key", 19, "stream:", "steam:",
     "plan.yaml:19:41: unknown key 'steam' in an instruction (expected one of: "
     "op, in, out,",
     Match::Prefix},
    {"a view of a later buffer or of none", 10, "shape: [4, 4]}",
     "shape: [4, 4], view_of: 2}",
     "plan.yaml:10:102: view_of 2 names no earlier buffer (a view follows the "
     "buffer it views)"},
    {"a view of a later buffer or of none", 10, "shape: [4, 4]}",
     "shape: [4, 4], view_of: -1}",
     "plan.yaml:10:102: view_of -1 names no earlier buffer (a view follows the "
     "buffer it views)"},
    {"a view of a later buffer or of none", 10, "shape: [4, 4]}",
     "shape: [4, 4], view_of: x}",
     "plan.yaml:10:102: expected an integer, got 'x'", Match::Substring},
    {"operand out of range", 18, "in: [1, 0]", "in: [1, 3]",
     "plan.yaml:18:26: buffer 3 out of range (the plan has 3 buffers)"},
    {"buffer outside its region", 11, "offset: 64", "offset: 96",
     "plan.yaml:11:52: buffer 2 at [96, +64) lies outside region activation of "
     "128 bytes"},
    {"buffer in a region without a size", 10, "region: activation",
     "region: output",
     "plan.yaml:10:48: buffer 1 at [0, +64) lies outside region output of 0 "
     "bytes"},
    {"unknown region", 9, "param", "params",
     "plan.yaml:9:32: unknown region 'params' (expected param, opt_state, "
     "input, output, activation, gradient or cache)"},
    {"unknown dtype", 10, "f32", "f16",
     "plan.yaml:10:73: unknown dtype 'f16' (expected f32, bf16, i32 or f64)"},
    {"event out of range", 19, "waits: [0]", "waits: [2]",
     "plan.yaml:19:60: event 2 out of range (the plan has 2 events)"},
    {"stream out of range", 19, "stream: 1", "stream: 2",
     "plan.yaml:19:49: stream 2 out of range (the plan has 2 streams)"},
    {"buffer ids out of order", 11, "id: 2", "id: 5",
     "plan.yaml:11:10: buffer id 5 out of order (expected 2: ids count up from "
     "0)"},
    {"too few bytes for the shape", 9, "shape: [4, 4]", "shape: [4, 8]",
     "plan.yaml:9:57: buffer 0 holds 64 bytes, too few for shape [4, 8] of "
     "f32"},
    {"integer out of range", 9, "bytes: 64", "bytes: 99999999999999999999",
     "plan.yaml:9:57: integer 99999999999999999999 out of range"},
    {"a string where an integer belongs", 9, "bytes: 64", "bytes: many",
     "plan.yaml:9:57: expected an integer, got 'many'"},
    {"sharding on an unknown axis or dimension", 13, "{tp: 1}", "{pp: 1}",
     "plan.yaml:13:61: unknown mesh axis 'pp' (mesh axes: dp, tp)"},
    {"sharding on an unknown axis or dimension", 13, "{tp: 1}",
     "{tp: 1, balanced: \"dp\"}",
     "plan.yaml:13:78: balanced names 'dp', which splits no dimension of this "
     "sharding"},
    {"sharding on an unknown axis or dimension", 13, "{tp: 1}",
     "{tp: 1, order: [dp, tp]}",
     "plan.yaml:13:75: order names 'dp', which splits no dimension of this "
     "sharding"},
    {"sharding on an unknown axis or dimension", 13, "{tp: 1}",
     "{tp: 1, order: tp}",
     "plan.yaml:13:75: order: expected a list of mesh axes, got 'tp'"},
    {"sharding on an unknown axis or dimension", 13, "{tp: 1}", "{tp: 2}",
     "plan.yaml:13:65: dimension 2 out of range for a tensor of rank 2"},
    {"parameter and input buffers out of range", 13, "buffer: 0", "buffer: 7",
     "plan.yaml:13:25: buffer 7 out of range (the plan has 3 buffers)"},
    {"parameter and input buffers out of range", 15, "buffer: 1", "buffer: -1",
     "plan.yaml:15:25: buffer -1 out of range (the plan has 3 buffers)"},
    {"unquoted string attribute", 19, "\"tp\"", "tp",
     "plan.yaml:19:78: attribute 'axis' value 'tp' is not a number (strings "
     "are quoted: \"tp\")"},
    {"missing required key", 18, "op: matmul, ", "",
     "plan.yaml:18:5: missing key 'op' in an instruction"},
    {"tied to a missing parameter", 13,
     "sharding:", "tied_to: \"v\", sharding:",
     "plan.yaml:13:59: tied_to 'v' names no other parameter"},
    {"empty or repeated names", 13, "name: \"w\"", "name: \"\"",
     "plan.yaml:13:12: name '' of a parameter is empty or repeated"},
    {"empty or repeated names", 4, "name: tp", "name: dp",
     "plan.yaml:4:36: name 'dp' of a mesh axis is empty or repeated"},
    {"unknown init kind", 13, "kind: normal", "kind: uniform",
     "plan.yaml:13:82: unknown init kind 'uniform' (expected normal, ones or "
     "zeros)"},
    {"unknown recompute policy", 19, "stream: 1", "stream: 1, recompute: most",
     "plan.yaml:19:63: recompute is full, selective or sp-allgather, not "
     "'most'"},
    {"duplicate key", 18, "stream: 0", "stream: 0, stream: 1",
     "plan.yaml:18:51: duplicate key 'stream' in an instruction"},
    {"YAML syntax error", 18, "{transpose_b: 1}}", "{transpose_b: 1}",
     "plan.yaml:19:", Match::Prefix},
};

void requireMessage(const std::string &message, const Malformed &malformed) {
  switch (malformed.match) {
  case Match::Exact:
    REQUIRE(message == malformed.message);
    break;
  case Match::Prefix:
    REQUIRE_THAT(message, StartsWith(malformed.message));
    break;
  case Match::Substring:
    REQUIRE_THAT(message, Contains(malformed.message));
    break;
  }
}

} // namespace

TEST_CASE("a plan with every field set survives write then parse", "[plan]") {
  Plan plan = makeFullPlan();
  std::string text = writePlan(plan);
  Plan parsed = parseOk(text);
  requireSamePlan(plan, parsed);
  REQUIRE(writePlan(parsed) == text);
}

TEST_CASE("the written plan is versioned and one instruction per line",
          "[plan]") {
  Plan plan = makeFullPlan();
  plan.instructions[0].attrs = {{"eps", 1e-6}, {"one", 1.0}};
  std::string text = writePlan(plan);
  REQUIRE_THAT(text, StartsWith("sharc_plan: 1\n"));
  REQUIRE_THAT(text, Contains("\n  - {op: matmul, in: [3, 0], out: [5], "
                              "stream: 2, waits: [0, 4], signals: [1], "
                              "attrs: {eps: 1e-06, one: 1.0}, "
                              "loc: \"models/tiny.yaml:4:3\"}\n"));
  REQUIRE_THAT(text, Contains("\n  - {op: all_gather, in: [5], out: [6], "
                              "stream: 0, recompute: sp-allgather}\n"));
  REQUIRE_THAT(text, Contains("\nmesh: [{name: dp, size: 2}, "
                              "{name: tp, size: 4}]\n"));
  REQUIRE_THAT(text, Contains("\n  - {id: 3, name: \"tokens\", region: input, "
                              "offset: 512, bytes: 512, dtype: i32, "
                              "shape: [2, 64]}\n"));
  REQUIRE_THAT(text, Contains("\n  - {id: 7, name: \"grad:x\", region: "
                              "activation, offset: 512, bytes: 512, dtype: "
                              "f32, shape: [128], view_of: 5}\n"));
}

TEST_CASE("attribute kinds follow the text, not the value", "[plan]") {
  Plan plan = parseOk(
      edit(18, "{transpose_b: 1}",
           "{i: 1, f: 1.0, e: 2e3, s: \"1\", l: [1], n: [], p: .inf, q: -.inf, "
           "r: .nan, t: -5}"));
  const Instruction &matmul = plan.instructions[0];
  REQUIRE(std::get<int64_t>(matmul.attrs.at("i")) == 1);
  REQUIRE(std::get<double>(matmul.attrs.at("f")) == 1.0);
  REQUIRE(std::get<double>(matmul.attrs.at("e")) == 2000.0);
  REQUIRE(std::get<std::string>(matmul.attrs.at("s")) == "1");
  REQUIRE(std::get<std::vector<int64_t>>(matmul.attrs.at("l")) ==
          std::vector<int64_t>{1});
  REQUIRE(std::get<std::vector<int64_t>>(matmul.attrs.at("n")).empty());
  REQUIRE(std::get<double>(matmul.attrs.at("p")) == HUGE_VAL);
  REQUIRE(std::get<double>(matmul.attrs.at("q")) == -HUGE_VAL);
  REQUIRE(std::isnan(std::get<double>(matmul.attrs.at("r"))));
  REQUIRE(std::get<int64_t>(matmul.attrs.at("t")) == -5);
  // A NaN written out reads back as a NaN.
  Plan again = parseOk(writePlan(plan));
  REQUIRE(std::isnan(std::get<double>(again.instructions[0].attrs.at("r"))));
}

TEST_CASE("omitted optional keys take the struct defaults", "[plan]") {
  Plan plan = parseOk("sharc_plan: 1\nbuffers: []\ninstructions: []\n");
  REQUIRE(plan.mesh.empty());
  REQUIRE(plan.worldSize() == 1);
  REQUIRE(plan.numStreams == 1);
  REQUIRE(plan.computeDType == DType::F32);
  REQUIRE(plan.regionBytes.empty());
  Plan base = parseOk(kBase);
  REQUIRE(base.instructions[0].waits.empty());
  REQUIRE(base.instructions[0].loc.empty());
  REQUIRE(base.inputs[0].sharding.dimOfAxis.empty());
}

TEST_CASE("plan helpers answer from the tables", "[plan]") {
  Plan plan = makeFullPlan();
  REQUIRE(plan.worldSize() == 8);
  REQUIRE(plan.axisSize("tp") == 4);
  REQUIRE(plan.axisSize("dp") == 2);
  REQUIRE(plan.axisSize("pp") == 1);
  REQUIRE(plan.findInput("tokens")->buffer == 3);
  REQUIRE(plan.findInput("loss") == nullptr);
  REQUIRE(plan.findOutput("grad:embed.weight")->buffer == 0);
  REQUIRE(plan.findParam("lm_head.weight")->tiedTo == "embed.weight");
  REQUIRE(plan.findParam("nope") == nullptr);
  REQUIRE(std::string(regionName(Region::OptState)) == "opt_state");
  REQUIRE(std::string(regionName(Region::Activation)) == "activation");
  REQUIRE_FALSE(plan.params[0].sharding.isReplicated());
  REQUIRE(plan.params[1].sharding.isReplicated());
  Sharding allReplicated;
  allReplicated.dimOfAxis = {{"dp", -1}, {"tp", -1}};
  REQUIRE(allReplicated.isReplicated());

  const Instruction &matmul = plan.instructions[0];
  REQUIRE(matmul.getInt("int") == -7);
  REQUIRE(matmul.getInt("eps", 9) == 9);
  REQUIRE(matmul.getInt("missing", 11) == 11);
  REQUIRE(matmul.getFloat("eps") == 1e-6);
  REQUIRE(matmul.getFloat("int") == -7.0);
  REQUIRE(matmul.getFloat("axis", 2.5) == 2.5);
  REQUIRE(matmul.getString("axis") == "tp");
  REQUIRE(matmul.getString("int", "none") == "none");
  REQUIRE(matmul.getInts("dims") == std::vector<int64_t>{0, -1, 3});
  REQUIRE(matmul.getInts("int").empty());
}

TEST_CASE("malformed plans name the file, line and column", "[plan]") {
  parseOk(kBase);
  for (const Malformed &malformed : kMalformed)
    DYNAMIC_SECTION(malformed.what << ": " << malformed.to) {
      requireMessage(
          parseError(edit(malformed.line, malformed.from, malformed.to)),
          malformed);
    }
  SECTION("version not first") {
    REQUIRE(parseError("model: \"x\"\n" + kBase) ==
            "plan.yaml:1:1: a plan must start with 'sharc_plan: 1'");
    REQUIRE(parseError("just text") ==
            "plan.yaml:1:1: a plan must start with 'sharc_plan: 1'");
    REQUIRE(parseError("") ==
            "plan.yaml:1:1: a plan must start with 'sharc_plan: 1'");
  }
  SECTION("header numbers beyond what a run could hold: tokens") {
    std::string tokens = kBase;
    tokens.insert(kBase.find("mesh:"), "seq_len: 65536\nbatch_size: 65536\n");
    REQUIRE(parseError(tokens) ==
            "plan.yaml:4:10: seq_len x batch_size = 4294967296 tokens exceed "
            "the limit of 2147483647 (int32 token counts)");
  }
}

TEST_CASE("no prefix or byte flip of a plan crashes the reader", "[plan]") {
  std::string text = writePlan(makeFullPlan());
  for (size_t length = 0; length <= text.size(); ++length)
    for (PlanChecks checks : {PlanChecks::All, PlanChecks::FormatOnly}) {
      Result<Plan> result =
          parsePlan(text.substr(0, length), "cut.yaml", checks);
      if (!result.isOk())
        REQUIRE_THAT(result.status().message(), StartsWith("cut.yaml"));
    }
  const char replacements[] = {'[', ']', '{', '}', ':', ',', '-', '"', '9'};
  for (size_t at = 0; at < text.size(); at += 3) {
    std::string flipped = text;
    flipped[at] = replacements[at % sizeof(replacements)];
    for (PlanChecks checks : {PlanChecks::All, PlanChecks::FormatOnly}) {
      Result<Plan> result = parsePlan(flipped, "flip.yaml", checks);
      if (!result.isOk())
        REQUIRE_THAT(result.status().message(), StartsWith("flip.yaml"));
    }
  }
}

TEST_CASE("plan files round trip through the disk", "[plan]") {
  std::string path = SHARC_BINARY_DIR "/PlanIOTest.plan.yaml";
  Plan plan = makeFullPlan();
  REQUIRE(writePlanFile(plan, path).isOk());
  Result<Plan> read = readPlanFile(path, PlanChecks::FormatOnly);
  REQUIRE(read.isOk());
  requireSamePlan(plan, read.value());
  std::remove(path.c_str());

  Result<Plan> missing = readPlanFile(path);
  REQUIRE_FALSE(missing.isOk());
  REQUIRE(missing.status().exitCode() == 2);
  REQUIRE_THAT(missing.status().message(),
               StartsWith("cannot open plan '" + path + "'"));
  REQUIRE_FALSE(writePlanFile(plan, "/nonexistent-dir/plan.yaml").isOk());
}

TEST_CASE("the example in docs/plan-format.md is a valid plan", "[plan]") {
  std::ifstream doc(SHARC_SOURCE_DIR "/docs/plan-format.md");
  REQUIRE(doc);
  std::stringstream text;
  text << doc.rdbuf();
  std::string markdown = text.str();
  size_t begin = markdown.find("```yaml\n");
  REQUIRE(begin != std::string::npos);
  begin += 8;
  size_t end = markdown.find("```", begin);
  // Read as a tool reads it: the example keeps the contract too.
  Result<Plan> read = parsePlan(markdown.substr(begin, end - begin), "doc");
  INFO(read.status().message());
  REQUIRE(read.isOk());
  const Plan &plan = read.value();
  REQUIRE(plan.worldSize() == 2);
  REQUIRE(plan.instructions.size() == 2);
  REQUIRE(plan.instructions[1].getString("axis") == "tp");
  REQUIRE(plan.params[0].sharding.dimOfAxis.at("tp") == 1);
}

TEST_CASE("the lr schedule round-trips and its keys are checked", "[plan]") {
  LrSchedule cosine{
      .decay = "cosine", .warmupSteps = 4, .totalSteps = 14, .minFactor = 0.1};
  Plan plan = makeFullPlan();
  plan.lrSchedule = cosine;
  std::string text = writePlan(plan);
  REQUIRE_THAT(text, Contains("lr_schedule: {decay: \"cosine\", warmup_steps: "
                              "4, total_steps: 14, min_factor: 0.1}\n"));
  Plan parsed = parseOk(text);
  REQUIRE(parsed.lrSchedule.decay == "cosine");
  REQUIRE(parsed.lrSchedule.warmupSteps == 4);
  REQUIRE(parsed.lrSchedule.totalSteps == 14);
  REQUIRE(parsed.lrSchedule.minFactor == 0.1);
  REQUIRE(writePlan(parsed) == text);
  // No schedule, no key: plans from before it stay byte-identical.
  REQUIRE_THAT(writePlan(makeFullPlan()), !Contains("lr_schedule"));

  auto refused = [&](const std::string &from, const std::string &to) {
    std::string bad = text;
    bad.replace(bad.find(from), from.size(), to);
    auto result = parsePlan(bad, "p.yaml", PlanChecks::FormatOnly);
    REQUIRE(!result);
    return result.status().message();
  };
  REQUIRE_THAT(refused("\"cosine\"", "\"cosin\""),
               Contains("unknown decay 'cosin'"));
  REQUIRE_THAT(refused("total_steps: 14", "total_steps: 4"),
               Contains("total_steps 4 must exceed warmup_steps 4"));
  REQUIRE_THAT(refused("min_factor: 0.1", "min_factor: 1.5"),
               Contains("min_factor must be in [0, 1], got 1.5"));
  REQUIRE_THAT(refused(", min_factor: 0.1", ""),
               Contains("missing key 'min_factor'"));
}
