//===- TrainingTest.cpp - the tiny model learns a fixed batch -------------===//

#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <random>

using namespace sharc;
using namespace sharc::testing;

TEST_CASE("50 steps on a fixed batch cut the tiny model's loss 5x",
          "[numerics][training]") {
  plan::Plan plan =
      compilePlan("tiny.yaml", false, true, "tiny-overfit.run.yaml");
  auto runtime = makeRuntime(plan);
  REQUIRE(runtime->initParams(42).isOk());
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(plan.batchSize * plan.seqLen);
  for (int32_t &id : tokens)
    id = static_cast<int32_t>(rng() % plan.vocabSize);
  REQUIRE(runtime->setBatch(tokens).isOk());
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 50; ++step) {
    auto stats = runtime->step();
    REQUIRE(stats.isOk());
    REQUIRE(std::isfinite(stats->loss));
    (step == 0 ? first : last) = stats->loss;
  }
  INFO("loss " << first << " -> " << last);
  REQUIRE(last * 5.0 <= first);
}
