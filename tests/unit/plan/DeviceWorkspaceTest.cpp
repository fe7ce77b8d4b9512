//===- DeviceWorkspaceTest.cpp - the GPU workspace a plan predicts --------===//
//
// predictDeviceWorkspace against the sizes worked out by hand from the rules
// DeviceWorkspace.h states; the GPU session prints the prediction beside
// what the CUDA backend allocated for the same plans.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/DeviceWorkspace.h"
#include "kernels/DecodeAttention.h"
#include "planner/plan/PlanIO.h"

#include <catch2/catch.hpp>

using namespace sharc;
using namespace sharc::plan;

namespace {

/// What predictDeviceWorkspace says of the plan `text` (format checks only).
DeviceWorkspace predictedFor(const std::string &text) {
  Result<Plan> plan = parsePlan(text, "plan.yaml", PlanChecks::FormatOnly);
  INFO(plan.status().message());
  REQUIRE(plan);
  return predictDeviceWorkspace(*plan);
}

/// A cp 2 plan of q [32, 1, 32] bf16 (2 heads of 16), k [`keys`, 1, 16]
/// and lse [1, 2, 32] (buffers 0, 1, 2) running `instruction`.
std::string cpPlan(int64_t keys, const std::string &instruction) {
  return R"(sharc_plan: 1
mesh: [{name: cp, size: 2}]
num_streams: 1
num_events: 0
regions: {activation: 16384}
buffers:
  - {id: 0, name: "q", region: activation, offset: 0, bytes: 2048, dtype: bf16, shape: [32, 1, 32]}
  - {id: 1, name: "k", region: activation, offset: 2048, bytes: )" +
         std::to_string(keys * 32) + ", dtype: bf16, shape: [" +
         std::to_string(keys) + R"(, 1, 16]}
  - {id: 2, name: "lse", region: activation, offset: 4096, bytes: 256, dtype: f32, shape: [1, 2, 32]}
instructions:
  - )" + instruction +
         "\n";
}

/// Two streams: an rms_norm_grad (group 4), an attention_grad in bf16 and
/// a matmul on stream 0; a cross_entropy over 8 tokens and an all_gather
/// along the inner dimension of a [2, 4] tensor on stream 1.
const std::string kPlan = R"(sharc_plan: 1
mesh: [{name: dp, size: 1}, {name: tp, size: 2}]
num_streams: 2
num_events: 0
regions: {param: 16, activation: 1024}
buffers:
  - {id: 0, name: "w", region: param, offset: 0, bytes: 16, dtype: f32, shape: [4]}
  - {id: 1, name: "x", region: activation, offset: 0, bytes: 32, dtype: f32, shape: [2, 4]}
  - {id: 2, name: "dy", region: activation, offset: 32, bytes: 32, dtype: f32, shape: [2, 4]}
  - {id: 3, name: "dx", region: activation, offset: 64, bytes: 32, dtype: f32, shape: [2, 4]}
  - {id: 4, name: "dw", region: activation, offset: 96, bytes: 16, dtype: f32, shape: [4]}
  - {id: 5, name: "logits", region: activation, offset: 112, bytes: 96, dtype: f32, shape: [8, 3]}
  - {id: 6, name: "labels", region: activation, offset: 208, bytes: 32, dtype: i32, shape: [8]}
  - {id: 7, name: "loss", region: activation, offset: 240, bytes: 4, dtype: f32, shape: [1]}
  - {id: 8, name: "gathered", region: activation, offset: 256, bytes: 64, dtype: f32, shape: [2, 8]}
  - {id: 9, name: "q", region: activation, offset: 320, bytes: 128, dtype: bf16, shape: [4, 1, 16]}
  - {id: 10, name: "lse", region: activation, offset: 448, bytes: 16, dtype: f32, shape: [1, 1, 4]}
  - {id: 11, name: "w2", region: param, offset: 0, bytes: 16, dtype: f32, shape: [1, 4]}
  - {id: 12, name: "y", region: activation, offset: 464, bytes: 8, dtype: f32, shape: [2, 1]}
instructions:
  - {op: rms_norm_grad, in: [1, 0, 2], out: [3, 4], attrs: {eps: 1e-06, group_size: 4}}
  - {op: cross_entropy, in: [5, 6], out: [7], stream: 1}
  - {op: all_gather, in: [1], out: [8], stream: 1, attrs: {axis: "tp", dim: 1}}
  - {op: attention_grad, in: [9, 9, 9, 9, 10, 9], out: [9, 9, 9], attrs: {head_dim: 16}}
  - {op: matmul, in: [1, 11], out: [12]}
)";

} // namespace

TEST_CASE("the GPU workspace follows the plan's streams, kernels and "
          "gathers",
          "[plan]") {
  Result<Plan> plan = parsePlan(kPlan, "plan.yaml", PlanChecks::FormatOnly);
  INFO(plan.status().message());
  REQUIRE(plan);
  DeviceWorkspace workspace = predictDeviceWorkspace(*plan);
  // Only stream 0 runs a GEMM: stream 1 gets no cuBLASLt workspace.
  CHECK(streamRunsGemm(*plan, 0));
  CHECK_FALSE(streamRunsGemm(*plan, 1));
  CHECK(workspace.gemmBytes == kGemmWorkspaceBytes);
  // Stream 0: max(512 blocks x 4 columns x 4 bytes, cuDNN's 64 q
  // elements x 4 + 4 lse x 4 + 256, no GQA); stream 1: 8 tokens x 4 bytes.
  CHECK(workspace.scratchBytes == 512 * 4 * 4 + 8 * 4);
  // The gather along dim 1 of [2, 4] stages its 64-byte result on its own
  // stream; stream 0 runs no collective and stages nothing.
  CHECK(collectiveStagingBytes(*plan, 1) == 64);
  CHECK(collectiveStagingBytes(*plan, 0) == 0);
  CHECK(workspace.stagingBytes == 64);
  CHECK(workspace.totalBytes() ==
        workspace.gemmBytes + workspace.scratchBytes + workspace.stagingBytes);
}

TEST_CASE("a workspace the plan places takes attention_grad's scratch off "
          "its stream",
          "[plan]") {
  // q [64, 1, 32] bf16 (2 heads of 16), k [64, 1, 16] (one KV head: GQA)
  // and lse [1, 2, 64]: cuDNN asks 2048 x 4 for dq, 64 keys x 32 columns x
  // 4 for dk and dv per query head, 128 x 4 for the lse and 256: 17152.
  auto planWith = [](const std::string &results, int64_t workspaceFloats) {
    std::string text = R"(sharc_plan: 1
mesh: [{name: dp, size: 1}]
num_streams: 1
num_events: 0
regions: {activation: 32768}
buffers:
  - {id: 0, name: "q", region: activation, offset: 0, bytes: 4096, dtype: bf16, shape: [64, 1, 32]}
  - {id: 1, name: "lse", region: activation, offset: 4096, bytes: 512, dtype: f32, shape: [1, 2, 64]}
  - {id: 2, name: "ws", region: activation, offset: 8192, bytes: BYTES, dtype: f32, shape: [FLOATS]}
  - {id: 3, name: "k", region: activation, offset: 4608, bytes: 2048, dtype: bf16, shape: [64, 1, 16]}
instructions:
  - {op: attention_grad, in: [0, 3, 3, 0, 1, 0], out: RESULTS, attrs: {head_dim: 16}}
)";
    text.replace(text.find("BYTES"), 5, std::to_string(workspaceFloats * 4));
    text.replace(text.find("FLOATS"), 6, std::to_string(workspaceFloats));
    text.replace(text.find("RESULTS"), 7, results);
    return predictedFor(text);
  };
  CHECK(cudnnAttentionGradBytes(
            {.q = {64, 1, 32}, .k = {64, 1, 16}, .headDim = 16}) == 17152);
  // Without GQA cuDNN keeps no per-head dk and dv.
  CHECK(cudnnAttentionGradBytes(
            {.q = {64, 1, 32}, .k = {64, 1, 32}, .headDim = 16}) == 8960);
  // Without a workspace result the stream's scratch holds cuDNN's.
  CHECK(planWith("[0, 3, 3]", 4288).scratchBytes == 17152);
  // With one of cuDNN's size, the stream needs none.
  CHECK(planWith("[0, 3, 3, 2]", 4288).scratchBytes == 0);
  // One too small is passed over: the backend falls back to the scratch.
  CHECK(planWith("[0, 3, 3, 2]", 4287).scratchBytes == 17152);
}

TEST_CASE("a context-parallel attention_grad counts every key; a balanced "
          "one also stages a call's dk and dv",
          "[plan]") {
  // q [32, 1, 32] (a rank's half of 64 rows, 2 heads of 16) against k
  // [64, 1, 16], lse [1, 2, 32]. Contiguous, rank 1's one call sees every
  // key: 1024 x 4 for dq, 64 keys x 32 x 4 for dk and dv per query head,
  // 64 x 4 and 256: 12800.
  AttentionGradShape cp{
      .q = {32, 1, 32}, .k = {64, 1, 16}, .headDim = 16, .axisSize = 2};
  CHECK(cudnnAttentionGradBytes(cp) == 12800);
  // Balanced, rank 0's chunks 0 and 3 are two calls of 16 rows: the first
  // call's dk and dv staged (16 keys x 16 x 2 bytes each), its 16 lse rows
  // packed (128 bytes, to 256), then the second call's 512 x 4 for dq,
  // 2048 x 4 for dk and dv per query head, 32 x 4 and 256. Rank 1's chunks
  // 1 and 2 are one call of 32 rows over 48 keys: 10752.
  cp.balanced = true;
  CHECK(cudnnAttentionGradBytes(cp) ==
        2 * 512 + 256 + 512 * 4 + 2048 * 4 + 32 * 4 + 256);
  cp.axisSize = 1; // one rank: plain causal attention over 32 of the keys
  CHECK(cudnnAttentionGradBytes(cp) == 1024 * 4 + 32 * 32 * 4 + 64 * 4 + 256);
  auto scratch = [](const std::string &split) {
    return predictedFor(
               cpPlan(64, "{op: attention_grad, in: [0, 1, 1, 0, 2, 0], out: "
                          "[0, 1, 1], attrs: {head_dim: 16, position_axis: "
                          "\"cp\"" +
                              split + "}}"))
        .scratchBytes;
  };
  CHECK(scratch(", position_split: \"balanced\"") == 11904);
  CHECK(scratch("") == 12800);
}

TEST_CASE("a ring attention block's backward without dlse takes cuDNN's "
          "workspace on its stream",
          "[plan]") {
  // q [32, 1, 32] (2 heads of 16), the key block k [32, 1, 16], cp 2, the
  // block one step round the ring (kv_shift 1).
  auto scratch = [](const std::string &in, const std::string &split) {
    return predictedFor(
               cpPlan(32, "{op: attention_block_grad, in: " + in +
                              ", out: [0, 1, 1], attrs: {head_dim: "
                              "16, position_axis: \"cp\", kv_shift: 1" +
                              split + "}}"))
        .scratchBytes;
  };
  // Contiguous: rank 1's queries see all of rank 0's keys, one unmasked
  // call: 1024 x 4 for dq, 32 keys x 32 x 4 per query head, 64 x 4, 256.
  CHECK(scratch("[0, 1, 1, 0, 2, 0]", "") == 4096 + 4096 + 256 + 256);
  // Balanced: rank 0's chunk 0 sees none of chunks 1 and 2, its chunk 3
  // all of them: one call of 16 rows, whose lse rows are packed (128
  // bytes, to 256): 256 + 2048 + 4096 + 128 + 256 (rank 1's one call of
  // 32 rows over chunk 0's 16 keys takes 6656).
  CHECK(scratch("[0, 1, 1, 0, 2, 0]", ", position_split: \"balanced\"") ==
        256 + 2048 + 4096 + 128 + 256);
  // With dlse the block runs on sharc's kernel, which needs none.
  CHECK(scratch("[0, 1, 1, 0, 2, 0, 2]", "") == 0);
}

TEST_CASE("decode_attention's runs of chunks take scratch by the cache's "
          "length",
          "[plan]") {
  // q [T=2, B=3, 4 heads x 8], k/v [2, 3, 2 x 8], caches of 130 positions:
  // 3 chunks of 64, a run each (far under the scratch cap), each head's 8
  // columns and 2 statistics in fp32.
  const std::string text = R"(sharc_plan: 1
mesh: [{name: dp, size: 1}]
num_streams: 1
num_events: 0
regions: {input: 24, activation: 768, cache: 24960}
buffers:
  - {id: 0, name: "q", region: activation, offset: 0, bytes: 768, dtype: f32, shape: [2, 3, 32]}
  - {id: 1, name: "k", region: activation, offset: 0, bytes: 384, dtype: f32, shape: [2, 3, 16]}
  - {id: 2, name: "k_cache", region: cache, offset: 0, bytes: 24960, dtype: f32, shape: [130, 3, 16]}
  - {id: 3, name: "prefill_positions", region: input, offset: 0, bytes: 24, dtype: i32, shape: [2, 3]}
instructions:
  - {op: decode_attention, in: [0, 1, 1, 2, 2, 3], out: [0], attrs: {head_dim: 8, theta: 10000.0}}
)";
  CHECK(predictedFor(text).scratchBytes == 2 * 3 * 4 * 3 * (8 + 2) * 4);
  // A cache of one chunk: one run, finished without a merge.
  CHECK(kernels::decodeAttentionScratchBytes(1, 1, 8, 4, 96, 64) == 0);
  // In bf16 the prefill goes through cuDNN: the rotated queries (384
  // bytes, to 512) and two int32 [3] counts, 256 bytes each, then cuDNN's
  // 256 bytes.
  std::string bf16 = text;
  for (auto [from, to] :
       {std::pair<std::string, std::string>{"activation: 768",
                                            "activation: 384"},
        {"cache: 24960", "cache: 12480"},
        {"bytes: 768, dtype: f32", "bytes: 384, dtype: bf16"},
        {"bytes: 384, dtype: f32", "bytes: 192, dtype: bf16"},
        {"bytes: 24960, dtype: f32", "bytes: 12480, dtype: bf16"}}) {
    REQUIRE(bf16.find(from) != std::string::npos);
    bf16.replace(bf16.find(from), from.size(), to);
  }
  CHECK(predictedFor(bf16).scratchBytes == 512 + 2 * 256 + 256);
  CHECK(kernels::decodePrefillStagingBytes(2, 3, 4, 8, 2) == 1024);
}

TEST_CASE("the decode grid takes a chunk a run until the card is full or "
          "the scratch cap",
          "[plan]") {
  // Decode, 1 sample, 8 heads over 4: 4 tiles, a run a chunk.
  kernels::DecodeGrid decode = kernels::decodeGrid(1, 1, 8, 4, 96, 4096);
  CHECK(decode.tiles == 4);
  CHECK(decode.chunksPerSplit == 1);
  CHECK(decode.splits == 64);
  // A prefill of 512 rows: 128 tiles, so 16 runs fill kDecodeTargetBlocks
  // (2048): the 64 chunks go in runs of 4.
  kernels::DecodeGrid prefill = kernels::decodeGrid(512, 1, 8, 4, 96, 4096);
  CHECK(prefill.rows == 16);
  CHECK(prefill.tiles == 128);
  CHECK(prefill.chunksPerSplit == 4);
  CHECK(prefill.splits == 16);
  CHECK(kernels::decodeAttentionScratchBytes(512, 1, 8, 4, 96, 4096) ==
        512 * 8 * 16 * 98 * 4);
  // At head dim 256 the 64 MiB cap comes first: 512 rows x 16 heads take
  // 8.5 MB of partials a run, 7 runs (the card would take 8).
  kernels::DecodeGrid wide = kernels::decodeGrid(512, 1, 16, 1, 256, 4096);
  CHECK(wide.tiles == 256);
  CHECK(wide.chunksPerSplit == 10);
  CHECK(wide.splits == 7);
  // A 64-row prefill over a 4096-position cache: 16 tiles, a run a chunk.
  CHECK(kernels::decodeGrid(64, 1, 8, 4, 96, 4096).chunksPerSplit == 1);
  // KernelsCudaDecodeTest's forced runs: 313 chunks in runs of 2; its
  // second prefill case, 2 samples x 2 KV heads x 8 row tiles in runs of 4.
  CHECK(kernels::decodeGrid(1, 1, 2, 1, 64, 20000, 2).splits == 157);
  kernels::DecodeGrid forced = kernels::decodeGrid(64, 2, 8, 2, 96, 2000, 4);
  CHECK(forced.rows == 8);
  CHECK(forced.tiles == 32);
  CHECK(forced.splits == 8);
  // One chunk: no runs to merge, no scratch.
  CHECK(kernels::decodeGrid(3, 3, 8, 4, 96, 37).splits == 1);
  CHECK(kernels::decodeAttentionScratchBytes(3, 3, 8, 4, 96, 37) == 0);
}
