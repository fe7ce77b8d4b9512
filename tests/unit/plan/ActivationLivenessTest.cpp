//===- ActivationLivenessTest.cpp - activation bytes live per instruction -===//

#include "planner/plan/ActivationLiveness.h"
#include "planner/plan/PlanIO.h"

#include <catch2/catch.hpp>

using namespace sharc;
using namespace sharc::plan;

namespace {

/// `a` (256 bytes) is read through its column view `a.cols` by instruction
/// 1, which writes `b` (64); instruction 2 reads `b` and writes the
/// gradient `g` (not an activation); instruction 3 writes `c` (32), read by
/// none.
const char *const kPlan = R"(sharc_plan: 1
mesh: [{name: dp, size: 1}]
num_streams: 1
num_events: 0
regions: {activation: 512, gradient: 64}
buffers:
  - {id: 0, name: "a", region: activation, offset: 0, bytes: 256, dtype: f32, shape: [8, 8]}
  - {id: 1, name: "a.cols", region: activation, offset: 0, bytes: 240, dtype: f32, shape: [8, 4], row_stride: 8, view_of: 0}
  - {id: 2, name: "b", region: activation, offset: 256, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 3, name: "g", region: gradient, offset: 0, bytes: 64, dtype: f32, shape: [4, 4]}
  - {id: 4, name: "c", region: activation, offset: 320, bytes: 32, dtype: f32, shape: [8]}
instructions:
  - {op: fill, in: [], out: [0], attrs: {value: 1.0}}
  - {op: scale, in: [1], out: [2], attrs: {factor: 2.0}}
  - {op: scale, in: [2], out: [3], attrs: {factor: 2.0}}
  - {op: fill, in: [], out: [4], attrs: {value: 0.0}}
)";

} // namespace

TEST_CASE("live activation bytes count a view as its base and each buffer "
          "from its first to its last instruction",
          "[plan]") {
  Result<Plan> plan = parsePlan(kPlan, "plan.yaml", PlanChecks::FormatOnly);
  INFO(plan.status().message());
  REQUIRE(plan);
  // a lives through instruction 1 (read there through its view, whose 240
  // bytes are a's and not counted again); b from 1 to 2; c at 3 alone.
  CHECK(liveActivationBytes(*plan) == std::vector<int64_t>{256, 320, 64, 32});
  // One rank's instructions: the others hold 0 and name nothing, so a
  // buffer lives from the first to the last instruction kept.
  CHECK(liveActivationBytes(*plan, {true, false, true, true}) ==
        std::vector<int64_t>{256, 0, 64, 32});
}
