//===- PipelineStagesTest.cpp - pipeline schedules and layer splits -------===//
//
// The schedules against seed-system.md 4.4 written out by hand, and the
// balanced split against every contiguous split tried.

#include "passes/PipelineStages.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>

using namespace sharc;

namespace {

/// "F0 F1 B0 ..." for a list of slots; with chunks "F0.1" (microbatch 0,
/// chunk 1).
std::string text(const std::vector<PipelineSlot> &slots, bool chunks = false) {
  std::string result;
  for (const PipelineSlot &slot : slots)
    result += (result.empty() ? "" : " ") +
              std::string(slot.backward ? "B" : "F") +
              std::to_string(slot.microbatch) +
              (chunks ? "." + std::to_string(slot.chunk) : "");
  return result;
}

} // namespace

TEST_CASE("GPipe runs every forward, then the backwards in order",
          "[passes][pipeline]") {
  for (int64_t stage : {0, 1, 2})
    REQUIRE(text(pipelineSlots("gpipe", 3, stage, 3)) == "F0 F1 F2 B0 B1 B2");
}

TEST_CASE("1F1B warms up with P - r - 1 forwards, then alternates",
          "[passes][pipeline]") {
  // P = 4, M = 6: warmup 3, 2, 1, 0.
  REQUIRE(text(pipelineSlots("1f1b", 4, 0, 6)) ==
          "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  REQUIRE(text(pipelineSlots("1f1b", 4, 1, 6)) ==
          "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  REQUIRE(text(pipelineSlots("1f1b", 4, 2, 6)) ==
          "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  REQUIRE(text(pipelineSlots("1f1b", 4, 3, 6)) ==
          "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer microbatches than the warmup: all forwards, then all backwards.
  REQUIRE(text(pipelineSlots("1f1b", 4, 0, 2)) == "F0 F1 B0 B1");
  REQUIRE(pipelineSlots("interleaved", 4, 0, 2).empty());
}

TEST_CASE("1F1B keeps at most P - r microbatches in flight",
          "[passes][pipeline]") {
  for (int64_t stages : {2, 3, 4})
    for (int64_t m : {1, 2, 5, 8})
      for (int64_t r = 0; r < stages; ++r) {
        int64_t live = 0, peak = 0;
        for (const PipelineSlot &slot : pipelineSlots("1f1b", stages, r, m)) {
          live += slot.backward ? -1 : 1;
          peak = std::max(peak, live);
        }
        REQUIRE(live == 0);
        REQUIRE(peak == std::min(stages - r, m));
      }
}

TEST_CASE("the layer split is the original's", "[passes][pipeline]") {
  REQUIRE(splitLayers(5, 2) == std::vector<int64_t>{0, 2, 5});
  REQUIRE(splitLayers(4, 4) == std::vector<int64_t>{0, 1, 2, 3, 4});
  REQUIRE(splitLayers(7, 3) == std::vector<int64_t>{0, 2, 4, 7});
  // Equal layers and free ends: the balanced split is the same.
  REQUIRE(balanceLayers(std::vector<double>(5, 1.0), 0, 0, 2) ==
          std::vector<int64_t>{0, 2, 5});
}

TEST_CASE("the balanced split counts the embedding and the LM head",
          "[passes][pipeline]") {
  // 6 layers of 1 and an LM head of 2: the last stage takes fewer layers.
  REQUIRE(balanceLayers(std::vector<double>(6, 1.0), 0, 2, 2) ==
          std::vector<int64_t>{0, 4, 6});
  // The costliest stage is the least of every contiguous split's.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    int64_t layers = 3 + rng() % 6, stages = 2 + rng() % 2;
    std::vector<double> cost(layers);
    for (double &c : cost)
      c = 1 + rng() % 9;
    double first = rng() % 5, last = rng() % 5;
    auto worst = [&](const std::vector<int64_t> &bounds) {
      double result = 0;
      for (int64_t s = 0; s < stages; ++s) {
        double sum = (s == 0 ? first : 0) + (s == stages - 1 ? last : 0);
        for (int64_t l = bounds[s]; l < bounds[s + 1]; ++l)
          sum += cost[l];
        result = std::max(result, sum);
      }
      return result;
    };
    std::vector<int64_t> bounds = balanceLayers(cost, first, last, stages);
    REQUIRE(bounds.front() == 0);
    REQUIRE(bounds.back() == layers);
    for (int64_t s = 0; s < stages; ++s)
      REQUIRE(bounds[s] < bounds[s + 1]);
    // Every split by brute force (2 or 3 stages).
    double best = 1e300;
    for (int64_t a = 1; a < layers; ++a) {
      if (stages == 2) {
        best = std::min(best, worst({0, a, layers}));
        continue;
      }
      for (int64_t b = a + 1; b < layers; ++b)
        best = std::min(best, worst({0, a, b, layers}));
    }
    REQUIRE(worst(bounds) == best);
  }
}

TEST_CASE("interleaved 1F1B cycles P microbatches through each chunk",
          "[passes][pipeline]") {
  // P = 2, v = 2, M = 4: warmup (P - r - 1) 2 + (v - 1) P = 4 and 2.
  REQUIRE(text(pipelineSlots("interleaved", 2, 0, 4, 2), true) ==
          "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 "
          "B2.1 B3.1 B2.0 B3.0");
  REQUIRE(text(pipelineSlots("interleaved", 2, 1, 4, 2), true) ==
          "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 "
          "F3.1 B3.1 B2.0 B3.0");
  // M must be a multiple of P, and interleaving needs two chunks.
  REQUIRE(pipelineSlots("interleaved", 2, 0, 3, 2).empty());
  REQUIRE(pipelineSlots("interleaved", 2, 0, 4, 1).empty());
  // Every step once, each backward after its forward.
  for (int64_t stages : {2, 4})
    for (int64_t chunks : {2, 3})
      for (int64_t r = 0; r < stages; ++r) {
        std::vector<PipelineSlot> slots =
            pipelineSlots("interleaved", stages, r, 2 * stages, chunks);
        REQUIRE(slots.size() == static_cast<size_t>(4 * stages * chunks));
        for (size_t i = 0; i < slots.size(); ++i) {
          if (!slots[i].backward)
            continue;
          PipelineSlot forward{false, slots[i].microbatch, slots[i].chunk};
          auto at = std::find(slots.begin(), slots.end(), forward);
          REQUIRE(at != slots.end());
          REQUIRE(at - slots.begin() < static_cast<std::ptrdiff_t>(i));
          REQUIRE(std::count(slots.begin(), slots.end(), slots[i]) == 1);
        }
      }
}
