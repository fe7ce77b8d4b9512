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
  if (options.topP < 1.0) {
    // The nucleus: the ids up to the first whose running mass reaches topP.
    double kept = 0.0;
    int64_t nucleus = 0;
    while (nucleus < count && kept < options.topP * total)
      kept += weights[nucleus++];
    count = std::max<int64_t>(nucleus, 1);
    total = kept > 0.0 ? kept : weights[0];
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
                            const std::vector<std::vector<int32_t>> &prompts,
                            const std::vector<int32_t> &stopIds) {
  if (!plan.findOutput("logits"))
    return Status::invalidInput(
        "the plan has no 'logits' output to generate from: compile it with "
        "`sharc compile --emit-logits`");
  auto count = static_cast<int64_t>(prompts.size());
  if (count != 1 && count != plan.batchSize)
    return Status::invalidInput(
        std::to_string(count) + " prompts for a plan of batch " +
        std::to_string(plan.batchSize) +
        ": give one that every row continues, or one per row (compile "
        "with micro_batch_size " +
        std::to_string(count) + ")");
  for (const std::vector<int32_t> &prompt : prompts) {
    if (prompt.empty())
      return Status::invalidInput(
          "generation needs a prompt of at least one id");
    for (int32_t id : prompt)
      if (id < 0 || id >= plan.vocabSize)
        return Status::invalidInput("prompt id " + std::to_string(id) +
                                    " is outside the model's vocabulary [0, " +
                                    std::to_string(plan.vocabSize) + ")");
  }
  for (int32_t id : stopIds)
    if (id < 0 || id >= plan.vocabSize)
      return Status::invalidInput("stop id " + std::to_string(id) +
                                  " is outside the model's vocabulary [0, " +
                                  std::to_string(plan.vocabSize) + ")");
  return Status::ok();
}

namespace {

/// Sample `b`'s new id `index`, drawn from row `row` of the [R, B, V']
/// logits (V' >= vocab where tp padded the vocabulary: its padded columns
/// are never drawn), which the model computed at `position`.
Result<int32_t> drawToken(const plan::NamedTensor &logits, int64_t row,
                          int64_t b, int64_t vocab, int64_t position,
                          const GenerationOptions &options, int64_t index) {
  const std::vector<int64_t> &shape = logits.shape;
  if (shape.size() != 3 || row >= shape[0] || b >= shape[1] ||
      shape[2] < vocab || logits.dtype != DType::F32)
    return Status::invalidInput(
        "the plan's 'logits' output is not [seq_len, batch, vocab]");
  const float *values = reinterpret_cast<const float *>(logits.bytes.data()) +
                        (row * shape[1] + b) * shape[2];
  if (!std::all_of(values, values + vocab,
                   [](float x) { return std::isfinite(x); }))
    return Status::runtimeError("generation: the logits of sample " +
                                std::to_string(b) + " at position " +
                                std::to_string(position) +
                                " hold a NaN or an infinity");
  double uniform = uniformDraw(options.seed, static_cast<uint64_t>(b),
                               static_cast<uint64_t>(index));
  return sampleToken(values, vocab, options.sampling, uniform);
}

/// Every row's prompt: the one given for each, or the one all continue.
std::vector<std::vector<int32_t>> rowPrompts(const GenerationOptions &options,
                                             int64_t batch) {
  if (options.prompts.size() == 1)
    return std::vector<std::vector<int32_t>>(static_cast<size_t>(batch),
                                             options.prompts.front());
  return options.prompts;
}

/// Each row's new ids as they are drawn, which rows still draw, and
/// onToken for each index every row has drawn (or ended before), in order.
class DrawnTokens {
public:
  DrawnTokens(int64_t batch, const GenerationOptions &options,
              const TokenCallback &onToken)
      : rows_(static_cast<size_t>(batch)),
        ended_(static_cast<size_t>(batch), false), options_(options),
        onToken_(onToken) {}

  const std::vector<int32_t> &row(int64_t b) const { return rows_[b]; }
  /// Whether row b draws another id.
  bool wants(int64_t b) const {
    return !ended_[b] &&
           static_cast<int64_t>(rows_[b].size()) < options_.maxNewTokens;
  }
  bool allDone() const {
    for (size_t b = 0; b < rows_.size(); ++b)
      if (wants(static_cast<int64_t>(b)))
        return false;
    return true;
  }
  void add(int64_t b, int32_t id) {
    rows_[b].push_back(id);
    const std::vector<int32_t> &stops = options_.stopIds;
    ended_[b] = std::find(stops.begin(), stops.end(), id) != stops.end();
  }
  /// Hands onToken every index that each row has drawn or ended before.
  Status emitReady() {
    for (;;) {
      bool any = false;
      for (size_t b = 0; b < rows_.size(); ++b) {
        if (static_cast<int64_t>(rows_[b].size()) > next_)
          any = true;
        else if (wants(static_cast<int64_t>(b)))
          return Status::ok();
      }
      if (!any)
        return Status::ok();
      std::vector<int32_t> ids;
      for (const std::vector<int32_t> &row : rows_)
        ids.push_back(static_cast<int64_t>(row.size()) > next_ ? row[next_]
                                                               : row.back());
      if (onToken_)
        SHARC_TRY(onToken_(next_, ids));
      ++next_;
    }
  }
  std::vector<std::vector<int32_t>> take() { return std::move(rows_); }

private:
  std::vector<std::vector<int32_t>> rows_;
  std::vector<bool> ended_;
  const GenerationOptions &options_;
  const TokenCallback &onToken_;
  int64_t next_ = 0;
};

/// A decode plan: every row goes through the cache one position a step,
/// first its prompt (where the plan has a prefill, the positions before
/// the shortest prompt's last id go in T a pass first), then each of its
/// new tokens; a row draws from the step that feeds its prompt's last id
/// on (a shorter prompt draws ahead and, once done or ended, feeds its last
/// id again until every row is). Every step is the step's program alone.
Result<std::vector<std::vector<int32_t>>>
decodeTokens(Runtime &runtime, const GenerationOptions &options,
             const TokenCallback &onToken, const PromptCallback &onPrompt) {
  const plan::Plan &plan = runtime.plan();
  int64_t batch = plan.batchSize, vocab = plan.vocabSize;
  std::vector<std::vector<int32_t>> prompts = rowPrompts(options, batch);
  int64_t longest = 0;
  for (const std::vector<int32_t> &prompt : prompts)
    longest = std::max(longest, static_cast<int64_t>(prompt.size()));
  // The last new token is drawn, never fed.
  int64_t newTokens = std::max<int64_t>(options.maxNewTokens, 1);
  int64_t needed = longest + newTokens - 1;
  if (needed > plan.seqLen)
    return Status::invalidInput(
        "the decode plan's key/value cache holds seq_len " +
        std::to_string(plan.seqLen) + " positions; a prompt of " +
        std::to_string(longest) + " and " +
        std::to_string(options.maxNewTokens) + " new tokens need " +
        std::to_string(needed) + ": compile it with a larger seq_len");
  DrawnTokens drawn(batch, options, onToken);
  // The positions before the shortest prompt's last id: no row draws
  // before they are filled.
  int64_t promptPositions = longest;
  for (const std::vector<int32_t> &prompt : prompts)
    promptPositions =
        std::min(promptPositions, static_cast<int64_t>(prompt.size()) - 1);
  auto reportPrompt = [&](int64_t filled) {
    if (onPrompt && promptPositions > 0)
      onPrompt(std::min(filled, promptPositions), promptPositions);
  };
  int64_t position = 0;
  if (const plan::IoEntry *prefill = plan.findInput("prefill_positions")) {
    // The positions every row's prompt fills before its last id, T a pass;
    // a last chunk's rows past them repeat its last (token, position).
    int64_t rows = prefill->globalShape.front();
    std::vector<int32_t> chunkTokens(static_cast<size_t>(rows * batch));
    std::vector<int32_t> chunkPositions(chunkTokens.size());
    for (; position < promptPositions; position += rows) {
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t b = 0; b < batch; ++b) {
          int64_t at = std::min(position + t, promptPositions - 1);
          chunkTokens[t * batch + b] = prompts[b][at];
          chunkPositions[t * batch + b] = static_cast<int32_t>(at);
        }
      SHARC_TRY(runtime.setPrefillStep(chunkTokens, chunkPositions)
                    .withContext("generation"));
      SHARC_TRY(runtime.evalPass("prefill").withContext("generation"));
      reportPrompt(position + rows);
    }
    position = promptPositions;
  }
  std::vector<int32_t> fed(static_cast<size_t>(batch));
  for (; position < needed && !drawn.allDone(); ++position) {
    bool draws = false;
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<int32_t> &prompt = prompts[b];
      auto length = static_cast<int64_t>(prompt.size());
      fed[b] = position < length ? prompt[position] : drawn.row(b).back();
      draws |= position + 1 >= length && drawn.wants(b);
    }
    SHARC_TRY(runtime
                  .setDecodeStep(
                      fed, std::vector<int32_t>(static_cast<size_t>(batch),
                                                static_cast<int32_t>(position)))
                  .withContext("generation"));
    if (!draws) {
      // Only filling the caches: the logits are not read.
      SHARC_TRY(runtime.evalPass("logits").withContext("generation"));
      // Steps after the first draw (a longer prompt's, once shorter rows
      // ended) are past the progress report.
      if (position < promptPositions)
        reportPrompt(position + 1);
      continue;
    }
    auto logits = runtime.evalOutput("logits", 0, 1);
    if (!logits)
      return logits.status().withContext("generation");
    for (int64_t b = 0; b < batch; ++b) {
      if (position + 1 < static_cast<int64_t>(prompts[b].size()) ||
          !drawn.wants(b))
        continue;
      auto index = static_cast<int64_t>(drawn.row(b).size());
      auto id = drawToken(*logits, 0, b, vocab, position, options, index);
      if (!id)
        return id.status();
      drawn.add(b, *id);
    }
    SHARC_TRY(drawn.emitReady());
  }
  return drawn.take();
}

} // namespace

Result<std::vector<std::vector<int32_t>>>
generateTokens(Runtime &runtime, const GenerationOptions &options,
               const TokenCallback &onToken, const PromptCallback &onPrompt) {
  const plan::Plan &plan = runtime.plan();
  SHARC_TRY(checkGenerationInput(plan, options.prompts, options.stopIds));
  if (plan.findInput("positions"))
    return decodeTokens(runtime, options, onToken, onPrompt);
  int64_t seqLen = plan.seqLen, batch = plan.batchSize, vocab = plan.vocabSize;
  std::vector<std::vector<int32_t>> rows = rowPrompts(options, batch);
  DrawnTokens drawn(batch, options, onToken);
  std::vector<int32_t> window(static_cast<size_t>(batch * seqLen));
  std::vector<int64_t> last(static_cast<size_t>(batch));
  for (int64_t index = 0; !drawn.allDone(); ++index) {
    // Batch-first [B, S], each row's last seq_len ids from position 0;
    // id 0 after a row's last filled position.
    std::fill(window.begin(), window.end(), 0);
    for (int64_t b = 0; b < batch; ++b) {
      auto filled = static_cast<int64_t>(rows[b].size());
      int64_t length = std::min(filled, seqLen);
      std::copy(rows[b].end() - length, rows[b].end(),
                window.begin() + b * seqLen);
      last[b] = length - 1;
    }
    SHARC_TRY(runtime.setBatch(window));
    // Only the rows of the filled positions read: a whole [S, B, V]
    // download a token would cost more than the forward pass.
    int64_t first = *std::min_element(last.begin(), last.end());
    int64_t end = *std::max_element(last.begin(), last.end()) + 1;
    auto logits = runtime.evalOutput("logits", first, end - first);
    if (!logits)
      return logits.status().withContext("generation");
    for (int64_t b = 0; b < batch; ++b) {
      if (!drawn.wants(b))
        continue; // ended: its window stands still
      auto id = drawToken(*logits, last[b] - first, b, vocab, last[b], options,
                          index);
      if (!id)
        return id.status();
      rows[b].push_back(*id);
      drawn.add(b, *id);
    }
    SHARC_TRY(drawn.emitReady());
  }
  return drawn.take();
}

} // namespace sharc::exec
