//===- AdamWRunsTest.cpp - which adamw updates one launch may group -------===//

#include "executor/OpTable.h"
#include "planner/plan/PlanIO.h"

#include <catch2/catch.hpp>

using namespace sharc;
using namespace sharc::exec;

namespace {

/// 0-3 form a run (the first may wait, the last may signal); 3's signal
/// leaves 4 alone; 5 is alone on stream 1; 6-8 form a run that 9's wait
/// ends; 9-10 form a run.
const std::string kPlan = R"(sharc_plan: 1
mesh: [{name: dp, size: 1}, {name: tp, size: 1}]
num_streams: 2
num_events: 4
regions: {param: 16, opt_state: 32, gradient: 16}
buffers:
  - {id: 0, name: "p", region: param, offset: 0, bytes: 16, dtype: f32, shape: [4]}
  - {id: 1, name: "g", region: gradient, offset: 0, bytes: 16, dtype: f32, shape: [4]}
  - {id: 2, name: "m", region: opt_state, offset: 0, bytes: 16, dtype: f32, shape: [4]}
  - {id: 3, name: "v", region: opt_state, offset: 16, bytes: 16, dtype: f32, shape: [4]}
instructions:
  - {op: adamw, in: [0, 1, 2, 3], out: [], waits: [0], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], signals: [1], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], stream: 1, attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], signals: [2], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], waits: [2], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
  - {op: adamw, in: [0, 1, 2, 3], out: [], attrs: {lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-08, weight_decay: 0.0}}
)";

} // namespace

TEST_CASE("adamw runs stop at a stream change and at any event between "
          "updates",
          "[executor]") {
  auto plan = plan::parsePlan(kPlan, "plan.yaml", plan::PlanChecks::FormatOnly);
  INFO(plan.status().message());
  REQUIRE(plan);
  std::vector<AdamWRun> runs = findAdamWRuns(*plan);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const AdamWRun &run : runs)
    spans.push_back({run.first, run.last});
  CHECK(spans ==
        std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {6, 8}, {9, 10}});
}
