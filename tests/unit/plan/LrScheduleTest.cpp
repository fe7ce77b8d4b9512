//===- LrScheduleTest.cpp - the learning-rate factor per step -------------===//

#include "planner/plan/Plan.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc::plan;

TEST_CASE("the lr schedule warms up and decays to its floor", "[plan]") {
  LrSchedule cosine{
      .decay = "cosine", .warmupSteps = 4, .totalSteps = 14, .minFactor = 0.1};
  // Warmup: t / 4; then 0.1 + 0.9 (1 + cos(pi (t - 4) / 10)) / 2.
  REQUIRE(cosine.factor(1) == 0.25);
  REQUIRE(cosine.factor(4) == 1.0);
  REQUIRE(cosine.factor(9) == Approx(0.55).epsilon(1e-15)); // halfway
  REQUIRE(cosine.factor(6) ==
          Approx(0.1 + 0.45 * (1 + std::cos(0.2 * 3.14159265358979323846)))
              .epsilon(1e-15));
  REQUIRE(cosine.factor(14) == Approx(0.1).epsilon(1e-15));
  REQUIRE(cosine.factor(1000) == Approx(0.1).epsilon(1e-15));
  LrSchedule linear{
      .decay = "linear", .warmupSteps = 0, .totalSteps = 10, .minFactor = 0.0};
  REQUIRE(linear.factor(5) == 0.5);
  REQUIRE(linear.factor(10) == 0.0);
  REQUIRE(LrSchedule{}.isConstant());
  REQUIRE(LrSchedule{}.factor(123) == 1.0);
}
