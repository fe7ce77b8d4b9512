//===- ProductionParityTest.cpp - plans as users run them, vs dense -------===//
//
// ParityTest checks gradients through --keep-grads plans. These are the
// plans `sharc compile` writes without it: gradients live in the gradient
// arena (dp buckets summed in place, the AdamW update right after each
// final gradient) and only the loss comes out. Each layout and the dense
// plan start from the same weights and train on the same tokens; the loss
// of every step and every parameter after the last must match the dense
// run.
//
//===----------------------------------------------------------------------===//

#include "executor/Validation.h"
#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::testing;

namespace {

constexpr int kSteps = 4;

/// Every layout and its dense reference train from the same seeds.
TrainedRun train(const plan::Plan &plan) {
  return trainOnRandomTokens(plan, kSteps, 7, 11);
}

void requireProductionParity(const std::string &model, const std::string &mode,
                             int64_t size, int64_t extraDp = 1,
                             int64_t cpSize = 1) {
  PipelineOptions layout;
  REQUIRE(applyModePreset(mode, size, layout));
  if (extraDp > 1)
    layout.dpSize = extraDp;
  if (cpSize > 1)
    layout.extraAxes.push_back({"cp", cpSize});
  INFO(model << " " << mode << " size " << size << " dp " << extraDp << " cp "
             << cpSize);
  TrainedRun sharded = train(compilePlan(model, layout, /*emitLogits=*/false));
  TrainedRun dense = train(compilePlan(model, PipelineOptions{}, false));
  requireLossesMatch(sharded, dense);
  requireParamsMatchByMean(sharded, dense);
}

} // namespace

TEST_CASE("production plans of every mode at tp=2 train like dense",
          "[numerics][parity]") {
  for (const char *mode :
       {"tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"})
    requireProductionParity("tiny.yaml", mode, 2);
}

TEST_CASE("production ddp and dp=2 x tp=2 plans train like dense",
          "[numerics][parity]") {
  requireProductionParity("tiny.yaml", "ddp", 2);
  requireProductionParity("tiny.yaml", "tp_sp_async_vp", 2, /*extraDp=*/2);
  requireProductionParity("tiny-tied.yaml", "tp", 2, /*extraDp=*/2);
}

TEST_CASE("production plans at tp=4 with a padded vocabulary train like dense",
          "[numerics][parity]") {
  requireProductionParity("tiny-tp4.yaml", "tp_sp_async_vp", 4);
  requireProductionParity("tiny-tp4.yaml", "tp_vp", 2, /*extraDp=*/2);
}

TEST_CASE("production plans at tp=8 and dp=2 x tp=4 train like dense",
          "[numerics][parity]") {
  // Eight simulated ranks each: the loss of 4 steps within 1e-5 relative
  // and every parameter after them within 1e-4 (mean), as at tp=2.
  requireProductionParity("tiny-tp8.yaml", "tp", 8);
  requireProductionParity("tiny-tp8.yaml", "tp_sp_async_vp", 8);
  requireProductionParity("tiny-tp4.yaml", "tp_sp_async_vp", 4,
                          /*extraDp=*/2);
}

TEST_CASE("a dp2 x cp2 x tp2 mesh of 8 simulated ranks matches dense",
          "[numerics][parity]") {
  // cp is only declared here (sharc-declare-axis), nothing split over it:
  // the plan's mesh has three axes, each cp pair computes alike, and
  // gradients, logits, loss and training must still be the dense model's.
  // ContextParallelTest splits the sequence over cp on the same mesh.
  PipelineOptions layout;
  REQUIRE(applyModePreset("tp_sp_async_vp", 2, layout));
  layout.dpSize = 2;
  layout.extraAxes.push_back({"cp", 2});
  layout.keepGradients = true;
  PipelineOptions dense;
  dense.keepGradients = true;
  plan::Plan sharded = compilePlan("tiny.yaml", layout, /*emitLogits=*/true);
  REQUIRE(sharded.mesh.size() == 3);
  REQUIRE(sharded.mesh[1].name == "cp");
  REQUIRE(sharded.worldSize() == 8);
  auto report = exec::validateAgainstDense(
      sharded, compilePlan("tiny.yaml", dense, /*emitLogits=*/true), {});
  if (!report.isOk())
    FAIL(report.status().message());
  INFO(exec::formatReport(*report));
  REQUIRE(report->passed);
  requireProductionParity("tiny.yaml", "tp_sp_async_vp", 2, /*extraDp=*/2,
                          /*cpSize=*/2);
}
