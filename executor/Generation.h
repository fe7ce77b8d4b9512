//===- Generation.h - text from a model, a token at a time ------*- C++ -*-===//
// defines: SamplingOptions, sampleToken, uniformDraw, GenerationOptions,
//          generateTokens
//
// Autoregressive generation. On a decode plan (`sharc compile --decode`)
// each token is one step of one position per sample against the layers'
// key/value caches: the prompt goes in a position a step, then every new
// token, up to the cache's seq_len positions. On a training plan compiled
// with --emit-logits each new token is one evaluation of the logits
// (Runtime::evalOutput, the forward pass alone: parameters and optimizer
// state untouched) over a window of the plan's seq_len tokens, read at the
// window's last filled position; the positions after it hold padding,
// which a causal model never reads, and once the window is full it slides,
// so the model sees the last seq_len tokens. That costs a forward pass of
// the whole window a token. Each row of the plan's batch is one sample,
// drawn with its own random stream, of one prompt every row continues or
// of its own: rows of different lengths are fed side by side, each
// drawing once its prompt is in (a decode step takes a position per
// sample; a window is read at each row's last filled position). Both kinds
// of plan draw the same ids from the same logits.
//
//   GenerationOptions options;
//   options.prompts = {{17, 402}};
//   auto samples = generateTokens(runtime, options,
//       [](int64_t index, const std::vector<int32_t> &ids) { ...; });
#pragma once

#include "executor/Runtime.h"
#include "planner/plan/Status.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace sharc::exec {

struct SamplingOptions {
  /// The softmax's temperature; 0 picks the highest logit (greedy).
  double temperature = 0.8;
  /// Draw among the topK highest logits only; 0: the whole vocabulary.
  int64_t topK = 40;
  /// Nucleus sampling: of those, the fewest highest whose probability
  /// (softmax over the topK) reaches topP; 1: all of them.
  double topP = 1.0;
};

/// One id of [0, vocab) drawn from `logits` with `uniform` in [0, 1): at
/// temperature 0 the highest logit; otherwise from softmax(logits /
/// temperature) over the topK highest, cut to the nucleus of mass topP and
/// renormalised. Ties rank the lower id first, so the draw is a function of
/// its arguments. The logits must be finite.
int32_t sampleToken(const float *logits, int64_t vocab,
                    const SamplingOptions &options, double uniform);

/// A uniform number in [0, 1) that depends only on (seed, stream, index):
/// the same samples on every machine and backend.
double uniformDraw(uint64_t seed, uint64_t stream, uint64_t index);

struct GenerationOptions {
  /// One prompt every row continues, or one for each row of the plan's
  /// batch; each at least one id, every id below the vocabulary.
  std::vector<std::vector<int32_t>> prompts;
  int64_t maxNewTokens = 32;
  /// A row that draws one of these ends with it (an end-of-text id); the
  /// generation ends when every row has ended or drawn maxNewTokens.
  std::vector<int32_t> stopIds;
  SamplingOptions sampling;
  uint64_t seed = 42;
};

/// Invalid input, naming the fix, for a plan without a logits output, a
/// count of prompts that is neither one nor the plan's batch, a prompt
/// that is empty or outside the plan's vocabulary, or a stop id outside it.
Status checkGenerationInput(const plan::Plan &plan,
                            const std::vector<std::vector<int32_t>> &prompts,
                            const std::vector<int32_t> &stopIds = {});

/// Called with each new token's index (from 0) and every row's id, once
/// every row has drawn it (a row with a shorter prompt draws ahead; a row
/// that has ended repeats its stop id); an error stops the generation with
/// it.
using TokenCallback =
    std::function<Status(int64_t index, const std::vector<int32_t> &ids)>;

/// On a decode plan, called after each pass that only fills the caches
/// with prompt ids (a prefill pass, or a step before any row draws) with
/// the positions filled so far and the positions to fill before the first
/// draw (the shortest prompt's length less one): a long prompt's progress.
using PromptCallback = std::function<void(int64_t filled, int64_t total)>;

/// Each row's new ids (the prompt excluded; a stop id drawn is the last).
/// Invalid input as checkGenerationInput says; a runtime error when the
/// logits hold a NaN or an infinity.
Result<std::vector<std::vector<int32_t>>>
generateTokens(Runtime &runtime, const GenerationOptions &options,
               const TokenCallback &onToken = {},
               const PromptCallback &onPrompt = {});

} // namespace sharc::exec
