//===- PipelineStages.cpp - pipeline schedules and layer splits -----------===//

#include "passes/PipelineStages.h"

#include <algorithm>
#include <limits>

using namespace sharc;

namespace {

std::vector<PipelineSlot> interleavedSlots(int64_t numStages, int64_t stage,
                                           int64_t numMicrobatches,
                                           int64_t numChunks) {
  int64_t p = numStages, v = numChunks;
  int64_t total = numMicrobatches * v;
  // The k-th forward (backward) step: P microbatches on one chunk, then the
  // next chunk (backwards from the last chunk), v P steps a round.
  auto step = [&](int64_t k, bool backward) {
    int64_t chunk = k % (p * v) / p;
    return PipelineSlot{backward, k / (p * v) * p + k % p,
                        backward ? v - 1 - chunk : chunk};
  };
  int64_t warmup = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  std::vector<PipelineSlot> slots;
  for (int64_t k = 0; k < warmup; ++k)
    slots.push_back(step(k, false));
  for (int64_t i = 0; i < total - warmup; ++i) {
    slots.push_back(step(warmup + i, false));
    slots.push_back(step(i, true));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    slots.push_back(step(k, true));
  return slots;
}

} // namespace

std::vector<PipelineSlot> sharc::pipelineSlots(llvm::StringRef schedule,
                                               int64_t numStages, int64_t stage,
                                               int64_t numMicrobatches,
                                               int64_t numChunks) {
  std::vector<PipelineSlot> slots;
  int64_t m = numMicrobatches;
  if (schedule == "interleaved") {
    if (numChunks < 2 || m % numStages != 0)
      return slots;
    return interleavedSlots(numStages, stage, m, numChunks);
  }
  if (schedule == "gpipe") {
    // Every forward, then the backwards first in, first out.
    for (int64_t i = 0; i < m; ++i)
      slots.push_back({false, i});
    for (int64_t i = 0; i < m; ++i)
      slots.push_back({true, i});
    return slots;
  }
  if (schedule != "1f1b")
    return slots;
  int64_t warmup = std::min(numStages - stage - 1, m);
  for (int64_t i = 0; i < warmup; ++i)
    slots.push_back({false, i});
  for (int64_t i = 0; i < m - warmup; ++i) {
    slots.push_back({false, warmup + i});
    slots.push_back({true, i});
  }
  for (int64_t i = m - warmup; i < m; ++i)
    slots.push_back({true, i});
  return slots;
}

std::vector<int64_t> sharc::splitLayers(int64_t numLayers, int64_t numStages) {
  std::vector<int64_t> bounds;
  for (int64_t r = 0; r <= numStages; ++r)
    bounds.push_back(numLayers * r / numStages);
  return bounds;
}

std::vector<int64_t> sharc::balanceLayers(const std::vector<double> &layerCost,
                                          double firstCost, double lastCost,
                                          int64_t numStages) {
  auto numLayers = static_cast<int64_t>(layerCost.size());
  std::vector<double> prefix(numLayers + 1, 0.0);
  for (int64_t l = 0; l < numLayers; ++l)
    prefix[l + 1] = prefix[l] + layerCost[l];
  auto stageCost = [&](int64_t stage, int64_t begin, int64_t end) {
    double cost = prefix[end] - prefix[begin];
    if (stage == 0)
      cost += firstCost;
    if (stage == numStages - 1)
      cost += lastCost;
    return cost;
  };
  // best[s][l]: the least possible costliest stage when stages 0..s-1
  // hold layers [0, l); from[s][l]: where stage s-1 begins.
  double infinity = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(
      numStages + 1, std::vector<double>(numLayers + 1, infinity));
  std::vector<std::vector<int64_t>> from(
      numStages + 1, std::vector<int64_t>(numLayers + 1, 0));
  best[0][0] = 0.0;
  for (int64_t s = 1; s <= numStages; ++s)
    for (int64_t l = s; l <= numLayers - (numStages - s); ++l)
      // The earliest start on a tie: earlier stages no larger, as in
      // splitLayers (L = 5, P = 2: 2 and 3).
      for (int64_t begin = s - 1; begin < l; ++begin) {
        double cost = std::max(best[s - 1][begin], stageCost(s - 1, begin, l));
        if (cost < best[s][l]) {
          best[s][l] = cost;
          from[s][l] = begin;
        }
      }
  std::vector<int64_t> bounds(numStages + 1, numLayers);
  for (int64_t s = numStages; s > 0; --s)
    bounds[s - 1] = from[s][bounds[s]];
  return bounds;
}
