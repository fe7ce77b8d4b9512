//===- GenerationTest.cpp - generation against PyTorch's logits -----------===//
//
// tests/golden's tiny model holds PyTorch's logits at every position of two
// token rows. Greedy generation from each prefix of a row must pick the
// token PyTorch scores highest after it: a check of the window, the
// position read and the batch row that is independent of sharc's own code.
// A sharded plan must generate what the dense one does, and generation
// past the window must equal one token at a time from the slid window. A
// decode plan (key/value caches) fed the rows a position a step must give
// PyTorch's logits at each position. Rows given prompts of their own draw
// what each would draw given its prompt alone, and a row that draws a stop
// id ends there with the ids it drew before. A decode plan with a prefill
// fed the rows' first positions a chunk at a time, then a position a step,
// gives PyTorch's logits after, and generates what the plan without does.
//
//===----------------------------------------------------------------------===//

#include "executor/Generation.h"
#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace sharc;
using namespace sharc::testing;

namespace {

struct Golden {
  plan::TensorFile params;
  std::vector<int32_t> tokens; ///< [B, S] batch-first
  std::vector<double> logits;  ///< [B, S, V] batch-first
};

Golden readGolden() {
  auto file = plan::readSafeTensors(fixturePath("tiny-untied.safetensors"));
  if (!file.isOk())
    FAIL(file.status().message());
  Golden golden;
  for (const plan::NamedTensor &tensor : file->tensors)
    if (tensor.name.rfind("param:", 0) == 0) {
      plan::NamedTensor param = tensor;
      param.name = tensor.name.substr(6);
      golden.params.tensors.push_back(std::move(param));
    }
  for (double id : plan::tensorAsDoubles(*file->find("tokens")))
    golden.tokens.push_back(static_cast<int32_t>(id));
  golden.logits = plan::tensorAsDoubles(*file->find("logits"));
  return golden;
}

std::unique_ptr<exec::Runtime> goldenRuntime(const plan::Plan &plan,
                                             const Golden &golden) {
  auto runtime = makeRuntime(plan);
  REQUIRE(runtime->loadParams(golden.params).isOk());
  return runtime;
}

/// Every row's new ids after `prompts` (one for all rows, or one a row);
/// the callback's tokens must come in order and agree with them.
std::vector<std::vector<int32_t>>
generateRows(exec::Runtime &runtime, std::vector<std::vector<int32_t>> prompts,
             int64_t count, exec::SamplingOptions sampling,
             std::vector<int32_t> stopIds = {}) {
  exec::GenerationOptions options;
  options.prompts = std::move(prompts);
  options.stopIds = std::move(stopIds);
  options.maxNewTokens = count;
  options.sampling = sampling;
  options.seed = 3;
  std::vector<std::vector<int32_t>> called;
  auto samples = exec::generateTokens(
      runtime, options, [&](int64_t index, const std::vector<int32_t> &ids) {
        REQUIRE(index == static_cast<int64_t>(called.size()));
        called.push_back(ids);
        return Status::ok();
      });
  if (!samples.isOk())
    FAIL(samples.status().message());
  // The longest row's count (all of them without stop ids); a row that
  // ended repeats its last id.
  size_t longest = 0;
  for (const std::vector<int32_t> &row : *samples)
    longest = std::max(longest, row.size());
  REQUIRE(called.size() == longest);
  if (options.stopIds.empty())
    REQUIRE(static_cast<int64_t>(longest) == count);
  for (size_t b = 0; b < samples->size(); ++b)
    for (size_t k = 0; k < longest; ++k)
      REQUIRE(called[k][b] ==
              (*samples)[b][std::min(k, (*samples)[b].size() - 1)]);
  return *samples;
}

std::vector<std::vector<int32_t>> generate(exec::Runtime &runtime,
                                           std::vector<int32_t> prompt,
                                           int64_t count,
                                           exec::SamplingOptions sampling) {
  return generateRows(runtime,
                      std::vector<std::vector<int32_t>>{std::move(prompt)},
                      count, sampling);
}

const exec::SamplingOptions kGreedy{0.0, 0};

/// [S, B, V] logits against the fixture's [B, S, V] within GoldenParityTest's
/// bound (1e-5 of the largest).
void requireLogitsClose(const plan::NamedTensor &logits, const Golden &golden) {
  std::vector<double> ours = plan::tensorAsDoubles(logits);
  double error = 0, largest = 0;
  for (int64_t s = 0; s < 16; ++s)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t v = 0; v < 128; ++v) {
        double theirs = golden.logits[(b * 16 + s) * 128 + v];
        error =
            std::max(error, std::fabs(ours[(s * 2 + b) * 128 + v] - theirs));
        largest = std::max(largest, std::fabs(theirs));
      }
  REQUIRE(error <= 1e-5 * largest);
}

/// Feeds both rows' golden tokens at positions [first, 16) to a decode
/// plan a step each: the logits must be PyTorch's within 1e-5 of the
/// largest.
void requireDecodeLogits(exec::Runtime &runtime, const Golden &golden,
                         int64_t first) {
  int64_t seqLen = 16, vocab = 128;
  double error = 0, largest = 0;
  for (int64_t s = first; s < seqLen; ++s) {
    std::vector<int32_t> tokens{golden.tokens[s], golden.tokens[seqLen + s]};
    REQUIRE(runtime
                .setDecodeStep(
                    tokens, {static_cast<int32_t>(s), static_cast<int32_t>(s)})
                .isOk());
    auto logits = runtime.evalOutput("logits", 0, 1);
    REQUIRE(logits.isOk());
    std::vector<double> ours = plan::tensorAsDoubles(*logits);
    REQUIRE(ours.size() == 2 * 128);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t v = 0; v < vocab; ++v) {
        double theirs = golden.logits[(b * seqLen + s) * vocab + v];
        error = std::max(error, std::fabs(ours[b * vocab + v] - theirs));
        largest = std::max(largest, std::fabs(theirs));
      }
  }
  REQUIRE(error <= 1e-5 * largest);
}

} // namespace

TEST_CASE("greedy generation picks PyTorch's most likely next token after "
          "every prefix",
          "[numerics][golden]") {
  Golden golden = readGolden();
  plan::Plan plan = compilePlan("tiny.yaml", /*emitLogits=*/true,
                                /*withOptimizer=*/false);
  REQUIRE(plan.seqLen == 16);
  REQUIRE(plan.batchSize == 2);
  int64_t seqLen = plan.seqLen, vocab = plan.vocabSize;
  auto runtime = goldenRuntime(plan, golden);
  int checked = 0;
  for (int64_t row = 0; row < 2; ++row)
    for (int64_t length = 1; length <= seqLen; ++length) {
      const int32_t *tokens = golden.tokens.data() + row * seqLen;
      const double *scores =
          golden.logits.data() + (row * seqLen + length - 1) * vocab;
      // PyTorch's ranking; a top two closer than fp32 noise (1e-5 of the
      // largest logit, GoldenParityTest's bound) has no right answer.
      std::vector<int64_t> order(static_cast<size_t>(vocab));
      for (int64_t v = 0; v < vocab; ++v)
        order[v] = v;
      std::partial_sort(
          order.begin(), order.begin() + 2, order.end(),
          [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
      double largest = 0;
      for (int64_t v = 0; v < vocab; ++v)
        largest = std::max(largest, std::fabs(scores[v]));
      if (scores[order[0]] - scores[order[1]] <= 2e-5 * largest)
        continue;
      auto samples = generate(*runtime, {tokens, tokens + length}, 1, kGreedy);
      INFO("row " << row << ", prefix of " << length);
      // Both batch rows continue the same prompt.
      REQUIRE(samples[0] == std::vector<int32_t>{int32_t(order[0])});
      REQUIRE(samples[1] == samples[0]);
      ++checked;
    }
  // Random weights leave clear winners almost everywhere.
  REQUIRE(checked >= 28);
}

TEST_CASE("generation past the window equals one token at a time from the "
          "slid window",
          "[numerics][golden]") {
  Golden golden = readGolden();
  plan::Plan plan = compilePlan("tiny.yaml", true, false);
  int64_t seqLen = plan.seqLen, batch = plan.batchSize, vocab = plan.vocabSize;
  auto runtime = goldenRuntime(plan, golden);
  // Row 0's logits at the last position of `window`, every row holding it.
  auto lastLogits = [&](const std::vector<int32_t> &window) {
    std::vector<int32_t> tokens(static_cast<size_t>(batch * seqLen), 0);
    for (int64_t b = 0; b < batch; ++b)
      std::copy(window.begin(), window.end(), tokens.begin() + b * seqLen);
    REQUIRE(runtime->setBatch(tokens).isOk());
    auto logits = runtime->evalOutput("logits");
    REQUIRE(logits.isOk());
    const auto *values = reinterpret_cast<const float *>(logits->bytes.data());
    const float *row = values + (window.size() - 1) * batch * vocab;
    return std::vector<float>(row, row + vocab);
  };
  std::vector<int32_t> prompt(golden.tokens.begin(), golden.tokens.begin() + 6);
  for (exec::SamplingOptions sampling :
       {kGreedy, exec::SamplingOptions{1.5, 20}}) {
    // 24 new tokens after 6: the window of 16 slides 14 times.
    std::vector<int32_t> whole = generate(*runtime, prompt, 24, sampling)[0];
    REQUIRE(whole.size() == 24);
    std::vector<int32_t> text = prompt;
    for (size_t k = 0; k < whole.size(); ++k) {
      size_t length = std::min<size_t>(text.size(), seqLen);
      std::vector<float> scores = lastLogits(
          {text.end() - static_cast<std::ptrdiff_t>(length), text.end()});
      // The k-th draw of row 0's stream (seed 3, as generate's).
      int32_t next = exec::sampleToken(scores.data(), vocab, sampling,
                                       exec::uniformDraw(3, 0, k));
      INFO("temperature " << sampling.temperature << ", token " << k);
      REQUIRE(whole[k] == next);
      text.push_back(next);
    }
  }
}

TEST_CASE("a tensor-, sequence- and vocabulary-parallel plan generates what "
          "the dense one does",
          "[numerics][golden]") {
  Golden golden = readGolden();
  PipelineOptions layout;
  REQUIRE(applyModePreset("tp_sp_async_vp", 2, layout));
  layout.withOptimizer = false;
  plan::Plan sharded = compilePlan("tiny.yaml", layout, /*emitLogits=*/true);
  plan::Plan dense = compilePlan("tiny.yaml", true, false);
  auto shardedRuntime = goldenRuntime(sharded, golden);
  auto denseRuntime = goldenRuntime(dense, golden);
  std::vector<int32_t> prompt(golden.tokens.begin(), golden.tokens.begin() + 3);
  for (exec::SamplingOptions sampling :
       {kGreedy, exec::SamplingOptions{1.0, 0}}) {
    auto expected = generate(*denseRuntime, prompt, 20, sampling);
    REQUIRE(generate(*shardedRuntime, prompt, 20, sampling) == expected);
    if (sampling.temperature > 0)
      REQUIRE(expected[0] != expected[1]);
  }
}

TEST_CASE("one position of the logits reads as that row of the whole, in "
          "every layout",
          "[numerics][golden]") {
  // Vocabulary-split logits (tp_vp), batch-split (ddp), sequence-split
  // (cp, the balanced halves 0 and 3 against 1 and 2), and whole (dense).
  Golden golden = readGolden();
  for (const char *mode : {"dense", "tp_vp", "ddp", "cp"}) {
    PipelineOptions layout;
    REQUIRE(applyModePreset(mode, 2, layout));
    layout.withOptimizer = false;
    plan::Plan plan = compilePlan("tiny.yaml", layout, /*emitLogits=*/true);
    auto runtime = goldenRuntime(plan, golden);
    REQUIRE(runtime->setBatch(golden.tokens).isOk());
    auto whole = runtime->evalOutput("logits");
    REQUIRE(whole.isOk());
    REQUIRE(whole->shape == std::vector<int64_t>{16, 2, 128});
    size_t rowBytes = whole->bytes.size() / 16;
    for (int64_t first : {0, 3, 7, 8, 12, 15})
      for (int64_t count : {int64_t{1}, std::min<int64_t>(3, 16 - first)}) {
        auto rows = runtime->gatherOutputRows("logits", first, count);
        REQUIRE(rows.isOk());
        INFO(mode << ": rows " << first << " + " << count);
        REQUIRE(rows->shape == std::vector<int64_t>{count, 2, 128});
        REQUIRE(std::equal(rows->bytes.begin(), rows->bytes.end(),
                           whole->bytes.begin() + first * rowBytes));
      }
    // The same logits as PyTorch's, so no layout reads a stale buffer.
    requireLogitsClose(*whole, golden);
    REQUIRE_FALSE(runtime->gatherOutputRows("logits", 15, 2).isOk());
    REQUIRE_FALSE(runtime->gatherOutputRows("logits", -1, 1).isOk());
  }
}

TEST_CASE("a decode plan fed a row a position a step gives PyTorch's logits "
          "at every position",
          "[numerics][golden]") {
  Golden golden = readGolden();
  plan::Plan plan = compileDecodePlan("tiny.yaml");
  REQUIRE(plan.seqLen == 16);
  REQUIRE(plan.batchSize == 2);
  auto runtime = goldenRuntime(plan, golden);
  requireDecodeLogits(*runtime, golden, 0);
  // The runtime checks what the kernels take on trust.
  for (auto [tokens, positions, message] :
       {std::tuple{std::vector<int32_t>{1, 2}, std::vector<int32_t>{0, 16},
                   "position 16 of sample 1 is outside [0, 16)"},
        {{1, 128}, {0, 0}, "token 128 of sample 1 is outside [0, 128)"},
        {{1}, {0}, "a decode step needs 2 tokens, got 1"}}) {
    Status status = runtime->setDecodeStep(tokens, positions);
    REQUIRE(status.message() == message);
  }
  // A training plan has no positions to set.
  plan::Plan train = compilePlan("tiny.yaml", /*emitLogits=*/true,
                                 /*withOptimizer=*/false);
  REQUIRE_FALSE(makeRuntime(train)->setDecodeStep({1, 2}, {0, 0}).isOk());
}

TEST_CASE("rows given prompts of their own draw what each draws alone",
          "[numerics][golden]") {
  Golden golden = readGolden();
  // Lengths 3 and 12 with 10 new tokens: in the window of 16 the second
  // row slides while the first does not; the decode plan (a cache of 16
  // positions) takes 3 + 10 - 1 and 12 + 10 - 1 > 16 is refused.
  std::vector<int32_t> shortPrompt(golden.tokens.begin(),
                                   golden.tokens.begin() + 3);
  std::vector<int32_t> longPrompt(golden.tokens.begin() + 16,
                                  golden.tokens.begin() + 28);
  plan::Plan window = compilePlan("tiny.yaml", true, false);
  plan::Plan decode = compileDecodePlan("tiny.yaml");
  for (exec::SamplingOptions sampling :
       {kGreedy, exec::SamplingOptions{1.0, 0}}) {
    INFO("temperature " << sampling.temperature);
    auto windowRuntime = goldenRuntime(window, golden);
    auto both =
        generateRows(*windowRuntime, {shortPrompt, longPrompt}, 10, sampling);
    // Row b of a prompt every row continues draws with row b's stream.
    REQUIRE(both[0] == generate(*windowRuntime, shortPrompt, 10, sampling)[0]);
    REQUIRE(both[1] == generate(*windowRuntime, longPrompt, 10, sampling)[1]);
    // A decode plan: prompts of 3 and 5 ids, 8 new tokens (12 positions).
    std::vector<int32_t> middle(longPrompt.begin(), longPrompt.begin() + 5);
    auto decodeRuntime = goldenRuntime(decode, golden);
    auto decoded =
        generateRows(*decodeRuntime, {shortPrompt, middle}, 8, sampling);
    REQUIRE(decoded[0] ==
            generate(*decodeRuntime, shortPrompt, 8, sampling)[0]);
    REQUIRE(decoded[1] == generate(*decodeRuntime, middle, 8, sampling)[1]);
    REQUIRE(decoded ==
            generateRows(*windowRuntime, {shortPrompt, middle}, 8, sampling));
  }
  // Neither one prompt nor one a row; a row's prompt too long for the cache.
  auto runtime = goldenRuntime(decode, golden);
  exec::GenerationOptions options;
  options.prompts = {shortPrompt, shortPrompt, shortPrompt};
  REQUIRE(exec::generateTokens(*runtime, options).status().message() ==
          "3 prompts for a plan of batch 2: give one that every row "
          "continues, or one per row (compile with micro_batch_size 3)");
  options.prompts = {shortPrompt, longPrompt};
  options.maxNewTokens = 10;
  REQUIRE(exec::generateTokens(*runtime, options).status().message() ==
          "the decode plan's key/value cache holds seq_len 16 positions; a "
          "prompt of 12 and 10 new tokens need 21: compile it with a larger "
          "seq_len");
  options.prompts = {shortPrompt, {}};
  REQUIRE(exec::generateTokens(*runtime, options).status().message() ==
          "generation needs a prompt of at least one id");
}

TEST_CASE("a row that draws a stop id ends there", "[numerics][golden]") {
  Golden golden = readGolden();
  std::vector<int32_t> shortPrompt(golden.tokens.begin(),
                                   golden.tokens.begin() + 3);
  std::vector<int32_t> longPrompt(golden.tokens.begin() + 16,
                                  golden.tokens.begin() + 21);
  plan::Plan window = compilePlan("tiny.yaml", true, false);
  plan::Plan decode = compileDecodePlan("tiny.yaml");
  for (const plan::Plan *plan : {&window, &decode}) {
    auto runtime = goldenRuntime(*plan, golden);
    const exec::SamplingOptions sampled{1.0, 0};
    auto free = generateRows(*runtime, {shortPrompt, longPrompt}, 10, sampled);
    // Row 0's fourth id, where it first appears, as the stop id: row 0
    // ends with it; row 1 ends at its first draw of it, or runs to 10.
    int32_t stop = free[0][3];
    auto expected = free;
    for (std::vector<int32_t> &row : expected) {
      auto at = std::find(row.begin(), row.end(), stop);
      if (at != row.end())
        row.erase(at + 1, row.end());
    }
    INFO("stop id " << stop << (plan == &decode ? ", decode" : ", window"));
    REQUIRE(expected[0].size() <= 4);
    REQUIRE(generateRows(*runtime, {shortPrompt, longPrompt}, 10, sampled,
                         {stop}) == expected);
    // Both rows' first ids stop both at once: one token each.
    auto first = generateRows(*runtime, {shortPrompt, longPrompt}, 10, sampled,
                              {free[0][0], free[1][0]});
    REQUIRE(first ==
            std::vector<std::vector<int32_t>>{{free[0][0]}, {free[1][0]}});
  }
  auto runtime = goldenRuntime(decode, golden);
  exec::GenerationOptions options;
  options.prompts = {shortPrompt};
  options.stopIds = {128};
  REQUIRE(exec::generateTokens(*runtime, options).status().message() ==
          "stop id 128 is outside the model's vocabulary [0, 128)");
}

TEST_CASE("a decode plan's prefill fills the caches as a position a step "
          "does",
          "[numerics][golden]") {
  Golden golden = readGolden();
  int64_t seqLen = 16;
  // 11 positions in chunks of 4 (the last padded by repeating position
  // 10), then decode steps: PyTorch's logits at positions 11 to 15.
  plan::Plan plan = compileDecodePlan("tiny.yaml", /*prefillRows=*/4);
  auto runtime = goldenRuntime(plan, golden);
  for (int64_t first = 0; first < 11; first += 4) {
    std::vector<int32_t> tokens, positions;
    for (int64_t t = 0; t < 4; ++t)
      for (int64_t b = 0; b < 2; ++b) {
        int64_t s = std::min<int64_t>(first + t, 10);
        tokens.push_back(golden.tokens[b * seqLen + s]);
        positions.push_back(static_cast<int32_t>(s));
      }
    REQUIRE(runtime->setPrefillStep(tokens, positions).isOk());
    REQUIRE(runtime->evalPass("prefill").isOk());
  }
  requireDecodeLogits(*runtime, golden, 11);
  // A repeated position must repeat its token; a sample's rows are
  // consecutive positions, then repeats of the last (cuDNN's prefill path
  // sees them so); the plan without a prefill has none to set.
  std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<int32_t> positions{0, 0, 1, 1, 1, 2, 1, 3};
  REQUIRE(runtime->setPrefillStep(tokens, positions).message() ==
          "sample 0 has position 1 twice with different tokens (a repeated "
          "row must repeat its token)");
  REQUIRE(runtime->setPrefillStep(tokens, {0, 0, 2, 1, 3, 2, 4, 3}).message() ==
          "prefill row 1 of sample 0 has position 2 after 0: a sample's rows "
          "are consecutive positions, the rows after its last repeating it");
  REQUIRE(
      runtime
          ->setPrefillStep({1, 2, 3, 4, 3, 6, 5, 8}, {0, 0, 1, 1, 1, 2, 2, 3})
          .message() ==
      "prefill row 3 of sample 0 has position 2 after 1: a sample's rows "
      "are consecutive positions, the rows after its last repeating it");
  REQUIRE(runtime->setPrefillStep({1, 2}, {0, 0}).message() ==
          "a decode step needs 8 tokens, got 2");
  plan::Plan plain = compileDecodePlan("tiny.yaml");
  REQUIRE_FALSE(makeRuntime(plain)->setPrefillStep(tokens, positions).isOk());

  // Generation through the prefill (chunks of 1, 3 and 16 rows) draws what
  // the plan without one does: rows of 3 and 9 ids, greedy and sampled.
  std::vector<int32_t> shortPrompt(golden.tokens.begin(),
                                   golden.tokens.begin() + 3);
  std::vector<int32_t> longPrompt(golden.tokens.begin() + 16,
                                  golden.tokens.begin() + 25);
  auto plainRuntime = goldenRuntime(plain, golden);
  for (int64_t rows : {1, 3, 16}) {
    plan::Plan prefilled = compileDecodePlan("tiny.yaml", rows);
    auto prefilledRuntime = goldenRuntime(prefilled, golden);
    for (exec::SamplingOptions sampling :
         {kGreedy, exec::SamplingOptions{1.0, 0}}) {
      INFO(rows << " rows, temperature " << sampling.temperature);
      for (const auto &prompts :
           {std::vector<std::vector<int32_t>>{longPrompt},
            std::vector<std::vector<int32_t>>{shortPrompt, longPrompt}})
        REQUIRE(generateRows(*prefilledRuntime, prompts, 7, sampling) ==
                generateRows(*plainRuntime, prompts, 7, sampling));
    }
  }

  // A long prompt's progress (sharc-run prints it): after each pass that
  // only fills the caches, the positions filled of those before the first
  // draw, 8 of a 9-id prompt (2 where a 3-id prompt shares the batch):
  // passes of 3 rows, or a step each without a prefill.
  using Reports = std::vector<std::pair<int64_t, int64_t>>;
  auto progress = [&](exec::Runtime &runtime,
                      std::vector<std::vector<int32_t>> prompts) {
    exec::GenerationOptions options;
    options.prompts = std::move(prompts);
    options.maxNewTokens = 2;
    Reports reports;
    auto samples = exec::generateTokens(runtime, options, {},
                                        [&](int64_t filled, int64_t total) {
                                          reports.push_back({filled, total});
                                        });
    REQUIRE(samples.isOk());
    return reports;
  };
  auto threeRows = goldenRuntime(compileDecodePlan("tiny.yaml", 3), golden);
  CHECK(progress(*threeRows, {longPrompt}) == Reports{{3, 8}, {6, 8}, {8, 8}});
  CHECK(progress(*threeRows, {shortPrompt, longPrompt}) == Reports{{2, 2}});
  Reports steps;
  for (int64_t filled = 1; filled <= 8; ++filled)
    steps.push_back({filled, 8});
  CHECK(progress(*plainRuntime, {longPrompt}) == steps);
  CHECK(progress(*plainRuntime, {shortPrompt, longPrompt}) ==
        Reports{{1, 2}, {2, 2}});
}
