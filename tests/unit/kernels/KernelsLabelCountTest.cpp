//===- KernelsLabelCountTest.cpp - valid labels and the step's loss -------===//

#include "kernels/LabelCount.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace sharc::kernels;

namespace {

// 9 real columns: -100, 9 (padding), 12 and -7 do not count; 4 labels do.
constexpr int64_t kValidVocab = 9;
const std::vector<int32_t> kLabels = {3, -100, 0, 8, 9, 12, -7, 5};

} // namespace

TEST_CASE("valid_count counts the labels in [0, valid_vocab)", "[kernels]") {
  float count = -1;
  cpu::validCount({.labels = kLabels.data(),
                   .count = &count,
                   .numTokens = static_cast<int64_t>(kLabels.size()),
                   .validVocab = kValidVocab});
  REQUIRE(count == 4.0f);
  cpu::validCount(
      {.labels = kLabels.data(), .count = &count, .validVocab = kValidVocab});
  REQUIRE(count == 0.0f);
}

TEST_CASE("count_scale weighs a mean by its count over the total",
          "[kernels]") {
  float x = 2.5f, total = 10.0f, y = 0;
  CountScaleArgs args{.x = &x,
                      .labels = kLabels.data(),
                      .total = &total,
                      .y = &y,
                      .numTokens = static_cast<int64_t>(kLabels.size()),
                      .validVocab = kValidVocab};
  cpu::countScale(args);
  REQUIRE(y == Approx(2.5 * 4 / 10.0));
  // No valid label in the whole step: 0, never a division by zero.
  total = 0.0f;
  args.numTokens = 2; // labels 3 and -100: one counts, but total says 0
  cpu::countScale(args);
  REQUIRE(y == Approx(2.5));
  args.numTokens = 0;
  cpu::countScale(args);
  REQUIRE(y == 0.0f);
}
