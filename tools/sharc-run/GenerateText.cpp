//===- GenerateText.cpp - sharc-run --generate ---------------------------===//

#include "tools/sharc-run/GenerateText.h"

#include "executor/Generation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace sharc {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

void printHeader(const RunFlags &options, int64_t batch) {
  size_t shortest = options.prompts.front().size(), longest = shortest;
  for (const std::vector<int32_t> &prompt : options.prompts) {
    shortest = std::min(shortest, prompt.size());
    longest = std::max(longest, prompt.size());
  }
  std::printf("generating %lld tokens after %s of %zu",
              static_cast<long long>(options.maxNewTokens),
              options.prompts.size() == 1 ? "a prompt" : "prompts", shortest);
  if (longest > shortest)
    std::printf(" to %zu", longest);
  std::printf(", %lld sample%s, ", static_cast<long long>(batch),
              batch == 1 ? "" : "s");
  if (options.temperature > 0)
    std::printf("temperature %g, top-k %lld, top-p %g\n", options.temperature,
                static_cast<long long>(options.topK), options.topP);
  else
    std::printf("greedy\n");
  std::fflush(stdout);
}

/// A long prompt's progress through the caches on stderr (stdout keeps
/// the ids): nothing for a prompt filled within a second, then a line a
/// second with the time left at the rate since the last line (the later
/// passes attend over more of the cache and take longer, so the average
/// so far would promise too little), and one when it is done.
class PromptProgress {
public:
  explicit PromptProgress(std::chrono::steady_clock::time_point start)
      : start_(start) {}

  void operator()(int64_t filled, int64_t total) {
    double seconds = secondsSince(start_);
    if (filled >= total) {
      if (lastFilled_ > 0) // a line was printed
        std::fprintf(stderr, "prompt: %lld positions in %.1f s\n",
                     static_cast<long long>(total), seconds);
      return;
    }
    if (seconds < lastSeconds_ + 1.0 || filled <= lastFilled_)
      return;
    double left = (seconds - lastSeconds_) *
                  static_cast<double>(total - filled) /
                  static_cast<double>(filled - lastFilled_);
    lastSeconds_ = seconds;
    lastFilled_ = filled;
    std::fprintf(stderr,
                 "prompt: %lld of %lld positions in %.1f s, about %.0f s "
                 "left\n",
                 static_cast<long long>(filled), static_cast<long long>(total),
                 seconds, left);
  }

private:
  std::chrono::steady_clock::time_point start_;
  double lastSeconds_ = 0; ///< at the last line (0 before any)
  int64_t lastFilled_ = 0; ///< at the last line (0 before any)
};

} // namespace

Status printGeneration(exec::Runtime &runtime, const RunFlags &options) {
  exec::GenerationOptions generation;
  generation.prompts = options.prompts;
  generation.maxNewTokens = options.maxNewTokens;
  generation.sampling = {options.temperature, options.topK, options.topP};
  generation.seed = options.seed;
  generation.stopIds = options.stopIds;
  if (!options.quiet)
    printHeader(options, runtime.plan().batchSize);
  // The same generation again draws the same ids (the draws follow the
  // seed, the caches are overwritten from position 0).
  for (int64_t run = 0; run < options.warmup; ++run)
    if (auto warm = exec::generateTokens(runtime, generation); !warm)
      return warm.status().withContext("warm-up generation");
  auto start = std::chrono::steady_clock::now();
  double firstSeconds = 0;
  auto samples = exec::generateTokens(
      runtime, generation,
      [&](int64_t index, const std::vector<int32_t> &ids) {
        if (index == 0)
          firstSeconds = secondsSince(start);
        std::printf("token %lld:", static_cast<long long>(index));
        for (int32_t id : ids)
          std::printf(" %d", id);
        std::printf("\n");
        std::fflush(stdout);
        return Status::ok();
      },
      options.quiet ? exec::PromptCallback{} : PromptProgress(start));
  if (!samples)
    return samples.status();
  double seconds = secondsSince(start);
  // Fewer than asked where every row ended at a stop id.
  int64_t tokens = 0;
  for (const std::vector<int32_t> &row : *samples)
    tokens = std::max(tokens, static_cast<int64_t>(row.size()));
  if (!options.quiet)
    std::printf("generated %lld tokens in %.2f s: %.2f ms a token after the "
                "first (%.1f ms)\n",
                static_cast<long long>(tokens), seconds,
                tokens > 1 ? (seconds - firstSeconds) * 1e3 /
                                 static_cast<double>(tokens - 1)
                           : 0.0,
                firstSeconds * 1e3);
  for (size_t b = 0; b < samples->size(); ++b) {
    std::printf("sample %zu:", b);
    for (int32_t id : (*samples)[b])
      std::printf(" %d", id);
    std::printf("\n");
  }
  return Status::ok();
}

} // namespace sharc
