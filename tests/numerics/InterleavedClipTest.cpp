//===- InterleavedClipTest.cpp - clipping under interleaved 1F1B ----------===//
//
// Under the interleaved schedule each pp rank holds V model chunks (virtual
// stages r, r + P, ...). With `grad_clip` the rank sums the squares of all
// of its chunks' gradients in one sum_squares, one all_reduce over pp (and
// tp, dp, cp) adds the ranks' shares, and every update of every chunk reads
// that norm. tiny.yaml with L layers, a step of kBatch sequences in M
// microbatches and tiny-clip.run.yaml's optimizer (grad_clip 0.1, eps near
// the clipped gradients' size so that a wrong factor moves the parameters),
// on simulated ranks of the cpu backend, every runtime set up under the
// hazard check; against the dense step on the whole batch in one
// microbatch from the same weights on the same tokens, with -100 labels
// scattered: the norm and the loss of each of 5 steps, every gradient of
// the first step (kept, before clipping) and every parameter after the 5
// AdamW steps, each within 1e-5; and every step clips.
//
//===----------------------------------------------------------------------===//

#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>

using namespace sharc;
using namespace sharc::testing;

namespace {

constexpr int kSteps = 5;
constexpr int64_t kBatch = 8;
constexpr double kMaxNorm = 0.1;

/// tiny.yaml with `layers` layers, kBatch sequences in `count`
/// microbatches and clipping at kMaxNorm.
plan::Plan compileClipped(int64_t layers, int64_t count,
                          const PipelineOptions &layout, bool tied = false) {
  std::vector<std::pair<std::string, std::string>> edits{
      {"num_hidden_layers: 2", "num_hidden_layers: " + std::to_string(layers)},
      {"micro_batch_size: 2",
       "micro_batch_size: " + std::to_string(kBatch / count) +
           (count > 1 ? "\n  num_microbatches: " + std::to_string(count)
                      : std::string())},
      {"lr: 1.0e-3", "lr: 1.0e-3\n    eps: 1.0e-4\n    grad_clip: 0.1"}};
  if (tied)
    edits.push_back(
        {"vocab_size: 128", "vocab_size: 128\n  tie_word_embeddings: true"});
  return compileEdited("tiny.yaml", edits, layout);
}

/// `mode` with `size` ranks on its first axis, interleaved with `chunks`
/// chunks a stage, gradients kept.
PipelineOptions interleaved(const char *mode, int64_t size, int64_t chunks) {
  PipelineOptions layout;
  REQUIRE(applyModePreset(mode, size, layout));
  layout.ppSchedule = "interleaved";
  layout.ppChunks = chunks;
  layout.keepGradients = true;
  return layout;
}

/// Each stage's one norm: a sum_squares, one all_reduce of it over every
/// axis of more than one rank (pp among them), read by each of the stage's
/// updates, and an update for every parameter. A chunk left out of its
/// rank's norm, or a norm a chunk, would show here before the numbers.
void requireOneNormAStage(const plan::Plan &plan) {
  int64_t numStages = plan.axisSize(plan::kStageAxis);
  std::map<int64_t, int64_t> sumOf, normOf;
  std::map<int64_t, int> updates;
  for (const plan::Instruction &instr : plan.instructions) {
    INFO(instr.op << " on stage " << instr.stage);
    if (instr.op == "sum_squares") {
      REQUIRE(!sumOf.count(instr.stage));
      sumOf[instr.stage] = instr.results.at(0);
    } else if (instr.op == "all_reduce" && instr.operands.size() == 1 &&
               sumOf.count(instr.stage) &&
               instr.operands[0] == sumOf[instr.stage]) {
      REQUIRE(instr.getString("axis").find(plan::kStageAxis) !=
              std::string::npos);
      normOf[instr.stage] = instr.results.at(0);
    } else if (instr.op == "adamw") {
      REQUIRE(normOf.count(instr.stage));
      REQUIRE(instr.operands.size() == 5);
      REQUIRE(instr.operands[4] == normOf[instr.stage]);
      ++updates[instr.stage];
    }
  }
  REQUIRE(static_cast<int64_t>(normOf.size()) == numStages);
  int numUpdates = 0;
  for (auto [stage, count] : updates)
    numUpdates += count;
  REQUIRE(numUpdates == static_cast<int>(plan.params.size()));
}

void requireClipParity(int64_t layers, int64_t count,
                       const PipelineOptions &layout, bool tied = false) {
  INFO(layers << " layers, " << count << " microbatches, pp " << layout.ppSize
              << " x " << layout.ppChunks << " chunks (" << layout.ppBalance
              << "), tp " << layout.tpSize << ", dp " << layout.dpSize
              << ", cp " << layout.cpSize << (tied ? ", tied" : ""));
  plan::Plan piped = compileClipped(layers, count, layout, tied);
  REQUIRE(piped.axisSize(plan::kStageAxis) == layout.ppSize);
  requireOneNormAStage(piped);
  PipelineOptions dense;
  dense.keepGradients = true;
  TrainedRun split = trainOnRandomTokens(piped, kSteps, 5, 13,
                                         /*scatteredLabels=*/true);
  TrainedRun whole = trainOnRandomTokens(compileClipped(layers, 1, dense, tied),
                                         kSteps, 5, 13, true);
  for (int step = 0; step < kSteps; ++step) {
    INFO("step " << step << ": norm " << split.gradNorms[step] << " vs "
                 << whole.gradNorms[step] << ", loss " << split.losses[step]
                 << " vs " << whole.losses[step]);
    REQUIRE(whole.gradNorms[step] > 2 * kMaxNorm); // the clip scales
    // A chunk's share counted twice or left out is far beyond fp32 noise.
    REQUIRE(std::abs(split.gradNorms[step] - whole.gradNorms[step]) <=
            1e-5 * whole.gradNorms[step]);
    REQUIRE(std::abs(split.losses[step] - whole.losses[step]) <=
            1e-5 * std::abs(whole.losses[step]));
  }
  int numParams = static_cast<int>(whole.params.tensors.size());
  REQUIRE(compareTensors(split.firstOutputs, whole.firstOutputs, "grad_norm_sq",
                         1e-5) == 1);
  REQUIRE(compareTensors(split.firstOutputs, whole.firstOutputs,
                         "grad:", 1e-5) == numParams);
  REQUIRE(compareTensors(split.params, whole.params, "", 1e-5) == numParams);
}

} // namespace

TEST_CASE("the dense reference clips, and unclipped training differs",
          "[numerics][clip][pipeline]") {
  // The parity below could not tell a plan that ignores the norm if the
  // dense one did too: without grad_clip the same 5 steps end elsewhere.
  PipelineOptions dense;
  dense.keepGradients = true;
  TrainedRun clipped =
      trainOnRandomTokens(compileClipped(4, 1, dense), kSteps, 5, 13, true);
  plan::Plan plain =
      compileEdited("tiny.yaml",
                    {{"num_hidden_layers: 2", "num_hidden_layers: 4"},
                     {"micro_batch_size: 2", "micro_batch_size: 8"},
                     {"lr: 1.0e-3", "lr: 1.0e-3\n    eps: 1.0e-4"}},
                    dense);
  TrainedRun unclipped = trainOnRandomTokens(plain, kSteps, 5, 13, true);
  REQUIRE(std::isnan(unclipped.gradNorms[0]));
  double worst = 0;
  for (const plan::NamedTensor &tensor : clipped.params.tensors) {
    std::vector<double> want = valuesOf(tensor);
    std::vector<double> have = valuesOf(*unclipped.params.find(tensor.name));
    worst = std::max(worst, maxAbsError(have, want) / maxAbs(want));
  }
  INFO("largest relative change without clipping " << worst);
  REQUIRE(worst > 1e-3); // 100 times the parity tolerance
}

TEST_CASE("interleaved pp=2 (2 chunks a stage) clips like dense",
          "[numerics][clip][pipeline]") {
  requireClipParity(4, 4, interleaved("pp", 2, 2));
  requireClipParity(4, 2, interleaved("pp", 2, 2));
}

TEST_CASE("an uneven interleaved split clips like dense",
          "[numerics][clip][pipeline]") {
  // 5 or 7 layers over 4 virtual stages: one of them holds two layers
  // (three), the cost split puts the head's weight on the last.
  PipelineOptions layers = interleaved("pp", 2, 2);
  layers.ppBalance = "layers";
  requireClipParity(5, 4, layers);
  requireClipParity(7, 2, interleaved("pp", 2, 2));
  // 3 chunks a stage: 6 virtual stages over 6 layers.
  requireClipParity(6, 4, interleaved("pp", 2, 3));
}

TEST_CASE("interleaved pp=4 clips like dense", "[numerics][clip][pipeline]") {
  PipelineOptions layout = interleaved("pp", 4, 2);
  layout.ppBalance = "layers";
  requireClipParity(8, 4, layout);
  requireClipParity(9, 8, interleaved("pp", 4, 2));
}

TEST_CASE("a tied embedding under interleaving counts once in the norm",
          "[numerics][clip][pipeline]") {
  // It lives on virtual stage 0; the LM head on virtual stage P V - 1 sends
  // its gradient back there, where the one update reads the norm.
  requireClipParity(5, 4, interleaved("pp", 2, 2), /*tied=*/true);
}

TEST_CASE("tp=2, dp=2 and cp=2 with interleaved pp=2 clip like dense",
          "[numerics][clip][pipeline]") {
  // tp's shards count once and its replicated norms 1/2 a tp rank; dp and
  // cp hold every gradient alike (1/2 each); the all_reduce names every
  // axis, pp among them.
  PipelineOptions tp = interleaved("tp_pp", 2, 2);
  REQUIRE(tp.tpSize == 2);
  REQUIRE(tp.ppSize == 2);
  tp.sequenceParallel = true;
  requireClipParity(4, 4, tp);
  PipelineOptions dp = interleaved("pp", 2, 2);
  dp.dpSize = 2;
  dp.bucketBytes = 4096; // several buckets a stage
  requireClipParity(4, 4, dp);
  PipelineOptions cp = interleaved("pp_cp", 2, 2);
  REQUIRE(cp.cpSize == 2);
  requireClipParity(4, 2, cp);
}
