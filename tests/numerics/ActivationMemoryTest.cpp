//===- ActivationMemoryTest.cpp - the arena against the analytic count ----===//
//
// Korthikanti et al. (2022) count the activations a Transformer layer keeps
// for its backward. Adapted to this model (GQA, q/k norms before RoPE,
// SwiGLU, attention keeping only the log-sum-exp, the cross entropy and
// head outside the layers), one layer keeps per token, with e bytes per
// element, hidden H, q and kv widths Q = Hq*D and K = Hkv*D, intermediate
// I and t tensor-parallel ranks:
//   the residual stream before each of its two norms (2 x H), the two norm
//   outputs the column GEMMs read for their weight gradients (2 x H), q
//   before its norm and after RoPE and the attention output (3 x Q/t), k
//   likewise and v (3 x K/t), gate, up and their SwiGLU (3 x I/t), in e
//   bytes, and the f32 log-sum-exp of each local head (4 x Hq/t bytes).
// Sequence parallelism splits the residual stream (H/t) but keeps the
// gathered norm outputs whole; its recompute keeps the local norm outputs
// (H/t) and gathers them again in the backward. The plan's arena grows by
// exactly one layer's worth per layer: the difference between 3 and 2
// layers must match within a few percent (buffer alignment).
//
// Full recompute (`--recompute full`) keeps only each layer's input, the
// residual stream (H, or H/t under sequence parallelism), and runs the
// layer's forward again in its backward: a layer then adds that alone.
// Selective recompute (`--recompute selective`) re-runs the norms, rope
// and SwiGLU: a layer keeps neither the norm outputs nor q and k after
// RoPE nor the SwiGLU (under sp the local norm outputs stay, for the
// re-gather): 2 x H (2 x H/t + 2 x H/t under sp) + (2 Q + 2 K + 2 I)/t
// elements and the log-sum-exp.
//
//===----------------------------------------------------------------------===//

#include "tests/numerics/NumericsSupport.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

using namespace sharc;
using namespace sharc::testing;

namespace {

constexpr int64_t kHidden = 256, kHeads = 8, kKvHeads = 4, kHeadDim = 32;
constexpr int64_t kIntermediate = 832; // ceil(256 pi / 64) * 64
constexpr int64_t kSeq = 128, kBatch = 4, kElementBytes = 2; // bf16

int64_t arenaBytes(int64_t layers, const PipelineOptions &layout) {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("sharc-activation-" + std::to_string(layers) + ".yaml");
  std::ofstream(path) << "model:\n  name: memory\n  hidden_size: " << kHidden
                      << "\n  num_hidden_layers: " << layers
                      << "\n  num_attention_heads: " << kHeads
                      << "\n  num_key_value_heads: " << kKvHeads
                      << "\n  vocab_size: 512\nrun:\n  seq_len: " << kSeq
                      << "\n  micro_batch_size: " << kBatch
                      << "\n  dtype: bfloat16\n";
  plan::Plan plan = compilePlanFile(path.string(), layout);
  std::filesystem::remove(path);
  return plan.regionBytes.at(plan::Region::Activation);
}

/// Bytes one layer keeps, per the count in the file comment.
double analyticLayerBytes(int64_t t, bool sequenceParallel, bool recompute) {
  double h = kHidden, q = kHeads * kHeadDim, k = kKvHeads * kHeadDim;
  double residual = sequenceParallel ? 2 * h / t : 2 * h;
  double normOutputs = recompute ? 2 * h / t : 2 * h;
  double perToken = kElementBytes * (residual + normOutputs +
                                     (3 * q + 3 * k + 3 * kIntermediate) / t) +
                    4.0 * kHeads / t;
  return perToken * kSeq * kBatch;
}

void check(const std::string &mode, int64_t t, bool sp, bool recompute) {
  PipelineOptions layout;
  REQUIRE(applyModePreset(mode, t, layout));
  REQUIRE(layout.recompute == (recompute ? "sp-allgather" : "none"));
  double measured =
      static_cast<double>(arenaBytes(3, layout) - arenaBytes(2, layout));
  double expected = analyticLayerBytes(t, sp, recompute);
  INFO(mode << ": one layer adds " << measured << " bytes to the arena, "
            << "the analytic count is " << expected);
  REQUIRE(std::fabs(measured - expected) <= 0.03 * expected);
}

} // namespace

TEST_CASE("activation memory per layer matches the analytic count",
          "[numerics][memory]") {
  check("dense", 1, false, false);
  check("tp", 2, false, false);
  check("tp_sp", 2, true, false);
  check("tp_sp_async", 2, true, true);
  check("tp_vp", 2, false, false);
  check("tp_sp_async_vp", 2, true, true);
  check("tp_sp_async", 4, true, true);
}

namespace {

/// Under `policy`, what one more layer adds to the arena against
/// `perToken(h, q, k, sequenceParallel, t)` bytes a token, in dense, tp and
/// sp layouts.
void checkRecompute(const std::string &policy,
                    const std::function<double(double, double, double, bool,
                                               double)> &perToken) {
  double h = kHidden, q = kHeads * kHeadDim, k = kKvHeads * kHeadDim;
  for (auto [mode, t] : {std::pair<std::string, int64_t>{"dense", 1},
                         {"tp", 2},
                         {"tp_sp", 2},
                         {"tp_sp_async_vp", 2},
                         {"tp_sp", 4}}) {
    PipelineOptions layout;
    REQUIRE(applyModePreset(mode, t, layout));
    layout.recompute = policy;
    double measured =
        static_cast<double>(arenaBytes(3, layout) - arenaBytes(2, layout));
    double expected =
        perToken(h, q, k, layout.sequenceParallel, static_cast<double>(t)) *
        kSeq * kBatch;
    INFO(policy << ", " << mode << " tp " << t << ": one layer adds "
                << measured << " bytes to the arena, the count is "
                << expected);
    REQUIRE(std::fabs(measured - expected) <= 0.03 * expected);
  }
}

} // namespace

TEST_CASE("under full recompute a layer keeps its input alone",
          "[numerics][memory]") {
  checkRecompute("full", [](double h, double, double, bool sp, double t) {
    return kElementBytes * (sp ? h / t : h);
  });
}

TEST_CASE("under selective recompute a layer keeps its GEMMs' outputs",
          "[numerics][memory]") {
  checkRecompute(
      "selective", [](double h, double q, double k, bool sp, double t) {
        return kElementBytes * ((sp ? 4 * h / t : 2 * h) +
                                (2 * q + 2 * k + 2 * kIntermediate) / t) +
               4.0 * kHeads / t;
      });
}
