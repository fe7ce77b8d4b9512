//===- StageMemoryTest.cpp - the pipeline report's JSON form --------------===//
//
// pipelineReportJson against the record it was given, read back with
// yaml-cpp (JSON is YAML): every figure comes back as written, and the
// simulated ones only from a simulation that ran to its end, so a
// deadlocked step leaves no partial numbers for a tool to read.

#include "planner/StageMemory.h"

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <string>

using namespace sharc;

namespace {

PipelineReport twoStages() {
  PipelineReport report;
  report.schedule = "1f1b";
  report.numChunks = 1;
  report.stages = {{1000, 2000, 3000, 6000, 40}, {1100, 2200, 3300, 6600, 44}};
  report.numMicrobatches = 4;
  report.bubble = 0.2; // (2 - 1) / (4 + 2 - 1)
  return report;
}

} // namespace

TEST_CASE("the pipeline JSON holds each stage's memory and the bubble",
          "[planner]") {
  PipelineReport report = twoStages();
  YAML::Node json = YAML::Load(pipelineReportJson(report));
  REQUIRE(json.IsMap());
  REQUIRE(json["schedule"].as<std::string>() == "1f1b");
  REQUIRE(json["chunks"].as<int64_t>() == 1);
  REQUIRE(json["stages"].as<int64_t>() == 2);
  REQUIRE(json["microbatches"].as<int64_t>() == 4);
  REQUIRE(json["analytic_bubble"].as<double>() == 0.2);
  REQUIRE(json["stage_memory"].size() == 2);
  for (size_t s = 0; s < 2; ++s) {
    const StageMemory &stage = report.stages[s];
    YAML::Node entry = json["stage_memory"][s];
    REQUIRE(entry["stage"].as<size_t>() == s);
    REQUIRE(entry["instructions"].as<int64_t>() == stage.numInstructions);
    REQUIRE(entry["parameter_bytes"].as<int64_t>() == stage.parameterBytes);
    REQUIRE(entry["optimizer_bytes"].as<int64_t>() == stage.optimizerBytes);
    REQUIRE(entry["gradient_bytes"].as<int64_t>() == stage.gradientBytes);
    REQUIRE(entry["activation_bytes"].as<int64_t>() == stage.activationBytes);
  }
  // Not simulated (or deadlocked: the caller then sets nothing).
  REQUIRE(!json["simulated_bubble"]);
  REQUIRE(!json["simulated_step_seconds"]);
  REQUIRE(!json["stage_busy_seconds"]);
}

TEST_CASE("the pipeline JSON adds the simulated step when one ran",
          "[planner]") {
  PipelineReport report = twoStages();
  report.stepSeconds = 2.5e-3;
  report.stageBusySeconds = {2.0e-3, 1.5e-3};
  // The stages' mean idle share: (0.5 + 1.0) / 2 / 2.5.
  report.simulatedBubble = 0.3;
  YAML::Node json = YAML::Load(pipelineReportJson(report));
  REQUIRE(json["simulated_step_seconds"].as<double>() ==
          Approx(2.5e-3).epsilon(1e-8));
  REQUIRE(json["simulated_bubble"].as<double>() == Approx(0.3).epsilon(1e-8));
  REQUIRE(json["stage_busy_seconds"].size() == 2);
  REQUIRE(json["stage_busy_seconds"][0].as<double>() ==
          Approx(2.0e-3).epsilon(1e-8));
  REQUIRE(json["stage_busy_seconds"][1].as<double>() ==
          Approx(1.5e-3).epsilon(1e-8));
}
