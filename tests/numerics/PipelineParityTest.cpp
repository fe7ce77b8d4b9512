//===- PipelineParityTest.cpp - pipeline stages compute the dense model ---===//
//
// tiny.yaml with L layers, a step of kBatch sequences in M microbatches,
// split into pp stages (sharc-pipeline-partition/-schedule) and run on
// simulated ranks (one per stage, send/recv through the in-process
// communicator), against the dense step on the whole batch in one
// microbatch: every gradient of the first step (each from the stage that
// holds it) within 1e-5 of the dense one relative to its largest value,
// the loss of every step within 1e-5, with scattered -100 labels so that
// microbatches hold different numbers of valid labels.
//
//===----------------------------------------------------------------------===//

#include "executor/Generation.h"
#include "executor/Validation.h"
#include "planner/StageMemory.h"
#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

using namespace sharc;
using namespace sharc::testing;

namespace {

constexpr int kSteps = 3;
constexpr int64_t kBatch = 8;

/// tiny.yaml with `layers` layers and `count` microbatches of
/// `microBatch` sequences (kBatch in all by default).
plan::Plan compileTiny(int64_t layers, int64_t count,
                       const PipelineOptions &pipeline, int64_t microBatch = 0,
                       bool tied = false) {
  if (microBatch == 0)
    microBatch = kBatch / count;
  std::ifstream in(std::string(SHARC_SOURCE_DIR) + "/models/tiny.yaml");
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  auto replace = [&](const std::string &from, const std::string &to) {
    size_t at = yaml.find(from);
    REQUIRE(at != std::string::npos);
    yaml.replace(at, from.size(), to);
  };
  replace("num_hidden_layers: 2",
          "num_hidden_layers: " + std::to_string(layers));
  if (tied)
    replace("vocab_size: 128", "vocab_size: 128\n  tie_word_embeddings: true");
  replace("micro_batch_size: 2",
          "micro_batch_size: " + std::to_string(microBatch) +
              (count > 1 ? "\n  num_microbatches: " + std::to_string(count)
                         : std::string()));
  std::string path =
      (std::filesystem::temp_directory_path() /
       ("sharc-pp-" + std::to_string(getpid()) + "-" + std::to_string(layers) +
        "x" + std::to_string(count) + "x" + std::to_string(microBatch) +
        (tied ? "-tied" : "") + ".yaml"))
          .string();
  std::ofstream(path) << yaml;
  plan::Plan plan = compilePlanFile(path, pipeline);
  std::filesystem::remove(path);
  return plan;
}

PipelineOptions pipelineLayout(int64_t stages, const std::string &schedule,
                               const std::string &balance = "cost") {
  PipelineOptions layout;
  layout.keepGradients = true;
  REQUIRE(applyModePreset("pp", stages, layout));
  layout.ppSchedule = schedule;
  layout.ppBalance = balance;
  if (schedule == "interleaved")
    layout.ppChunks = 2;
  return layout;
}

void requirePipelineParity(int64_t layers, int64_t stages, int64_t count,
                           const std::string &schedule,
                           const std::string &balance = "cost",
                           bool tied = false) {
  INFO(layers << " layers, pp " << stages << ", " << count << " microbatches, "
              << schedule << ", balance " << balance << (tied ? ", tied" : ""));
  plan::Plan piped = compileTiny(
      layers, count, pipelineLayout(stages, schedule, balance), 0, tied);
  REQUIRE(piped.axisSize(plan::kStageAxis) == stages);
  for (const plan::Instruction &instr : piped.instructions)
    REQUIRE(instr.stage >= 0);
  PipelineOptions dense;
  dense.keepGradients = true;
  TrainedRun split = trainOnRandomTokens(piped, kSteps, 5, 13,
                                         /*scatteredLabels=*/true);
  TrainedRun whole =
      trainOnRandomTokens(compileTiny(layers, 1, dense, 0, tied), kSteps, 5, 13,
                          /*scatteredLabels=*/true);
  requireTrainsLikeDense(split, whole, 2e-3);
}

} // namespace

TEST_CASE("pp=2 GPipe over 4 microbatches equals the dense step",
          "[numerics][pipeline]") {
  requirePipelineParity(2, 2, 4, "gpipe");
  requirePipelineParity(4, 2, 4, "gpipe", "layers");
}

TEST_CASE("pp=2 with one microbatch matches dense loss, logits and grads",
          "[numerics][pipeline]") {
  PipelineOptions layout = pipelineLayout(2, "gpipe");
  PipelineOptions dense;
  dense.keepGradients = true;
  plan::Plan piped = compilePlan("tiny.yaml", layout, /*emitLogits=*/true);
  plan::Plan reference = compilePlan("tiny.yaml", dense, /*emitLogits=*/true);
  auto report = exec::validateAgainstDense(piped, reference, {});
  if (!report.isOk())
    FAIL(report.status().message());
  INFO(exec::formatReport(*report));
  REQUIRE(report->firstStep.size() == reference.params.size() + 2);
  REQUIRE(report->passed);
}

TEST_CASE("an uneven split (5 layers over 2 stages) equals the dense step",
          "[numerics][pipeline]") {
  requirePipelineParity(5, 2, 4, "gpipe", "layers");
  requirePipelineParity(5, 2, 2, "gpipe");
}

TEST_CASE("pp=4 equals the dense step", "[numerics][pipeline]") {
  requirePipelineParity(4, 4, 4, "gpipe");
  requirePipelineParity(5, 4, 2, "1f1b", "layers");
}

TEST_CASE("pp=2 and pp=4 1F1B equal the dense step", "[numerics][pipeline]") {
  requirePipelineParity(4, 2, 4, "1f1b");
  requirePipelineParity(4, 4, 8, "1f1b", "layers");
  requirePipelineParity(3, 2, 1, "1f1b", "layers");
}

TEST_CASE("1F1B keeps min(P - r, M) microbatches of activations a stage",
          "[numerics][pipeline][memory]") {
  // Per stage r, GPipe holds every microbatch's activations at its peak:
  // bytes(M) = base + M x unit, with unit one microbatch's saved
  // activations (measured from M = 2 and 3 at a fixed micro_batch_size;
  // one microbatch has no accumulators).
  // 1F1B at M = 8 must hold min(P - r, M) units, GPipe all 8.
  constexpr int64_t kLayers = 4, kStages = 4, kMicroBatch = 2;
  auto stageBytes = [&](int64_t count, const std::string &schedule) {
    PipelineOptions layout = pipelineLayout(kStages, schedule, "layers");
    layout.keepGradients = false;
    plan::Plan plan = compileTiny(kLayers, count, layout, kMicroBatch);
    PipelineReport report = buildPipelineReport(plan);
    REQUIRE(report.stages.size() == kStages);
    REQUIRE(report.numMicrobatches == count);
    std::vector<int64_t> bytes;
    for (const StageMemory &stage : report.stages)
      bytes.push_back(stage.activationBytes);
    return bytes;
  };
  requireStageActivationUnits(stageBytes, kStages);
}

TEST_CASE("production pp plans train like the dense model",
          "[numerics][pipeline]") {
  // No --keep-grads: gradients in the arena, each update right after its
  // gradient on its stage, only the loss out (from the last stage).
  for (const char *schedule : {"gpipe", "1f1b"}) {
    INFO(schedule);
    PipelineOptions layout = pipelineLayout(2, schedule);
    layout.keepGradients = false;
    TrainedRun piped = trainOnRandomTokens(compileTiny(3, 4, layout), 4, 7, 11);
    TrainedRun dense =
        trainOnRandomTokens(compileTiny(3, 1, PipelineOptions{}), 4, 7, 11);
    requireLossesMatch(piped, dense);
    REQUIRE(compareTensors(piped.params, dense.params, "", 2e-3) ==
            static_cast<int>(dense.params.tensors.size()));
  }
}

TEST_CASE("tp=2 x pp=2 equals the dense step", "[numerics][pipeline]") {
  for (const char *schedule : {"gpipe", "1f1b"}) {
    INFO(schedule);
    PipelineOptions layout;
    layout.keepGradients = true;
    REQUIRE(applyModePreset("tp_pp", 2, layout));
    REQUIRE(layout.ppSize == 2);
    layout.sequenceParallel = true;
    layout.ppSchedule = schedule;
    plan::Plan piped = compileTiny(3, 4, layout);
    REQUIRE(piped.worldSize() == 4);
    PipelineOptions dense;
    dense.keepGradients = true;
    TrainedRun split = trainOnRandomTokens(piped, kSteps, 5, 13, true);
    TrainedRun whole =
        trainOnRandomTokens(compileTiny(3, 1, dense), kSteps, 5, 13, true);
    requireTrainsLikeDense(split, whole);
  }
}

TEST_CASE("dp=2 x pp=2 equals the dense step", "[numerics][pipeline]") {
  // Each stage's gradients are summed over dp in buckets of its own;
  // interleaved (4 layers, 2 chunks a stage), each chunk's.
  for (const char *schedule : {"gpipe", "1f1b", "interleaved"}) {
    INFO(schedule);
    PipelineOptions layout = pipelineLayout(2, schedule);
    layout.dpSize = 2;
    layout.bucketBytes = 4096; // several buckets a stage
    int64_t layers = layout.ppChunks > 1 ? 4 : 3;
    plan::Plan piped = compileTiny(layers, 2, layout);
    REQUIRE(piped.worldSize() == 4);
    PipelineOptions dense;
    dense.keepGradients = true;
    TrainedRun split = trainOnRandomTokens(piped, kSteps, 5, 13, true);
    TrainedRun whole =
        trainOnRandomTokens(compileTiny(layers, 1, dense), kSteps, 5, 13, true);
    requireTrainsLikeDense(split, whole);
  }
}

TEST_CASE("tied embeddings under pp equal the dense step",
          "[numerics][pipeline]") {
  // The embedding lives on the first stage; the last receives it once a
  // step and sends the LM head's gradient back, summed before the update.
  requirePipelineParity(3, 2, 4, "gpipe", "cost", /*tied=*/true);
  requirePipelineParity(4, 4, 4, "1f1b", "layers", /*tied=*/true);
}

TEST_CASE("interleaved 1F1B (2 chunks a stage) equals the dense step",
          "[numerics][pipeline]") {
  requirePipelineParity(4, 2, 4, "interleaved");
  requirePipelineParity(6, 2, 2, "interleaved", "layers");
  requirePipelineParity(8, 4, 4, "interleaved", "layers");
  requirePipelineParity(5, 2, 4, "interleaved", "cost", /*tied=*/true);
}

TEST_CASE("evaluation and generation on pipeline plans equal the dense ones",
          "[numerics][pipeline]") {
  // Evaluation runs only the forward's instructions, but a stage posts the
  // forward's send and the backward's recv beside it as one group (1F1B's
  // pairs): the group must shrink to the taken send, or the evaluation
  // waits for a recv nobody sends.
  auto evaluate = [](const plan::Plan &plan) {
    auto runtime = makeRuntime(plan);
    REQUIRE(runtime->initParams(5).isOk());
    std::mt19937 rng(21);
    std::vector<int32_t> tokens(plan.batchSize * plan.seqLen);
    for (int32_t &id : tokens)
      id = static_cast<int32_t>(rng() % 128);
    REQUIRE(runtime->setBatch(tokens).isOk());
    std::vector<double> losses;
    for (int round = 0; round < 2; ++round) {
      auto loss = runtime->evalLoss();
      if (!loss.isOk())
        FAIL(loss.status().message());
      losses.push_back(*loss);
    }
    // Evaluating changed nothing: the step that follows trains as usual.
    auto stats = runtime->step();
    REQUIRE(stats.isOk());
    losses.push_back(stats->loss);
    return losses;
  };
  std::vector<double> dense = evaluate(compileTiny(4, 1, PipelineOptions{}));
  REQUIRE(dense[0] == dense[1]);
  REQUIRE(std::fabs(dense[2] - dense[0]) <= 1e-6 * dense[0]);
  struct Layout {
    int64_t stages, count;
    const char *schedule;
    int64_t dp = 1;
  };
  for (Layout layout : {Layout{2, 1, "gpipe"}, Layout{2, 4, "gpipe"},
                        Layout{2, 4, "1f1b"}, Layout{4, 8, "1f1b"},
                        Layout{2, 4, "interleaved"}, Layout{2, 2, "1f1b", 2}}) {
    INFO("pp " << layout.stages << ", " << layout.count << " microbatches, "
               << layout.schedule << ", dp " << layout.dp);
    PipelineOptions options = pipelineLayout(layout.stages, layout.schedule);
    options.keepGradients = false;
    options.dpSize = layout.dp;
    std::vector<double> piped = evaluate(compileTiny(4, layout.count, options));
    for (size_t k = 0; k < dense.size(); ++k)
      REQUIRE(std::fabs(piped[k] - dense[k]) <= 1e-5 * dense[k]);
  }
  // Generation reads the last stage's logits: the dense plan's samples.
  PipelineOptions options = pipelineLayout(2, "1f1b");
  options.keepGradients = false;
  std::vector<std::vector<int32_t>> samples;
  for (const plan::Plan &plan :
       {compilePlan("tiny.yaml", PipelineOptions{}, /*emitLogits=*/true),
        compilePlan("tiny.yaml", options, /*emitLogits=*/true)}) {
    auto runtime = makeRuntime(plan);
    REQUIRE(runtime->initParams(5).isOk());
    exec::GenerationOptions generation;
    generation.prompts = {{3, 50, 7}};
    generation.maxNewTokens = 20;
    auto generated = exec::generateTokens(*runtime, generation);
    if (!generated.isOk())
      FAIL(generated.status().message());
    samples.push_back((*generated)[0]);
  }
  REQUIRE(samples[1] == samples[0]);
}
