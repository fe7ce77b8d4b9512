//===- SamplerTest.cpp - drawing a token from logits ----------------------===//
//
// sampleToken against the distribution it must draw from: the argmax at
// temperature 0, softmax(logits / T) restricted to the top k and the
// nucleus of mass p otherwise, measured over many draws of uniformDraw's
// stream.

#include "executor/Generation.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <vector>

using namespace sharc::exec;

namespace {

/// How often each id comes out of `draws` draws.
std::vector<double> frequencies(const std::vector<float> &logits,
                                const SamplingOptions &options, int draws) {
  std::vector<double> seen(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) {
    int32_t id = sampleToken(logits.data(), static_cast<int64_t>(logits.size()),
                             options, uniformDraw(11, 0, i));
    REQUIRE((id >= 0 && id < static_cast<int32_t>(logits.size())));
    seen[id] += 1.0 / draws;
  }
  return seen;
}

/// softmax(logits / temperature) over the ids in `kept`, 0 elsewhere.
std::vector<double> softmax(const std::vector<float> &logits,
                            double temperature, const std::vector<bool> &kept) {
  std::vector<double> p(logits.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (kept[i])
      total += p[i] = std::exp(logits[i] / temperature);
  for (double &x : p)
    x /= total;
  return p;
}

} // namespace

TEST_CASE("greedy sampling takes the highest logit, the lower id on ties",
          "[executor]") {
  std::vector<float> logits{0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  for (double uniform : {0.0, 0.5, 0.999999})
    REQUIRE(sampleToken(logits.data(), 5, {0.0, 0}, uniform) == 1);
  // Top-k of one is greedy at any temperature.
  for (double uniform : {0.0, 0.7, 0.999999})
    REQUIRE(sampleToken(logits.data(), 5, {5.0, 1}, uniform) == 1);
  // Only the first `vocab` logits count (a padded vocabulary's columns).
  REQUIRE(sampleToken(logits.data(), 1, {0.0, 0}, 0.3) == 0);
}

TEST_CASE("sampling draws from softmax(logits / T) over the top k",
          "[executor]") {
  std::vector<float> logits{1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -3.0f};
  const int draws = 200000;
  // A standard error of at most sqrt(0.25 / draws) = 0.0011 per id.
  for (double temperature : {1.0, 0.5, 2.0}) {
    std::vector<double> seen = frequencies(logits, {temperature, 0}, draws);
    std::vector<double> expected =
        softmax(logits, temperature, std::vector<bool>(6, true));
    for (size_t i = 0; i < logits.size(); ++i) {
      INFO("T " << temperature << " id " << i);
      REQUIRE(std::fabs(seen[i] - expected[i]) < 0.006);
    }
  }
  // Top 3: ids 3, 0, 1; never another.
  std::vector<double> seen = frequencies(logits, {1.0, 3}, draws);
  std::vector<double> expected =
      softmax(logits, 1.0, {true, true, false, true, false, false});
  for (size_t i = 0; i < logits.size(); ++i) {
    INFO("top 3, id " << i);
    REQUIRE(std::fabs(seen[i] - expected[i]) < 0.006);
    if (expected[i] == 0)
      REQUIRE(seen[i] == 0);
  }
  // The last grid point of [0, 1) still lands on an id that has weight.
  REQUIRE(sampleToken(logits.data(), 6, {1.0, 3}, 1.0 - 0x1.0p-53) == 1);
}

TEST_CASE("nucleus sampling draws from the fewest highest ids whose "
          "probability reaches p",
          "[executor]") {
  // softmax at T = 1 ranks ids 3, 0, 1, 4, 2, 5 with running masses
  // 0.569, 0.778, 0.872, 0.950, 0.996, 1.
  std::vector<float> logits{1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -3.0f};
  const int draws = 200000;
  using Kept = std::vector<bool>;
  for (auto [p, kept] :
       {std::pair{0.5, Kept{false, false, false, true, false, false}},
        {0.6, Kept{true, false, false, true, false, false}},
        {0.75, Kept{true, false, false, true, false, false}},
        {0.8, Kept{true, true, false, true, false, false}},
        {0.9, Kept{true, true, false, true, true, false}},
        {1.0, Kept(6, true)}}) {
    std::vector<double> seen = frequencies(logits, {1.0, 0, p}, draws);
    std::vector<double> expected = softmax(logits, 1.0, kept);
    for (size_t i = 0; i < logits.size(); ++i) {
      INFO("top-p " << p << ", id " << i);
      REQUIRE(std::fabs(seen[i] - expected[i]) < 0.006);
      if (expected[i] == 0)
        REQUIRE(seen[i] == 0);
    }
  }
  // With top-k first: of ids 3 and 0 (top 2), 0.9 keeps both.
  std::vector<double> seen = frequencies(logits, {1.0, 2, 0.9}, draws);
  std::vector<double> expected =
      softmax(logits, 1.0, {true, false, false, true, false, false});
  for (size_t i = 0; i < logits.size(); ++i)
    REQUIRE(std::fabs(seen[i] - expected[i]) < 0.006);
  // A nucleus smaller than the top id's mass is greedy.
  for (double uniform : {0.0, 0.5, 1.0 - 0x1.0p-53})
    REQUIRE(sampleToken(logits.data(), 6, {1.0, 0, 0.1}, uniform) == 3);
}

TEST_CASE("uniform draws are a fixed function of seed, stream and index",
          "[executor]") {
  double sum = 0;
  std::map<double, int> distinct;
  for (uint64_t i = 0; i < 10000; ++i) {
    double u = uniformDraw(7, 2, i);
    REQUIRE((u >= 0.0 && u < 1.0));
    REQUIRE(u == uniformDraw(7, 2, i));
    sum += u;
    distinct[u] += 1;
  }
  REQUIRE(std::fabs(sum / 10000 - 0.5) < 0.01);
  REQUIRE(distinct.size() == 10000);
  // Another stream or seed gives another sequence.
  int same = 0;
  for (uint64_t i = 0; i < 100; ++i)
    same += uniformDraw(7, 2, i) == uniformDraw(7, 3, i) ||
            uniformDraw(7, 2, i) == uniformDraw(8, 2, i);
  REQUIRE(same == 0);
}
