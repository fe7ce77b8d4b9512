//===- ParityTest.cpp - every parallel mode computes the dense model ------===//
//
// Each mode's plan and the dense plan run from the same initial weights on
// the same tokens (executor/Validation): the loss, logits and every
// gradient after one step must match within 1e-5 relative (to the tensor's
// largest value), the parameters after 5 AdamW steps within 1e-4.
//
//===----------------------------------------------------------------------===//

#include "executor/Validation.h"
#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

using namespace sharc;
using namespace sharc::testing;

namespace {

void requireParity(const std::string &model, const std::string &mode,
                   int64_t size, int64_t extraDp = 1, bool fuse = false) {
  PipelineOptions layout;
  layout.keepGradients = true;
  layout.fuseProjections = fuse;
  REQUIRE(applyModePreset(mode, size, layout));
  if (extraDp > 1)
    layout.dpSize = extraDp;
  PipelineOptions dense;
  dense.keepGradients = true;

  plan::Plan sharded = compilePlan(model, layout, /*emitLogits=*/true);
  plan::Plan reference = compilePlan(model, dense, /*emitLogits=*/true);
  auto report = exec::validateAgainstDense(sharded, reference, {});
  INFO(model << " " << mode << " size " << size << " dp " << extraDp
             << (fuse ? " fused" : ""));
  if (!report.isOk())
    FAIL(report.status().message());
  INFO(exec::formatReport(*report));
  REQUIRE(report->firstStep.size() == reference.params.size() + 2);
  REQUIRE(report->afterSteps.size() == reference.params.size());
  REQUIRE(report->passed);
}

} // namespace

TEST_CASE("every mode at tp=2 matches the dense model", "[numerics][parity]") {
  for (const char *mode :
       {"tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"})
    requireParity("tiny.yaml", mode, 2);
}

TEST_CASE("ddp over 2 ranks matches the dense model", "[numerics][parity]") {
  requireParity("tiny.yaml", "ddp", 2);
}

TEST_CASE("every mode at tp=4 matches the dense model, vocabulary padded",
          "[numerics][parity]") {
  // tiny-tp4 has 8/4 heads and a vocabulary of 127: the vocab-parallel
  // modes pad it to 128 and must still match the unpadded dense model.
  for (const char *mode :
       {"tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"})
    requireParity("tiny-tp4.yaml", mode, 4);
}

TEST_CASE("every mode at tp=8 matches the dense model, vocabulary padded",
          "[numerics][parity]") {
  // tiny-tp8 has 8/8 heads (one query and one KV head a rank) and a
  // vocabulary of 125, padded to 128 under vp; sp leaves each rank 2 of the
  // 16 positions.
  for (const char *mode :
       {"tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"})
    requireParity("tiny-tp8.yaml", mode, 8);
}

TEST_CASE("every mode at dp=2 x tp=4 matches the dense model",
          "[numerics][parity]") {
  // 8 simulated ranks: a dp pair of tp=4 groups, one KV head a rank for two
  // query heads (tiny-tp4), a padded vocabulary, one sequence a dp rank.
  for (const char *mode :
       {"tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"})
    requireParity("tiny-tp4.yaml", mode, 4, /*extraDp=*/2);
}

TEST_CASE("dp=2 x tp=2 matches the dense model", "[numerics][parity]") {
  requireParity("tiny.yaml", "tp", 2, /*extraDp=*/2);
  requireParity("tiny.yaml", "tp_sp_async_vp", 2, /*extraDp=*/2);
}

TEST_CASE("tied embeddings match the dense model in every mode",
          "[numerics][parity]") {
  for (const char *mode :
       {"tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"})
    requireParity("tiny-tied.yaml", mode, 2);
  requireParity("tiny-tied.yaml", "ddp", 2);
  requireParity("tiny-tied.yaml", "tp_sp_async_vp", 2, /*extraDp=*/2);
}

TEST_CASE("a padded vocabulary at tp=2 matches the unpadded dense model",
          "[numerics][parity]") {
  requireParity("tiny-tp4.yaml", "tp_vp", 2);
  requireParity("tiny-tp4.yaml", "tp_sp_async_vp", 2, /*extraDp=*/2);
}

TEST_CASE("fused projections match the dense model", "[numerics][parity]") {
  // One GEMM for q/k/v and one for gate/up, the parameters views of the
  // fused weights (sharc-fuse-projections), in each kind of layout.
  for (const char *mode : {"dense", "tp", "tp_sp_async_vp"})
    requireParity("tiny.yaml", mode, 2, 1, /*fuse=*/true);
  requireParity("tiny.yaml", "ddp", 2, 1, /*fuse=*/true);
  requireParity("tiny-tied.yaml", "tp_sp", 2, /*extraDp=*/2, /*fuse=*/true);
}
