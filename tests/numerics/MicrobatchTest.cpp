//===- MicrobatchTest.cpp - gradient accumulation equals the whole batch --===//
//
// A step of M microbatches of micro_batch_size B/M (sharc-microbatch)
// against the dense step on the same global batch of B sequences, one
// microbatch of B: the gradients of the first step (each layout's shards
// gathered), the loss of every step and the parameters after the last
// must match. The activation arena must be one microbatch's.
//
//===----------------------------------------------------------------------===//

#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::testing;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 8; // the step's global batch, in sequences

plan::Plan compileTiny(int64_t count, PipelineOptions pipeline) {
  return compileTinyBatch(kBatch, count, pipeline);
}

/// Every layout and its dense reference train from the same seeds.
TrainedRun train(const plan::Plan &plan) {
  return trainOnRandomTokens(plan, kSteps, 5, 13);
}

void requireMicrobatchParity(const std::string &mode, int64_t tp, int64_t dp,
                             int64_t count, bool fuse = false) {
  PipelineOptions layout;
  layout.keepGradients = true;
  layout.fuseProjections = fuse;
  REQUIRE(applyModePreset(mode, tp, layout));
  if (dp > 1)
    layout.dpSize = dp;
  PipelineOptions dense;
  dense.keepGradients = true;
  INFO(mode << " tp " << tp << " dp " << dp << ", " << count << " microbatches"
            << (fuse ? ", fused" : ""));
  TrainedRun split = train(compileTiny(count, layout));
  TrainedRun whole = train(compileTiny(1, dense));
  requireTrainsLikeDense(split, whole, 2e-3);
}

} // namespace

TEST_CASE("1, 2 and 4 microbatches equal the dense step on the whole batch",
          "[numerics][microbatch]") {
  for (int64_t count : {1, 2, 4})
    requireMicrobatchParity("dense", 1, 1, count);
}

TEST_CASE("microbatches under ddp, tp and dp x tp equal the dense step",
          "[numerics][microbatch]") {
  for (int64_t count : {2, 4}) {
    requireMicrobatchParity("ddp", 2, 1, count);
    requireMicrobatchParity("tp_sp_async_vp", 2, 1, count);
    requireMicrobatchParity("tp", 2, 2, count);
  }
  // Fused q/k/v and gate/up: each fused weight is built once, each fused
  // gradient summed, synced and split once.
  requireMicrobatchParity("tp_sp_async_vp", 2, 2, 2, /*fuse=*/true);
}

TEST_CASE("the activation arena holds one microbatch",
          "[numerics][microbatch]") {
  // 4 microbatches of 2 sequences against one of 2 (the same per-
  // microbatch activations; the accumulators and the whole batch's ids add
  // a little) and against one of 8.
  PipelineOptions production;
  auto arena = [](const plan::Plan &plan) {
    return plan.regionBytes.at(plan::Region::Activation);
  };
  int64_t four = arena(compileTiny(4, production));
  int64_t whole = arena(compileTiny(1, production));
  // One microbatch of 2: tiny.yaml as it is.
  int64_t one = arena(compilePlan("tiny.yaml", production, false));
  INFO("arena: 4 x 2 sequences " << four << " B, 1 x 2 " << one << " B, 1 x 8 "
                                 << whole << " B");
  REQUIRE(four >= one);
  REQUIRE(four <= one * 105 / 100);
  REQUIRE(four * 3 <= whole);
}
