//===- RuntimeTest.cpp - the runtime on hand-built plans ------------------===//

#include "executor/Runtime.h"
#include "executor/OpTable.h"
#include "planner/plan/ColumnSlots.h"

#include "TestPlans.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace sharc;
using namespace sharc::exec;
using namespace sharc::exec::test;

namespace {

std::unique_ptr<Runtime> makeRuntime(const plan::Plan &plan,
                                     RunOptions options = {}) {
  auto runtime = Runtime::create(plan, options);
  INFO(runtime.status().message());
  REQUIRE(runtime);
  return std::move(*runtime);
}

std::vector<double> asDoubles(const plan::NamedTensor &tensor) {
  return plan::tensorAsDoubles(tensor);
}

/// A fixed batch-first [B, S] batch: ids cycle through the vocabulary.
std::vector<int32_t> fixedBatch(const LinearModel &model) {
  std::vector<int32_t> tokens(model.batch * model.seqLen);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((i * 3 + i / 7) % model.validVocab);
  return tokens;
}

/// The linear model's step computed with double loops from the weights:
/// x = E[token], logits = x W^T, mean cross entropy over the shifted labels.
struct Reference {
  double loss = 0;
  std::vector<double> logits, gradEmbed, gradHead;
};

Reference reference(const LinearModel &m, const std::vector<double> &embed,
                    const std::vector<double> &head,
                    const std::vector<int32_t> &tokens) {
  int64_t V = m.vocab, H = m.hidden, S = m.seqLen, B = m.batch;
  Reference ref;
  ref.logits.assign(S * B * V, 0);
  ref.gradEmbed.assign(V * H, 0);
  ref.gradHead.assign(V * H, 0);
  double numValid = (S - 1) * B;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t b = 0; b < B; ++b) {
      int32_t token = tokens[b * S + s];
      double *logit = &ref.logits[(s * B + b) * V];
      for (int64_t v = 0; v < V; ++v)
        for (int64_t h = 0; h < H; ++h)
          logit[v] += embed[token * H + h] * head[v * H + h];
      if (s == S - 1)
        continue; // label -100
      int32_t label = tokens[b * S + s + 1];
      // Columns from validVocab on are padding: no part in the softmax.
      int64_t validV = m.validVocab;
      double maxLogit = logit[0];
      for (int64_t v = 1; v < validV; ++v)
        maxLogit = std::max(maxLogit, logit[v]);
      double sumExp = 0;
      for (int64_t v = 0; v < validV; ++v)
        sumExp += std::exp(logit[v] - maxLogit);
      double lse = maxLogit + std::log(sumExp);
      ref.loss += (lse - logit[label]) / numValid;
      for (int64_t v = 0; v < validV; ++v) {
        double dlogit =
            (std::exp(logit[v] - lse) - (v == label ? 1.0 : 0.0)) / numValid;
        for (int64_t h = 0; h < H; ++h) {
          ref.gradHead[v * H + h] += dlogit * embed[token * H + h];
          ref.gradEmbed[token * H + h] += dlogit * head[v * H + h];
        }
      }
    }
  return ref;
}

void requireClose(const std::vector<double> &actual,
                  const std::vector<double> &expected, double tolerance) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("element " << i);
    REQUIRE(actual[i] == Approx(expected[i]).margin(tolerance));
  }
}

std::vector<double> gathered(const Runtime &runtime, const std::string &name) {
  auto tensor = runtime.gatherOutput(name);
  INFO(tensor.status().message());
  REQUIRE(tensor);
  REQUIRE(tensor->dtype == DType::F32);
  return asDoubles(*tensor);
}

} // namespace

TEST_CASE("step 1 of the linear model matches a double-loop reference",
          "[executor]") {
  LinearModel model;
  SECTION("every column valid") {}
  SECTION("one padded vocabulary column") { model.validVocab = 7; }
  auto runtime = makeRuntime(makeLinearPlan(model, 1, 1),
                             RunOptions{.poisonActivations = true});
  REQUIRE(runtime->initParams(42));
  auto params = runtime->gatherParams();
  REQUIRE(params);
  std::vector<double> embed = asDoubles(*params->find("embed.weight"));
  std::vector<double> head = asDoubles(*params->find("head.weight"));
  std::vector<int32_t> tokens = fixedBatch(model);
  REQUIRE(runtime->setBatch(tokens));
  REQUIRE(runtime->nextStep() == 1);
  auto stats = runtime->step();
  INFO(stats.status().message());
  REQUIRE(stats);
  REQUIRE(runtime->nextStep() == 2);

  Reference ref = reference(model, embed, head, tokens);
  REQUIRE(stats->loss == Approx(ref.loss).epsilon(1e-5));
  requireClose(gathered(*runtime, "logits"), ref.logits, 1e-5);
  requireClose(gathered(*runtime, "grad:embed.weight"), ref.gradEmbed, 1e-6);
  requireClose(gathered(*runtime, "grad:head.weight"), ref.gradHead, 1e-6);

  // AdamW's first step from zero moments: m/sqrt(v) with bias correction
  // is g/|g|, so p' = p (1 - lr wd) - lr g / (|g| + eps).
  auto updated = runtime->gatherParams();
  REQUIRE(updated);
  std::vector<double> newHead = asDoubles(*updated->find("head.weight"));
  std::vector<double> expectHead(head.size());
  for (size_t i = 0; i < head.size(); ++i)
    expectHead[i] =
        head[i] * (1 - model.lr * 0.01) -
        model.lr * ref.gradHead[i] / (std::abs(ref.gradHead[i]) + 1e-8);
  requireClose(newHead, expectHead, 1e-5);
}

TEST_CASE("training the linear model on a fixed batch lowers the loss",
          "[executor]") {
  LinearModel model;
  auto runtime = makeRuntime(makeLinearPlan(model, 1, 1));
  REQUIRE(runtime->initParams(7));
  REQUIRE(runtime->setBatch(fixedBatch(model)));
  std::vector<double> losses;
  for (int i = 0; i < 30; ++i) {
    auto stats = runtime->step();
    REQUIRE(stats);
    REQUIRE(std::isfinite(stats->loss));
    losses.push_back(stats->loss);
  }
  INFO("first " << losses.front() << " last " << losses.back());
  REQUIRE(losses.back() < 0.5 * losses.front());
  REQUIRE(runtime->nextStep() == 31);
}

TEST_CASE("dp and tp plans start from the dense weights and agree with it",
          "[executor]") {
  LinearModel model;
  SECTION("every column valid") {}
  SECTION("one padded vocabulary column") { model.validVocab = 7; }
  std::vector<int32_t> tokens = fixedBatch(model);
  auto dense = makeRuntime(makeLinearPlan(model, 1, 1));
  REQUIRE(dense->initParams(42));
  REQUIRE(dense->setBatch(tokens));
  auto denseStats = dense->step();
  REQUIRE(denseStats);

  for (auto [dp, tp, vocabParallel] :
       {std::tuple<int64_t, int64_t, bool>{2, 1, false},
        {1, 2, false},
        {2, 2, false},
        {1, 2, true},
        {2, 2, true}}) {
    INFO("dp " << dp << " tp " << tp << " vocab parallel " << vocabParallel);
    LinearModel shardedModel = model;
    shardedModel.vocabParallel = vocabParallel;
    auto sharded = makeRuntime(makeLinearPlan(shardedModel, dp, tp));
    REQUIRE(sharded->worldSize() == dp * tp);
    REQUIRE(sharded->initParams(42));
    auto before = sharded->gatherParams();
    REQUIRE(before);
    REQUIRE(sharded->setBatch(tokens));
    auto stats = sharded->step();
    INFO(stats.status().message());
    REQUIRE(stats);
    // Every dp rank reports its own mean, and the plan sums them.
    REQUIRE(stats->loss == Approx(dp * denseStats->loss).epsilon(1e-6));
    for (const char *name : {"logits", "grad:embed.weight", "grad:head.weight"})
      requireClose(gathered(*sharded, name), gathered(*dense, name), 1e-6);
    auto after = sharded->gatherParams();
    auto denseAfter = dense->gatherParams();
    REQUIRE(after);
    for (const char *name : {"embed.weight", "head.weight"})
      requireClose(asDoubles(*after->find(name)),
                   asDoubles(*denseAfter->find(name)), 1e-6);
  }
}

TEST_CASE("setBatch writes sequence-first tokens and shifted labels",
          "[executor]") {
  LinearModel model;
  for (int64_t dp : {1, 2}) {
    auto runtime = makeRuntime(makeLinearPlan(model, dp, 1));
    std::vector<int32_t> tokens = fixedBatch(model);
    REQUIRE(runtime->setBatch(tokens));
    auto tokensSB = runtime->gatherOutput("tokens");
    auto labelsSB = runtime->gatherOutput("labels");
    REQUIRE(tokensSB);
    REQUIRE(labelsSB);
    REQUIRE(labelsSB->dtype == DType::I32);
    REQUIRE(labelsSB->shape == std::vector<int64_t>{5, 4});
    std::vector<int32_t> ids(20), labels(20);
    std::memcpy(ids.data(), tokensSB->bytes.data(), 80);
    std::memcpy(labels.data(), labelsSB->bytes.data(), 80);
    for (int64_t s = 0; s < 5; ++s)
      for (int64_t b = 0; b < 4; ++b) {
        REQUIRE(ids[s * 4 + b] == tokens[b * 5 + s]);
        REQUIRE(labels[s * 4 + b] == (s < 4 ? tokens[b * 5 + s + 1] : -100));
      }
  }
  auto runtime = makeRuntime(makeLinearPlan(model, 1, 1));
  std::vector<int32_t> tooShort(7, 0);
  REQUIRE(runtime->setBatch(tooShort).code() == Status::Code::InvalidInput);
  std::vector<int32_t> outOfVocab = fixedBatch(model);
  outOfVocab[3] = 8;
  Status status = runtime->setBatch(outOfVocab);
  REQUIRE(status.code() == Status::Code::InvalidInput);
  REQUIRE(status.message().find("token 8") != std::string::npos);
}

TEST_CASE("setBatch takes explicit labels, -100 anywhere", "[executor]") {
  LinearModel model;
  for (int64_t dp : {1, 2}) {
    auto runtime = makeRuntime(makeLinearPlan(model, dp, 1));
    std::vector<int32_t> tokens = fixedBatch(model), labels(20);
    for (int64_t i = 0; i < 20; ++i)
      labels[i] = i % 3 == 0 ? -100 : tokens[(i * 7) % 20];
    REQUIRE(runtime->setBatch(tokens, labels));
    auto labelsSB = runtime->gatherOutput("labels");
    REQUIRE(labelsSB);
    std::vector<int32_t> written(20);
    std::memcpy(written.data(), labelsSB->bytes.data(), 80);
    for (int64_t s = 0; s < 5; ++s)
      for (int64_t b = 0; b < 4; ++b)
        REQUIRE(written[s * 4 + b] == labels[b * 5 + s]);
  }
  auto runtime = makeRuntime(makeLinearPlan(model, 1, 1));
  std::vector<int32_t> tokens = fixedBatch(model), labels(20, -100);
  REQUIRE(runtime->setBatch(tokens, std::vector<int32_t>(19, -100)).code() ==
          Status::Code::InvalidInput);
  labels[6] = -1;
  Status status = runtime->setBatch(tokens, labels);
  REQUIRE(status.code() == Status::Code::InvalidInput);
  REQUIRE(status.message().find("label -1 at [1, 1]") != std::string::npos);
}

TEST_CASE("loadParams and gatherParams round-trip global tensors",
          "[executor]") {
  LinearModel model;
  // tp shards the head; bf16 storage rounds on load.
  auto runtime = makeRuntime(makeLinearPlan(model, 1, 2, DType::BF16));
  plan::TensorFile file;
  for (const char *name : {"embed.weight", "head.weight"}) {
    std::vector<float> values(32);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = 0.1f * static_cast<float>(i) - 1.3f + (name[0] == 'h');
    plan::NamedTensor tensor{name, DType::F32, {8, 4}, {}};
    tensor.bytes.resize(128);
    std::memcpy(tensor.bytes.data(), values.data(), 128);
    file.tensors.push_back(tensor);
  }
  REQUIRE(runtime->loadParams(file));
  auto params = runtime->gatherParams();
  REQUIRE(params);
  REQUIRE(params->tensors.size() == 2);
  for (const plan::NamedTensor &original : file.tensors) {
    const plan::NamedTensor *back = params->find(original.name);
    REQUIRE(back);
    REQUIRE(back->dtype == DType::BF16);
    REQUIRE(back->shape == original.shape);
    std::vector<double> expected = asDoubles(original);
    std::vector<double> actual = asDoubles(*back);
    for (size_t i = 0; i < expected.size(); ++i)
      REQUIRE(actual[i] ==
              bf16ToFloat(floatToBf16(static_cast<float>(expected[i]))));
  }

  plan::TensorFile missing = file;
  missing.tensors.pop_back();
  Status status = runtime->loadParams(missing);
  REQUIRE(status.code() == Status::Code::InvalidInput);
  REQUIRE(status.message().find("head.weight") != std::string::npos);

  plan::TensorFile misShaped = file;
  misShaped.tensors[0].shape = {4, 8};
  status = runtime->loadParams(misShaped);
  REQUIRE(status.code() == Status::Code::InvalidInput);
  REQUIRE(status.message().find("embed.weight") != std::string::npos);
  REQUIRE(status.message().find("[4,8]") != std::string::npos);
}

TEST_CASE("plan errors name the rank, the instruction and the op",
          "[executor]") {
  LinearModel model;
  plan::Plan plan = makeLinearPlan(model, 1, 1);
  plan.instructions[1].op = "frobnicate";
  auto runtime = Runtime::create(plan, {});
  REQUIRE_FALSE(runtime);
  REQUIRE(runtime.status().code() == Status::Code::InvalidInput);
  REQUIRE(runtime.status().message().rfind("rank 0, instr 1 (frobnicate): "
                                           "unknown op",
                                           0) == 0);

  plan = makeLinearPlan(model, 1, 1);
  plan.instructions[1].operands = {plan.instructions[1].operands[0]};
  auto wrongArity = Runtime::create(plan, {});
  REQUIRE_FALSE(wrongArity);
  REQUIRE(wrongArity.status().message().find("instr 1 (matmul)") !=
          std::string::npos);

  // Swapped operands: the weight slot gets the rank-3 activation.
  plan = makeLinearPlan(model, 1, 1);
  std::swap(plan.instructions[1].operands[0], plan.instructions[1].operands[1]);
  auto badShape = Runtime::create(plan, {});
  REQUIRE_FALSE(badShape);
  REQUIRE(badShape.status().message().find("rank 0, instr 1 (matmul)") !=
          std::string::npos);

  // A column view (row_stride) where the ops take only packed rows: the
  // embedding that writes it is refused first.
  plan = makeLinearPlan(model, 1, 1);
  plan::Buffer &x = plan.buffers[plan.instructions[1].operands[0]];
  x.rowStride = x.shape.back();
  auto strided = Runtime::create(plan, {});
  REQUIRE_FALSE(strided);
  REQUIRE(strided.status().message() ==
          "rank 0, instr 0 (embedding): result 0 (buffer " +
              std::to_string(x.id) + " '" + x.name +
              "') is a column view with row_stride " +
              std::to_string(x.shape.back()) +
              ", which embedding takes only packed");

  auto cuda = Runtime::create(makeLinearPlan(model, 1, 1),
                              RunOptions{.backend = "cuda"});
  REQUIRE(cuda.status().code() == Status::Code::InvalidInput);
}

TEST_CASE("the op table takes column views in the planner's slots alone",
          "[executor]") {
  // plan/ColumnSlots.h is the planner's list of slots it may make column
  // views for; each of its ops must be in the table (a misspelt op would
  // leave the runtime refusing every view the planner makes), with those
  // slots strided and within the op's operands and results.
  for (const plan::ColumnSlots &slots : plan::kColumnSlots) {
    INFO(slots.op);
    const OpDef *def = OpTable::get().find(std::string(slots.op));
    REQUIRE(def);
    REQUIRE(def->stridedOperands == slots.operands);
    REQUIRE(def->stridedResults == slots.results);
    REQUIRE(slots.operands >> def->numOperands == 0u);
    REQUIRE(slots.results >> def->numResults == 0u);
  }
  // Every other op takes only packed buffers.
  for (const char *op : {"embedding", "matmul", "matmul_dgrad", "rms_norm",
                         "swiglu_packed", "add", "all_gather", "adamw"}) {
    INFO(op);
    REQUIRE_FALSE(plan::columnSlotsOf(op));
    REQUIRE(OpTable::get().find(op)->stridedOperands == 0u);
    REQUIRE(OpTable::get().find(op)->stridedResults == 0u);
  }
}

TEST_CASE("poisoned activations expose a read of an unwritten buffer",
          "[executor]") {
  LinearModel model;
  plan::Plan plan = makeLinearPlan(model, 1, 1);
  // Without the embedding, the matmul reads x that nobody wrote.
  plan.instructions.erase(plan.instructions.begin());
  for (bool poison : {false, true}) {
    auto runtime = makeRuntime(plan, RunOptions{.poisonActivations = poison});
    REQUIRE(runtime->initParams(1));
    REQUIRE(runtime->setBatch(fixedBatch(model)));
    auto stats = runtime->step();
    REQUIRE(stats);
    REQUIRE(std::isnan(stats->loss) == poison);
  }
}

TEST_CASE("stream and event ids outside the plan's counts are rejected",
          "[executor]") {
  // StreamsTest.cpp runs plans on two streams; this only checks the ids.
  LinearModel model;
  plan::Plan plan = makeLinearPlan(model, 2, 2);
  plan.numStreams = 2;
  plan.numEvents = 1;
  plan.instructions[0].signals = {0};
  plan.instructions[1].waits = {5};
  auto badEvent = Runtime::create(plan, {});
  REQUIRE_FALSE(badEvent);
  REQUIRE(badEvent.status().code() == Status::Code::InvalidInput);
  REQUIRE(badEvent.status().message().find("event 5") != std::string::npos);

  plan.instructions[1].waits = {0};
  plan.instructions[1].stream = -1;
  auto badStream = Runtime::create(plan, {});
  REQUIRE_FALSE(badStream);
  REQUIRE(badStream.status().message().find("negative stream -1") !=
          std::string::npos);
}

TEST_CASE("the lr schedule scales adamw's lr per step without rebinding",
          "[executor]") {
  LinearModel model;
  plan::Plan scheduled = makeLinearPlan(model, 1, 1);
  scheduled.lrSchedule = {
      .decay = "linear", .warmupSteps = 2, .totalSteps = 4, .minFactor = 0.25};
  // The reference: plans whose adamw carries the scheduled lr itself,
  // step 1 at lr / 2 (warmup), step 3 at lr (1 - 0.75 / 2).
  auto withLrFactor = [&](double factor) {
    plan::Plan plan = makeLinearPlan(model, 1, 1);
    for (plan::Instruction &instr : plan.instructions)
      if (instr.op == "adamw")
        instr.attrs["lr"] = instr.getFloat("lr") * factor;
    return plan;
  };
  auto runtime = makeRuntime(scheduled);
  REQUIRE(runtime->initParams(3));
  REQUIRE(runtime->setBatch(fixedBatch(model)));
  std::vector<plan::TensorFile> params;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(runtime->step());
    params.push_back(*runtime->gatherParams());
  }
  auto reference = makeRuntime(withLrFactor(0.5));
  REQUIRE(reference->initParams(3));
  REQUIRE(reference->setBatch(fixedBatch(model)));
  REQUIRE(reference->step());
  auto full = makeRuntime(withLrFactor(1.0));
  auto late = makeRuntime(withLrFactor(1.0 - 0.75 * 0.5));
  for (Runtime *next : {full.get(), late.get()}) {
    REQUIRE(next->loadParams(*reference->gatherParams()));
    REQUIRE(next->loadOptimizerState(*reference->gatherOptimizerState()));
    next->setNextStep(reference->nextStep());
    REQUIRE(next->setBatch(fixedBatch(model)));
    REQUIRE(next->step());
    reference = next == full.get() ? std::move(full) : std::move(late);
    if (reference->nextStep() == 3)
      REQUIRE(asDoubles(*reference->gatherParams()->find("head.weight")) ==
              asDoubles(*params[1].find("head.weight")));
  }
  for (const char *name : {"embed.weight", "head.weight"})
    REQUIRE(asDoubles(*reference->gatherParams()->find(name)) ==
            asDoubles(*params[2].find(name)));
  // And the schedule did change something: step 1 at full lr differs.
  auto unscheduled = makeRuntime(makeLinearPlan(model, 1, 1));
  REQUIRE(unscheduled->initParams(3));
  REQUIRE(unscheduled->setBatch(fixedBatch(model)));
  REQUIRE(unscheduled->step());
  REQUIRE(asDoubles(*unscheduled->gatherParams()->find("head.weight")) !=
          asDoubles(*params[0].find("head.weight")));
}

TEST_CASE("evalLoss runs the forward alone and leaves training untouched",
          "[executor]") {
  LinearModel model;
  // dp=2: the loss is complete only after an all_reduce, past the first
  // backward instruction.
  plan::Plan plan = makeLinearPlan(model, 2, 1);
  auto evaluated = makeRuntime(plan);
  auto plain = makeRuntime(plan);
  for (Runtime *runtime : {evaluated.get(), plain.get()}) {
    REQUIRE(runtime->initParams(5));
    REQUIRE(runtime->setBatch(fixedBatch(model)));
  }
  // The eval loss is the loss the next training step reports.
  auto evalLoss = evaluated->evalLoss();
  INFO(evalLoss.status().message());
  REQUIRE(evalLoss);
  REQUIRE(evaluated->nextStep() == 1);
  auto stepped = evaluated->step();
  REQUIRE(stepped);
  REQUIRE(*evalLoss == stepped->loss);
  REQUIRE(plain->step()->loss == stepped->loss);
  for (const char *name : {"embed.weight", "head.weight"})
    REQUIRE(asDoubles(*evaluated->gatherParams()->find(name)) ==
            asDoubles(*plain->gatherParams()->find(name)));

  // A plan whose loss reads a parameter after its update would train while
  // evaluating.
  plan::Plan early = plan;
  size_t adamw = early.instructions.size() - 1;
  REQUIRE(early.instructions[adamw].op == "adamw");
  std::rotate(early.instructions.begin(), early.instructions.begin() + adamw,
              early.instructions.begin() + adamw + 1);
  auto refused = makeRuntime(early)->evalLoss();
  REQUIRE(refused.status().code() == Status::Code::InvalidInput);
  REQUIRE_THAT(refused.status().message(),
               Catch::Matchers::Contains("instr 0 (adamw) writes param "
                                         "buffer 'head.weight', and the "
                                         "loss depends on it"));
}
