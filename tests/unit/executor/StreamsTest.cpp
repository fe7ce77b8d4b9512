//===- StreamsTest.cpp - streams, events and the hazard check -------------===//

#include "executor/EventBoard.h"
#include "executor/Runtime.h"
#include "executor/StreamOrder.h"
#include "executor/TransferOrder.h"

#include "TestPlans.h"

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

using namespace sharc;
using namespace sharc::exec;
using namespace sharc::exec::test;

namespace {

constexpr int64_t kM = 3, kK = 4, kN = 5;

enum class Variant { Correct, MissingWait, ReuseBytes, NeverSignalled, Cycle };

/// Two matmuls from the same activations `a` (sharded over dp) with weights
/// w and v (sharded over tp), each all-reduced over tp, then added; with
/// dp > 1 the sum is all-reduced over dp too. On two streams:
///
///   stream 0: 0 matmul a,w->h  2 matmul a,v->g  3 all_reduce g  4 add->out
///                    |signal e0                  wait e1 ^  |signal e2
///   stream 1:        +--> 1 all_reduce h->hs --signal e1-+   +--> 5 (dp)
///
/// so instr 2 and 3 (a collective on stream 0) run while the stream-1
/// all_reduce does. out = sum_t a w_t^T + sum_t a v_t^T.
plan::Plan makeOverlapPlan(int64_t dp, int64_t tp, int64_t numStreams,
                           Variant variant = Variant::Correct) {
  using plan::Region;
  PlanBuilder b;
  plan::Plan &p = b.plan;
  p.modelName = "overlap";
  p.mode = "test";
  p.mesh = {{"dp", dp}, {"tp", tp}};
  p.numStreams = numStreams;
  p.numEvents = 4;
  plan::InitSpec init{"normal", 0.5};
  int64_t a =
      b.param("a", {dp * kM, kK}, {kM, kK}, {{{"dp", 0}}}, DType::F32, init)[0];
  int64_t w =
      b.param("w", {tp * kN, kK}, {kN, kK}, {{{"tp", 0}}}, DType::F32, init)[0];
  int64_t v =
      b.param("v", {tp * kN, kK}, {kN, kK}, {{{"tp", 0}}}, DType::F32, init)[0];
  int64_t h = b.buffer("h", Region::Activation, DType::F32, {kM, kN});
  int64_t hs = b.buffer("hs", Region::Activation, DType::F32, {kM, kN});
  int64_t g = b.buffer("g", Region::Activation, DType::F32, {kM, kN});
  int64_t gs = b.buffer("gs", Region::Activation, DType::F32, {kM, kN});
  int64_t out = b.buffer("out", Region::Output, DType::F32, {kM, kN});
  b.io(false, "out", out, {dp * kM, kN}, {{{"dp", 0}}});
  if (variant == Variant::ReuseBytes)
    p.buffers[g].offset = p.buffers[h].offset; // h is still being reduced
  auto overTp = std::map<std::string, plan::AttrValue>{
      {"axis", std::string("tp")}, {"reduce", std::string("sum")}};
  auto streamOf = [&](int64_t stream) { return numStreams > 1 ? stream : 0; };

  b.instr("matmul", {a, w}, {h});
  p.instructions.back().signals = {0};
  p.instructions.back().waits = variant == Variant::Cycle
                                    ? std::vector<int64_t>{1}
                                    : std::vector<int64_t>{};
  b.instr("all_reduce", {h}, {hs}, overTp);
  p.instructions.back().stream = streamOf(1);
  p.instructions.back().waits = {0};
  p.instructions.back().signals = {1};
  b.instr("matmul", {a, v}, {g});
  b.instr("all_reduce", {g}, {gs}, overTp);
  b.instr("add", {hs, gs}, {out});
  p.instructions.back().signals = {2};
  if (variant == Variant::Correct || variant == Variant::ReuseBytes ||
      variant == Variant::Cycle)
    p.instructions.back().waits = {1};
  if (variant == Variant::NeverSignalled)
    p.instructions.back().waits = {1, 3};
  if (dp > 1) {
    int64_t outSum = b.buffer("out.sum", Region::Output, DType::F32, {kM, kN});
    b.io(false, "out.sum", outSum, {kM, kN});
    b.instr("all_reduce", {out}, {outSum},
            {{"axis", std::string("dp")}, {"reduce", std::string("sum")}});
    p.instructions.back().stream = streamOf(1);
    p.instructions.back().waits = {2};
  }
  return p;
}

std::unique_ptr<Runtime> makeRuntime(const plan::Plan &plan,
                                     RunOptions options = {}) {
  auto runtime = Runtime::create(plan, options);
  INFO(runtime.status().message());
  REQUIRE(runtime);
  return std::move(*runtime);
}

std::vector<double> output(const Runtime &runtime, const std::string &name) {
  auto tensor = runtime.gatherOutput(name);
  INFO(tensor.status().message());
  REQUIRE(tensor);
  return plan::tensorAsDoubles(*tensor);
}

std::vector<double> param(const Runtime &runtime, const std::string &name) {
  auto params = runtime.gatherParams();
  REQUIRE(params);
  return plan::tensorAsDoubles(*params->find(name));
}

/// out from the global parameters with double loops.
std::vector<double> overlapReference(const Runtime &runtime, int64_t dp,
                                     int64_t tp) {
  std::vector<double> a = param(runtime, "a"), w = param(runtime, "w"),
                      v = param(runtime, "v");
  std::vector<double> out(dp * kM * kN, 0.0);
  for (int64_t row = 0; row < dp * kM; ++row)
    for (int64_t n = 0; n < kN; ++n)
      for (int64_t t = 0; t < tp; ++t)
        for (int64_t k = 0; k < kK; ++k)
          out[row * kN + n] += a[row * kK + k] * (w[(t * kN + n) * kK + k] +
                                                  v[(t * kN + n) * kK + k]);
  return out;
}

Status createStatus(const plan::Plan &plan, bool checkHazards) {
  auto runtime =
      Runtime::create(plan, RunOptions{.checkHazards = checkHazards});
  return runtime.status();
}

bool mentions(const Status &status, const std::string &text) {
  return status.message().find(text) != std::string::npos;
}

} // namespace

TEST_CASE("a two-stream plan computes what its one-stream version does",
          "[executor][streams]") {
  for (auto [dp, tp] : {std::pair<int64_t, int64_t>{1, 2}, {2, 2}}) {
    INFO("dp " << dp << " tp " << tp);
    auto serial = makeRuntime(makeOverlapPlan(dp, tp, 1));
    REQUIRE(serial->initParams(5));
    REQUIRE(serial->step());
    std::vector<double> expected = overlapReference(*serial, dp, tp);
    std::vector<double> serialOut = output(*serial, "out");
    REQUIRE(serialOut.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      REQUIRE(serialOut[i] == Approx(expected[i]).margin(1e-5));

    for (bool check : {false, true}) {
      INFO("checkHazards " << check);
      auto streams = makeRuntime(makeOverlapPlan(dp, tp, 2),
                                 RunOptions{.checkHazards = check});
      REQUIRE(streams->worldSize() == dp * tp);
      REQUIRE(streams->initParams(5));
      // Many steps, so that the streams interleave differently each time.
      for (int step = 0; step < 20; ++step) {
        auto stats = streams->step();
        INFO(stats.status().message());
        REQUIRE(stats);
        REQUIRE(output(*streams, "out") == serialOut);
        if (dp > 1)
          REQUIRE(output(*streams, "out.sum") == output(*serial, "out.sum"));
      }
    }
  }
}

TEST_CASE("the hazard check names both instructions of a missing wait",
          "[executor][streams]") {
  plan::Plan plan = makeOverlapPlan(1, 2, 2, Variant::MissingWait);
  REQUIRE(createStatus(plan, false)); // runnable, but racy
  Status status = createStatus(plan, true);
  INFO(status.message());
  REQUIRE(status.code() == Status::Code::RuntimeError);
  REQUIRE(status.message().rfind("hazard: instr 1 (all_reduce) on stream 1 "
                                 "writes 'hs' [",
                                 0) == 0);
  REQUIRE(mentions(status, "and instr 4 (add) on stream 0 reads 'hs'"));
  REQUIRE(mentions(status, "no event orders them"));
  // The same plan on one stream is ordered by the list alone.
  REQUIRE(createStatus(makeOverlapPlan(1, 2, 1, Variant::MissingWait), true));
}

TEST_CASE("the hazard check rejects reusing bytes a collective still reads",
          "[executor][streams]") {
  plan::Plan plan = makeOverlapPlan(2, 2, 2, Variant::ReuseBytes);
  Status status = createStatus(plan, true);
  INFO(status.message());
  REQUIRE(status.code() == Status::Code::RuntimeError);
  REQUIRE(mentions(status, "instr 1 (all_reduce) on stream 1 reads 'h' [0, "
                           "60)"));
  REQUIRE(mentions(status, "instr 2 (matmul) on stream 0 writes 'g' [0, 60)"));
  REQUIRE(mentions(status, "of region activation"));
  // Serialised, the reuse is harmless: h is dead once instr 1 has run.
  REQUIRE(createStatus(makeOverlapPlan(2, 2, 1, Variant::ReuseBytes), true));
}

TEST_CASE("waits that can never be satisfied are rejected at create",
          "[executor][streams]") {
  Status never =
      createStatus(makeOverlapPlan(1, 2, 2, Variant::NeverSignalled), false);
  REQUIRE(never.code() == Status::Code::InvalidInput);
  REQUIRE(never.message() ==
          "instr 4 (add): waits for event 3, which no instruction signals");

  Status cycle = createStatus(makeOverlapPlan(1, 2, 2, Variant::Cycle), false);
  REQUIRE(cycle.code() == Status::Code::InvalidInput);
  REQUIRE(cycle.message() == "instr 0 (matmul): waits for event 1, signalled "
                             "by instr 1 (all_reduce), which can only run "
                             "after it: the waits form a cycle");

  // On one stream, waiting for a later instruction of the same stream.
  plan::Plan backwards = makeOverlapPlan(1, 2, 1);
  backwards.instructions[2].waits = {2};
  Status later = createStatus(backwards, false);
  REQUIRE(later.code() == Status::Code::InvalidInput);
  REQUIRE(mentions(later, "instr 2 (matmul): waits for event 2, signalled by "
                          "instr 4 (add)"));

  plan::Plan twice = makeOverlapPlan(1, 2, 2);
  twice.instructions[2].signals = {0};
  Status second = createStatus(twice, false);
  REQUIRE(second.code() == Status::Code::InvalidInput);
  REQUIRE(mentions(second, "instr 2 (matmul): signals event 0, which instr 0 "
                           "(matmul) already signals"));

  plan::Plan badStream = makeOverlapPlan(1, 2, 2);
  badStream.instructions[3].stream = 2;
  Status stream = createStatus(badStream, false);
  REQUIRE(stream.code() == Status::Code::InvalidInput);
  REQUIRE(mentions(stream, "instr 3 (all_reduce): stream 2 outside [0, 2)"));
}

TEST_CASE("happens-before follows stream order and signal-wait edges",
          "[executor][streams]") {
  auto order = analyzeStreams(makeOverlapPlan(2, 2, 2));
  REQUIRE(order);
  REQUIRE(order->streamInstrs ==
          std::vector<std::vector<int64_t>>{{0, 2, 3, 4}, {1, 5}});
  // 0 -> 1 by e0, 1 -> 4 by e1, 4 -> 5 by e2; 2 and 3 overlap 1.
  REQUIRE(order->happensBefore(0, 1));
  REQUIRE(order->happensBefore(1, 4));
  REQUIRE(order->happensBefore(0, 5));
  REQUIRE(order->happensBefore(2, 5)); // through 4's signal
  REQUIRE(order->happensBefore(1, 5)); // same stream
  REQUIRE_FALSE(order->ordered(1, 2));
  REQUIRE_FALSE(order->ordered(1, 3));
  REQUIRE_FALSE(order->happensBefore(4, 1));
  REQUIRE_FALSE(order->happensBefore(3, 3));
  REQUIRE(order->clock[5] == std::vector<int64_t>{4, 2});
}

TEST_CASE("an event wait times out, and abort wakes it",
          "[executor][streams]") {
  EventBoard events(3);
  events.reset();
  Status timedOut = events.wait(2, 0.05);
  REQUIRE(timedOut.code() == Status::Code::RuntimeError);
  REQUIRE(timedOut.message() == "waited 0.05 s for event 2");

  std::thread signaller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    events.signal(1);
  });
  REQUIRE(events.wait(1, 10.0));
  signaller.join();
  REQUIRE(events.wait(1, 0.0)); // stays signalled for the step
  events.reset();
  REQUIRE_FALSE(events.wait(1, 0.0));

  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    events.abort();
  });
  auto start = std::chrono::steady_clock::now();
  Status aborted = events.wait(0, 10.0);
  aborter.join();
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  REQUIRE(mentions(aborted, "aborted while waiting for event 0"));
}

TEST_CASE("the linear model with async collectives matches its serial plan",
          "[executor][streams]") {
  LinearModel model;
  std::vector<int32_t> tokens(model.batch * model.seqLen);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 5 + 1) % model.validVocab);
  for (auto [dp, tp, vocabParallel] :
       {std::tuple<int64_t, int64_t, bool>{2, 1, false},
        {1, 2, false},
        {2, 2, false},
        {2, 2, true}}) {
    INFO("dp " << dp << " tp " << tp << " vocab parallel " << vocabParallel);
    LinearModel shardedModel = model;
    shardedModel.vocabParallel = vocabParallel;
    plan::Plan serialPlan = makeLinearPlan(shardedModel, dp, tp);
    plan::Plan asyncPlan = withAsyncCollectives(serialPlan);
    REQUIRE(asyncPlan.numEvents > 0);
    auto serial = makeRuntime(serialPlan);
    auto async = makeRuntime(
        asyncPlan, RunOptions{.poisonActivations = true, .checkHazards = true});
    for (Runtime *runtime : {serial.get(), async.get()}) {
      REQUIRE(runtime->initParams(11));
      REQUIRE(runtime->setBatch(tokens));
    }
    for (int step = 0; step < 3; ++step) {
      auto serialStats = serial->step();
      auto asyncStats = async->step();
      INFO(asyncStats.status().message());
      REQUIRE(serialStats);
      REQUIRE(asyncStats);
      REQUIRE(asyncStats->loss == serialStats->loss);
      for (const char *name : {"logits", "grad:embed.weight"})
        REQUIRE(output(*async, name) == output(*serial, name));
    }
    REQUIRE(param(*async, "head.weight") == param(*serial, "head.weight"));

    // Dropping the wait of the first consumer of the last collective
    // leaves its result unordered against that consumer.
    plan::Plan racy = asyncPlan;
    int64_t event = racy.numEvents - 1;
    for (plan::Instruction &instr : racy.instructions)
      std::erase(instr.waits, event);
    Status status = createStatus(racy, true);
    INFO(status.message());
    REQUIRE(status.code() == Status::Code::RuntimeError);
    REQUIRE(mentions(status, "(all_reduce) on stream 1"));
  }
}

TEST_CASE("checking mode poisons an activation after its last use",
          "[executor][streams]") {
  using plan::Region;
  PlanBuilder b;
  b.plan.mesh = {{"dp", 1}, {"tp", 1}};
  int64_t x = b.buffer("x", Region::Activation, DType::F32, {4});
  int64_t y = b.buffer("y", Region::Activation, DType::F32, {4});
  int64_t out = b.buffer("out", Region::Output, DType::F32, {4});
  b.io(false, "out", out, {4});
  // stale aliases x's bytes but is never written: reading it reads x's
  // leftovers, which only look right until something poisons them.
  int64_t stale = b.buffer("stale", Region::Activation, DType::F32, {4});
  b.plan.buffers[stale].offset = b.plan.buffers[x].offset;
  b.instr("fill", {}, {x}, {{"value", 2.0}});
  b.instr("scale", {x}, {y}, {{"factor", 3.0}});
  b.instr("add", {stale, y}, {out});
  auto unchecked = makeRuntime(b.plan, RunOptions{.checkHazards = false});
  REQUIRE(unchecked->step());
  for (double value : output(*unchecked, "out"))
    REQUIRE(value == 8.0);
  // Checking mode poisons x after the scale, so the add reads NaN through
  // stale, and the check on its output names it.
  auto checked = makeRuntime(b.plan, RunOptions{.checkHazards = true});
  auto step = checked->step();
  REQUIRE_FALSE(step);
  INFO(step.status().message());
  CHECK(step.status().message().find("instr 2 (add)") != std::string::npos);
  CHECK(step.status().message().find("'out' holds 4 NaN or infinite") !=
        std::string::npos);
}

TEST_CASE("checking mode names the first instruction whose output goes "
          "non-finite",
          "[executor][streams]") {
  LinearModel model;
  std::vector<int32_t> tokens(model.batch * model.seqLen);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 3 + 2) % model.validVocab);
  auto runtime = makeRuntime(makeLinearPlan(model, 1, 2),
                             RunOptions{.checkHazards = true});
  REQUIRE(runtime->initParams(5));
  REQUIRE(runtime->setBatch(tokens));
  // A clean step passes the check.
  auto clean = runtime->step();
  INFO(clean.status().message());
  REQUIRE(clean);
  // One infinite weight of the head: the logits matmul is the first
  // instruction to write a non-finite value.
  auto params = runtime->gatherParams();
  REQUIRE(params);
  for (plan::NamedTensor &tensor : params->tensors)
    if (tensor.name == "head.weight") {
      float inf = std::numeric_limits<float>::infinity();
      std::memcpy(tensor.bytes.data() + 4 * sizeof(float), &inf, sizeof(float));
    }
  REQUIRE(runtime->loadParams(*params));
  auto diverged = runtime->step();
  REQUIRE_FALSE(diverged);
  std::string message = diverged.status().message();
  INFO(message);
  CHECK(message.find(": the first output to go non-finite: 'logits") !=
        std::string::npos);
  CHECK(message.find("(matmul") != std::string::npos);
  // Without checking mode the step runs on and the loss is not finite.
  auto unchecked = makeRuntime(makeLinearPlan(model, 1, 2));
  REQUIRE(unchecked->initParams(5));
  REQUIRE(unchecked->loadParams(*params));
  REQUIRE(unchecked->setBatch(tokens));
  auto stats = unchecked->step();
  REQUIRE(stats);
  CHECK_FALSE(std::isfinite(stats->loss));
}

namespace {

/// A send or recv of one stage to another over pp, on stream 1.
plan::Instruction transfer(const char *op, int64_t stage, int64_t peer,
                           int64_t tag) {
  plan::Instruction instr;
  instr.op = op;
  instr.stream = 1;
  instr.stage = stage;
  instr.attrs["axis"] = std::string("pp");
  instr.attrs["peer"] = peer;
  instr.attrs["tag"] = tag;
  return instr;
}

} // namespace

TEST_CASE("transfers must pair in order where NCCL matches them", "[streams]") {
  plan::Plan plan;
  // Stage 0 sends tags 0 then 1 to stage 1, which receives them in that
  // order, and sends tag 2 back.
  plan.instructions = {transfer("send", 0, 1, 0), transfer("send", 0, 1, 1),
                       transfer("recv", 0, 1, 2), transfer("recv", 1, 0, 0),
                       transfer("recv", 1, 0, 1), transfer("send", 1, 0, 2)};
  REQUIRE(exec::checkTransfersPairInOrder(plan));

  SECTION("a receiver listing tags out of the sender's order is refused") {
    std::swap(plan.instructions[3], plan.instructions[4]);
    Status status = exec::checkTransfersPairInOrder(plan);
    REQUIRE_FALSE(status);
    CHECK_THAT(status.message(),
               Catch::Contains("from stage 0 to stage 1 on stream 1 do not "
                               "pair in order: the 1st send has tag 0, the "
                               "1st recv tag 1"));
  }
  SECTION("a send without its recv is refused") {
    plan.instructions.erase(plan.instructions.begin() + 4);
    Status status = exec::checkTransfersPairInOrder(plan);
    REQUIRE_FALSE(status);
    CHECK_THAT(status.message(), Catch::Contains("2 sends but 1 recvs"));
  }
  SECTION("the same tags on different streams are different links") {
    plan.instructions[4].stream = 0;
    REQUIRE_FALSE(exec::checkTransfersPairInOrder(plan));
  }
}
