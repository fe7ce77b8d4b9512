//===- Generation.cpp - text from a trained model, a token at a time ------===//

#include "executor/Generation.h"

#include "planner/plan/DType.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace sharc::exec {
namespace {

/// SplitMix64's finaliser: a bijection that scatters nearby inputs.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

} // namespace

double uniformDraw(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t bits = mix(mix(mix(seed) ^ stream) ^ index);
  // The top 53 bits: every double of [0, 1) on a grid of 2^-53.
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

int32_t sampleToken(const float *logits, int64_t vocab,
                    const SamplingOptions &options, double uniform) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  auto ranksBefore = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (options.temperature <= 0.0)
    return *std::min_element(ids.begin(), ids.end(), ranksBefore);
  int64_t count = options.topK > 0 ? std::min(options.topK, vocab) : vocab;
  std::partial_sort(ids.begin(), ids.begin() + count, ids.end(), ranksBefore);
  // Weights relative to the highest logit, so that none overflows.
  std::vector<double> weights(static_cast<size_t>(count));
  double top = logits[ids[0]], total = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    weights[i] = std::exp((logits[ids[i]] - top) / options.temperature);
    total += weights[i];
  }
  double target = uniform * total, sum = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    sum += weights[i];
    if (target < sum)
      return ids[i];
  }
  // Rounding left the target at the total: the last id with any weight.
  for (int64_t i = count - 1; i > 0; --i)
    if (weights[i] > 0.0)
      return ids[i];
  return ids[0];
}

Status checkGenerationInput(const plan::Plan &plan,
                            const std::vector<int32_t> &prompt) {
  if (!plan.findOutput("logits"))
    return Status::invalidInput(
        "the plan has no 'logits' output to generate from: compile it with "
        "`sharc compile --emit-logits`");
  if (prompt.empty())
    return Status::invalidInput("generation needs a prompt of at least one id");
  for (int32_t id : prompt)
    if (id < 0 || id >= plan.vocabSize)
      return Status::invalidInput("prompt id " + std::to_string(id) +
                                  " is outside the model's vocabulary [0, " +
                                  std::to_string(plan.vocabSize) + ")");
  return Status::ok();
}

namespace {

/// Draws every sample's next id from the [1, B, V'] logits of one position
/// (V' >= vocab where tp padded the vocabulary: its padded columns are
/// never drawn) into `ids`.
Status drawTokens(const plan::NamedTensor &logits, int64_t batch, int64_t vocab,
                  int64_t position, const GenerationOptions &options,
                  int64_t index, std::vector<int32_t> &ids) {
  const std::vector<int64_t> &shape = logits.shape;
  if (shape.size() != 3 || shape[1] != batch || shape[2] < vocab ||
      logits.dtype != DType::F32)
    return Status::invalidInput(
        "the plan's 'logits' output is not [seq_len, batch, vocab]");
  const auto *values = reinterpret_cast<const float *>(logits.bytes.data());
  for (int64_t b = 0; b < batch; ++b) {
    const float *row = values + b * shape[2];
    if (!std::all_of(row, row + vocab,
                     [](float x) { return std::isfinite(x); }))
      return Status::runtimeError("generation: the logits of sample " +
                                  std::to_string(b) + " at position " +
                                  std::to_string(position) +
                                  " hold a NaN or an infinity");
    double uniform = uniformDraw(options.seed, static_cast<uint64_t>(b),
                                 static_cast<uint64_t>(index));
    ids[b] = sampleToken(row, vocab, options.sampling, uniform);
  }
  return Status::ok();
}

/// A decode plan: the prompt goes through the cache one position a step,
/// then each new token; every step is the whole (one-position) program.
Result<std::vector<std::vector<int32_t>>>
decodeTokens(Runtime &runtime, const GenerationOptions &options,
             const TokenCallback &onToken) {
  const plan::Plan &plan = runtime.plan();
  int64_t batch = plan.batchSize, vocab = plan.vocabSize;
  auto promptLength = static_cast<int64_t>(options.prompt.size());
  // The last new token is drawn, never fed.
  int64_t needed =
      promptLength + std::max<int64_t>(options.maxNewTokens, 1) - 1;
  if (needed > plan.seqLen)
    return Status::invalidInput(
        "the decode plan's key/value cache holds seq_len " +
        std::to_string(plan.seqLen) + " positions; a prompt of " +
        std::to_string(promptLength) + " and " +
        std::to_string(options.maxNewTokens) + " new tokens need " +
        std::to_string(needed) + ": compile it with a larger seq_len");
  std::vector<std::vector<int32_t>> generated(static_cast<size_t>(batch));
  std::vector<int32_t> ids(static_cast<size_t>(batch));
  std::vector<int32_t> fed(static_cast<size_t>(batch));
  int64_t position = 0;
  auto feed =
      [&](const std::vector<int32_t> &tokens) -> Result<plan::NamedTensor> {
    SHARC_TRY(runtime.setDecodeStep(
        tokens, std::vector<int32_t>(static_cast<size_t>(batch),
                                     static_cast<int32_t>(position))));
    return runtime.evalOutput("logits", 0, 1);
  };
  for (int64_t i = 0; i + 1 < promptLength; ++i, ++position) {
    std::fill(fed.begin(), fed.end(), options.prompt[i]);
    if (auto logits = feed(fed); !logits)
      return logits.status().withContext("generation");
  }
  std::fill(fed.begin(), fed.end(), options.prompt.back());
  for (int64_t index = 0; index < options.maxNewTokens; ++index, ++position) {
    auto logits = feed(fed);
    if (!logits)
      return logits.status().withContext("generation");
    SHARC_TRY(drawTokens(*logits, batch, vocab, position, options, index, ids));
    for (int64_t b = 0; b < batch; ++b)
      generated[b].push_back(ids[b]);
    fed = ids;
    if (onToken)
      SHARC_TRY(onToken(index, ids));
  }
  return generated;
}

} // namespace

Result<std::vector<std::vector<int32_t>>>
generateTokens(Runtime &runtime, const GenerationOptions &options,
               const TokenCallback &onToken) {
  const plan::Plan &plan = runtime.plan();
  SHARC_TRY(checkGenerationInput(plan, options.prompt));
  if (plan.findInput("positions"))
    return decodeTokens(runtime, options, onToken);
  int64_t seqLen = plan.seqLen, batch = plan.batchSize, vocab = plan.vocabSize;
  std::vector<std::vector<int32_t>> rows(static_cast<size_t>(batch),
                                         options.prompt);
  std::vector<std::vector<int32_t>> generated(static_cast<size_t>(batch));
  std::vector<int32_t> window(static_cast<size_t>(batch * seqLen));
  std::vector<int32_t> ids(static_cast<size_t>(batch));
  for (int64_t index = 0; index < options.maxNewTokens; ++index) {
    int64_t length = std::min<int64_t>(rows[0].size(), seqLen);
    int64_t start = static_cast<int64_t>(rows[0].size()) - length;
    // Batch-first [B, S]; id 0 after the last filled position.
    std::fill(window.begin(), window.end(), 0);
    for (int64_t b = 0; b < batch; ++b)
      std::copy(rows[b].begin() + start, rows[b].end(),
                window.begin() + b * seqLen);
    SHARC_TRY(runtime.setBatch(window));
    // Only the last filled position: a whole [S, B, V] download a token
    // would cost more than the forward pass.
    auto logits = runtime.evalOutput("logits", length - 1, 1);
    if (!logits)
      return logits.status().withContext("generation");
    SHARC_TRY(
        drawTokens(*logits, batch, vocab, length - 1, options, index, ids));
    for (int64_t b = 0; b < batch; ++b) {
      rows[b].push_back(ids[b]);
      generated[b].push_back(ids[b]);
    }
    if (onToken)
      SHARC_TRY(onToken(index, ids));
  }
  return generated;
}

} // namespace sharc::exec
