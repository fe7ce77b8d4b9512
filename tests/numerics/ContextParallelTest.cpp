//===- ContextParallelTest.cpp - context parallelism vs the dense model ---===//
//
// Plans with the sequence split over cp (sharc-context-parallel), balanced
// (rank r holds chunks r and 2cp-1-r) or contiguous, with each exchange of
// attention (Ulysses all_to_all, K/V all-gathered, or the K/V blocks passed
// along the ring: a chain on the contiguous split, the whole ring on the
// balanced one), alone and with tp and dp, against the
// dense plan from the same weights
// on the same tokens: loss, logits and every gradient after one step
// within 1e-5 of the largest value (executor/Validation), the parameters
// after 5 AdamW steps within 1e-4 (mean). Then the plans as users run them
// (no --keep-grads, gradients in their arena) train 4 steps like dense,
// under the hazard check (NumericsSupport's runtime), also with labels
// ignored unevenly over the sequence blocks.
//
//===----------------------------------------------------------------------===//

#include "executor/Validation.h"
#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::testing;

namespace {

struct CpLayout {
  const char *model;
  const char *mode; ///< a preset; its size is tp's (cp for "cp")
  int64_t size, cpSize, dpSize;
  const char *exchange;
  const char *split = "balanced";
};

constexpr const char *kExchanges[] = {"a2a", "all_gather", "ring"};

PipelineOptions layoutOf(const CpLayout &c) {
  PipelineOptions layout;
  REQUIRE(applyModePreset(c.mode, c.size, layout));
  layout.cpSize = c.cpSize;
  layout.dpSize = c.dpSize;
  layout.cpComm = c.exchange;
  layout.cpSplit = c.split;
  return layout;
}

void requireParity(const CpLayout &c) {
  INFO(c.model << " " << c.mode << " size " << c.size << " cp " << c.cpSize
               << " dp " << c.dpSize << " --cp-comm " << c.exchange
               << " --cp-split " << c.split);
  PipelineOptions layout = layoutOf(c);
  layout.keepGradients = true;
  PipelineOptions dense;
  dense.keepGradients = true;
  plan::Plan sharded = compilePlan(c.model, layout, /*emitLogits=*/true);
  plan::Plan reference = compilePlan(c.model, dense, /*emitLogits=*/true);
  REQUIRE(sharded.worldSize() ==
          c.cpSize * c.dpSize * (std::string(c.mode) == "cp" ? 1 : c.size));
  auto report = exec::validateAgainstDense(sharded, reference, {});
  if (!report.isOk())
    FAIL(report.status().message());
  INFO(exec::formatReport(*report));
  REQUIRE(report->firstStep.size() == reference.params.size() + 2);
  REQUIRE(report->afterSteps.size() == reference.params.size());
  REQUIRE(report->passed);
}

void requireProductionParity(const CpLayout &c, bool scatteredLabels) {
  INFO(c.model << " " << c.mode << " size " << c.size << " cp " << c.cpSize
               << " dp " << c.dpSize << " --cp-comm " << c.exchange
               << " --cp-split " << c.split
               << (scatteredLabels ? " scattered labels" : ""));
  constexpr int kSteps = 4;
  TrainedRun sharded = trainOnRandomTokens(
      compilePlan(c.model, layoutOf(c), false), kSteps, 7, 11, scatteredLabels);
  TrainedRun dense =
      trainOnRandomTokens(compilePlan(c.model, PipelineOptions{}, false),
                          kSteps, 7, 11, scatteredLabels);
  requireLossesMatch(sharded, dense);
  requireParamsMatchByMean(sharded, dense);
}

void requireBoth(const CpLayout &c) {
  requireParity(c);
  requireProductionParity(c, /*scatteredLabels=*/false);
}

} // namespace

TEST_CASE("cp=2 with each exchange and split matches the dense model",
          "[numerics][parity][cp]") {
  for (const char *split : {"balanced", "contiguous"})
    for (const char *exchange : kExchanges) {
      requireBoth({"tiny.yaml", "cp", 2, 2, 1, exchange, split});
      requireProductionParity({"tiny.yaml", "cp", 2, 2, 1, exchange, split},
                              /*scatteredLabels=*/true);
    }
}

TEST_CASE("cp=4 with each exchange and split matches the dense model",
          "[numerics][parity][cp]") {
  // a2a needs 4 KV heads (tiny-tp4: 8/4); four blocks of 4 positions, or
  // under the balanced split eight chunks of 2.
  for (const char *split : {"balanced", "contiguous"}) {
    requireBoth({"tiny-tp4.yaml", "cp", 4, 4, 1, "a2a", split});
    requireBoth({"tiny.yaml", "cp", 4, 4, 1, "all_gather", split});
    requireBoth({"tiny.yaml", "cp", 4, 4, 1, "ring", split});
  }
}

TEST_CASE("tp=2 x cp=2 matches the dense model", "[numerics][parity][cp]") {
  // tiny-tp4: each tp rank holds 4/2 heads, which a2a splits over cp; under
  // sp the sequence is split over cp, then tp (16 / 4 positions a rank: one
  // balanced chunk of 4 each).
  for (const char *split : {"balanced", "contiguous"})
    for (const char *exchange : kExchanges)
      for (const char *mode : {"tp", "tp_sp_async_vp"})
        requireBoth({"tiny-tp4.yaml", mode, 2, 2, 1, exchange, split});
}

TEST_CASE("cp with fused q/k norms and rope matches the dense model",
          "[numerics][parity][cp]") {
  // sharc-fuse-norm-rope keeps rope's position_axis and position_split on
  // the fused op, so its chunks rotate by global positions too; with the
  // projections and the adds fused as well, nothing else changes.
  for (bool fuseAll : {false, true})
    for (const char *exchange : kExchanges) {
      CpLayout c{"tiny-tp4.yaml", "tp_sp_async_vp", 2, 2, 1, exchange};
      PipelineOptions layout = layoutOf(c);
      layout.fuseNormRope = true;
      layout.fuseProjections = layout.fuseAdds = fuseAll;
      layout.keepGradients = true;
      PipelineOptions dense;
      dense.keepGradients = true;
      INFO("--fuse-norm-rope"
           << (fuseAll ? " --fuse-projections --fuse-adds" : "")
           << " --cp-comm " << exchange);
      auto report = exec::validateAgainstDense(
          compilePlan(c.model, layout, /*emitLogits=*/true),
          compilePlan(c.model, dense, /*emitLogits=*/true), {});
      if (!report.isOk())
        FAIL(report.status().message());
      INFO(exec::formatReport(*report));
      REQUIRE(report->passed);
    }
}

TEST_CASE("dp=2 x cp=2 x tp=2 (8 simulated ranks) matches the dense model",
          "[numerics][parity][cp]") {
  for (const char *split : {"balanced", "contiguous"})
    for (const char *exchange : kExchanges)
      requireBoth(
          {"tiny-tp4.yaml", "tp_sp_async_vp", 2, 2, 2, exchange, split});
}

TEST_CASE("dp=2 x cp=2 ring attention matches the dense model",
          "[numerics][parity][cp]") {
  for (const char *split : {"balanced", "contiguous"})
    requireBoth({"tiny.yaml", "cp", 2, 2, 2, "ring", split});
}

TEST_CASE("microbatches under cp and dp x cp equal the dense step",
          "[numerics][parity][cp][microbatch]") {
  // A step of 8 sequences in 2 or 4 microbatches, each split along the
  // sequence over cp (and along the batch over dp): every gradient after
  // one step and the loss of 3 steps as the dense step on the whole batch.
  constexpr int kSteps = 3;
  PipelineOptions dense;
  dense.keepGradients = true;
  TrainedRun whole =
      trainOnRandomTokens(compileTinyBatch(8, 1, dense), kSteps, 5, 13);
  for (const char *cpSplit : {"balanced", "contiguous"})
    for (const char *exchange : kExchanges)
      for (int64_t dpSize : {1, 2})
        for (int64_t count : {2, 4}) {
          INFO("--cp-comm " << exchange << " --cp-split " << cpSplit << ", dp "
                            << dpSize << ", " << count << " microbatches");
          PipelineOptions layout =
              layoutOf({"tiny.yaml", "cp", 2, 2, dpSize, exchange, cpSplit});
          layout.keepGradients = true;
          TrainedRun split = trainOnRandomTokens(
              compileTinyBatch(8, count, layout), kSteps, 5, 13);
          requireTrainsLikeDense(split, whole);
        }
}
