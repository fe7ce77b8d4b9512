//===- LabelParityTest.cpp - the loss over the step's valid labels --------===//
//
// Labels ignored (-100) at scattered positions, so every dp rank, sequence
// shard and microbatch holds a different number of valid labels: the loss
// of every layout must still be the dense model's mean over all valid
// labels of the global batch, and its gradients the dense gradients (a
// mean of per-piece means would weigh a piece's labels by 1/its count).
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

TrainedRun train(const plan::Plan &plan) {
  return trainOnRandomTokens(plan, kSteps, 3, 17, /*scatteredLabels=*/true);
}

struct Layout {
  std::string mode;
  int64_t tp = 2, dp = 1, cp = 1, microbatches = 1;
};

/// With `production`, plans as `sharc compile` writes them (gradients in
/// their arena, only the loss out): the losses and the parameters after the
/// last step are compared.
void requireLabelParity(const Layout &layout, const TrainedRun &dense,
                        bool production = false) {
  PipelineOptions pipeline;
  pipeline.keepGradients = !production;
  REQUIRE(applyModePreset(layout.mode, layout.tp, pipeline));
  if (layout.dp > 1)
    pipeline.dpSize = layout.dp;
  if (layout.cp > 1)
    pipeline.extraAxes.push_back({"cp", layout.cp});
  INFO(layout.mode << " tp " << layout.tp << " dp " << layout.dp << " cp "
                   << layout.cp << ", " << layout.microbatches
                   << " microbatches");
  TrainedRun run =
      train(compileTinyBatch(kBatch, layout.microbatches, pipeline));
  requireLossesMatch(run, dense);
  if (!production)
    REQUIRE(
        compareTensors(run.firstOutputs, dense.firstOutputs, "grad:", 1e-5) ==
        static_cast<int>(dense.params.tensors.size()));
  compareTensors(run.params, dense.params, "", 2e-3);
}

} // namespace

TEST_CASE("every layout's loss is the mean over the step's valid labels",
          "[numerics][parity][labels]") {
  PipelineOptions densePipeline;
  densePipeline.keepGradients = true;
  TrainedRun dense = train(compileTinyBatch(kBatch, 1, densePipeline));
  std::vector<Layout> layouts = {
      {"dense", 1, 1, 1, 2},
      {"dense", 1, 1, 1, 4},
      {"ddp", 2},
      {"ddp", 2, 1, 1, 4},
      {"tp", 2},
      {"tp_sp", 2},
      {"tp_sp_async", 2},
      {"tp_vp", 2},
      {"tp_sp_async_vp", 2},
      {"tp_sp_async_vp", 2, 1, 1, 2},
      {"tp", 2, 2},
      {"tp_sp_async_vp", 2, 2},
      {"tp_sp_async_vp", 2, 2, 1, 2},
      {"tp_sp_async_vp", 2, 2, 2},
  };
  for (const Layout &layout : layouts)
    requireLabelParity(layout, dense);
}

TEST_CASE("production plans train on the mean over the step's valid labels",
          "[numerics][parity][labels]") {
  TrainedRun dense = train(compileTinyBatch(kBatch, 1, PipelineOptions{}));
  for (const Layout &layout : std::vector<Layout>{
           {"ddp", 2, 1, 1, 2},
           {"tp_sp_async_vp", 2, 2, 1, 2},
           {"tp_sp_async_vp", 2, 2, 2},
       })
    requireLabelParity(layout, dense, /*production=*/true);
}
