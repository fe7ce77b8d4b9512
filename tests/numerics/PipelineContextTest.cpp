//===- PipelineContextTest.cpp - pipeline x context parallel vs dense -----===//
//
// Pipeline stages whose ranks also split the sequence over cp (and heads
// over tp, the batch over dp), on simulated ranks of the cpu backend,
// against the dense plan from the same weights on the same tokens. With
// one microbatch, executor/Validation compares loss, logits and every
// gradient of one step within 1e-5 of the largest value and the parameters
// after 5 AdamW steps. With microbatches (1F1B, interleaved, which return
// no logits) every gradient of the first step within 1e-5 and the loss of
// every step, with -100 labels scattered so that microbatches and sequence
// blocks hold different numbers of valid labels. Every run sets up under
// the hazard check (Validation's and NumericsSupport's runtimes), so each
// plan's streams order every conflicting pair of instructions.
//
//===----------------------------------------------------------------------===//

#include "executor/Validation.h"
#include "planner/StageMemory.h"
#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace sharc;
using namespace sharc::testing;

namespace {

constexpr int64_t kBatch = 8;

/// `model` with `layers` layers and, when `count` is given, a step of
/// kBatch sequences in `count` microbatches (else the file's batch of 2).
plan::Plan compileLayers(const std::string &model, int64_t layers,
                         const PipelineOptions &pipeline, bool emitLogits,
                         int64_t count = 0) {
  std::vector<std::pair<std::string, std::string>> edits{
      {"num_hidden_layers: 2", "num_hidden_layers: " + std::to_string(layers)}};
  if (count > 0)
    edits.push_back(
        {"micro_batch_size: 2",
         "micro_batch_size: " + std::to_string(kBatch / count) +
             (count > 1 ? "\n  num_microbatches: " + std::to_string(count)
                        : std::string())});
  return compileEdited(model, edits, pipeline, emitLogits);
}

/// A preset with `size` ranks on its first axis, then cp's exchange and
/// whatever `adjust` changes; gradients kept for the comparison.
template <typename Adjust>
PipelineOptions layoutOf(const char *mode, int64_t size, const char *exchange,
                         Adjust adjust) {
  PipelineOptions layout;
  REQUIRE(applyModePreset(mode, size, layout));
  layout.cpComm = exchange;
  layout.keepGradients = true;
  adjust(layout);
  return layout;
}

PipelineOptions layoutOf(const char *mode, int64_t size, const char *exchange) {
  return layoutOf(mode, size, exchange, [](PipelineOptions &) {});
}

/// One microbatch: loss, logits, gradients and 5 AdamW steps as dense.
void requireValidates(const std::string &model, int64_t layers,
                      const PipelineOptions &layout, int64_t worldSize) {
  INFO(model << ", " << layers << " layers, pp " << layout.ppSize << " cp "
             << layout.cpSize << " (" << layout.cpComm << ") tp "
             << layout.tpSize << " dp " << layout.dpSize
             << (layout.sequenceParallel ? " sp" : ""));
  PipelineOptions dense;
  dense.keepGradients = true;
  plan::Plan sharded = compileLayers(model, layers, layout, true);
  REQUIRE(sharded.worldSize() == worldSize);
  REQUIRE(sharded.axisSize(plan::kStageAxis) == layout.ppSize);
  REQUIRE(sharded.axisSize("cp") == layout.cpSize);
  plan::Plan reference = compileLayers(model, layers, dense, true);
  auto report = exec::validateAgainstDense(sharded, reference, {});
  if (!report.isOk())
    FAIL(report.status().message());
  INFO(exec::formatReport(*report));
  REQUIRE(report->firstStep.size() == reference.params.size() + 2);
  REQUIRE(report->afterSteps.size() == reference.params.size());
  REQUIRE(report->passed);
}

/// kBatch sequences in `count` microbatches: every gradient of the first
/// step and the loss of 3 steps as the dense step on the whole batch in
/// one.
void requireMicrobatchParity(const std::string &model, int64_t layers,
                             int64_t count, const PipelineOptions &layout,
                             int64_t worldSize) {
  INFO(model << ", " << layers << " layers, " << count << " microbatches, "
             << layout.ppSchedule << " pp " << layout.ppSize << " cp "
             << layout.cpSize << " (" << layout.cpComm << ") tp "
             << layout.tpSize << " dp " << layout.dpSize);
  constexpr int kSteps = 3;
  plan::Plan sharded = compileLayers(model, layers, layout, false, count);
  REQUIRE(sharded.worldSize() == worldSize);
  PipelineOptions dense;
  dense.keepGradients = true;
  TrainedRun split = trainOnRandomTokens(sharded, kSteps, 5, 13,
                                         /*scatteredLabels=*/true);
  TrainedRun whole =
      trainOnRandomTokens(compileLayers(model, layers, dense, false, 1), kSteps,
                          5, 13, /*scatteredLabels=*/true);
  requireTrainsLikeDense(split, whole);
}

} // namespace

TEST_CASE("pp=2 x cp=2 with each exchange matches the dense model",
          "[numerics][pipeline][cp]") {
  // tiny: 2 KV heads, which a2a splits over cp 2; 3 layers split unevenly.
  // The split is the default, balanced (the ring round the whole ring).
  for (const char *exchange : {"a2a", "all_gather", "ring"}) {
    PipelineOptions layout = layoutOf("pp_cp", 2, exchange);
    REQUIRE(layout.cpSize == 2);
    requireValidates("tiny.yaml", 3, layout, 4);
  }
}

TEST_CASE("tp=2 x cp=2 x pp=2 (8 simulated ranks) matches the dense model",
          "[numerics][pipeline][cp]") {
  // tiny-tp4: each tp rank holds 4 of 8 heads and 2 of 4 KV heads, which
  // a2a splits over cp; under sp each rank holds 16 / 4 positions.
  for (const char *exchange : {"a2a", "all_gather"}) {
    PipelineOptions layout = layoutOf("tp_cp_pp", 2, exchange);
    REQUIRE(layout.cpSize == 2);
    REQUIRE(layout.ppSize == 2);
    requireValidates("tiny-tp4.yaml", 2, layout, 8);
    requireValidates("tiny-tp4.yaml", 3,
                     layoutOf("tp_cp_pp", 2, exchange,
                              [](PipelineOptions &l) {
                                l.sequenceParallel = l.vocabParallel = true;
                                l.recompute = "sp-allgather";
                              }),
                     8);
  }
}

TEST_CASE("pp=2 x cp=2 under 1F1B and interleaved equals the dense step",
          "[numerics][pipeline][cp][microbatch]") {
  for (const char *exchange : {"a2a", "all_gather", "ring"}) {
    auto schedule = [](const char *name) {
      return [name](PipelineOptions &l) {
        l.ppSchedule = name;
        if (l.ppSchedule == "interleaved")
          l.ppChunks = 2;
      };
    };
    requireMicrobatchParity(
        "tiny.yaml", 3, 4, layoutOf("pp_cp", 2, exchange, schedule("1f1b")), 4);
    // Interleaved: 4 layers as 2 x 2 chunks, M a multiple of P.
    requireMicrobatchParity(
        "tiny.yaml", 4, 4,
        layoutOf("pp_cp", 2, exchange, schedule("interleaved")), 4);
    requireMicrobatchParity("tiny-tp4.yaml", 3, 2,
                            layoutOf("tp_cp_pp", 2, exchange, schedule("1f1b")),
                            8);
  }
}

TEST_CASE("dp=2 x pp=2 x cp=2 equals the dense step",
          "[numerics][pipeline][cp][microbatch]") {
  // Each microbatch of 4 split over dp; the gradients summed over dp and
  // cp in one "dp,cp" sync, bucketed per stage.
  for (const char *exchange : {"a2a", "all_gather"})
    requireMicrobatchParity("tiny.yaml", 3, 2,
                            layoutOf("pp_cp", 2, exchange,
                                     [](PipelineOptions &l) {
                                       l.dpSize = 2;
                                       l.ppSchedule = "1f1b";
                                     }),
                            8);
}

TEST_CASE("1F1B under cp keeps min(P - r, M) microbatches of activations",
          "[numerics][pipeline][cp][memory]") {
  // As PipelineParityTest's count without cp: per stage r, bytes(M) = base
  // + M x unit, with unit one microbatch's saved activations (measured
  // from GPipe at M = 2 and 3 at a fixed micro_batch_size); at M = 8
  // GPipe holds 8 units and 1F1B min(P - r, 8). cp halves each unit, and
  // the exchanges' saved buffers (a2a's heads, all_gather's K and V) are
  // one microbatch's like the rest.
  constexpr int64_t kStages = 4;
  for (const char *exchange : {"a2a", "all_gather"}) {
    INFO("--cp-comm " << exchange);
    auto stageBytes = [&](int64_t count, const std::string &schedule) {
      PipelineOptions layout =
          layoutOf("pp_cp", kStages, exchange, [schedule](PipelineOptions &l) {
            l.ppSchedule = schedule;
            l.ppBalance = "layers";
            l.keepGradients = false;
          });
      plan::Plan plan = compileEdited(
          "tiny.yaml",
          {{"num_hidden_layers: 2", "num_hidden_layers: 4"},
           {"micro_batch_size: 2", "micro_batch_size: 2\n  num_microbatches: " +
                                       std::to_string(count)}},
          layout);
      REQUIRE(plan.worldSize() == 2 * kStages);
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
}
