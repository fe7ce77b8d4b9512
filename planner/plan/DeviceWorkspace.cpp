//===- DeviceWorkspace.cpp - what a GPU rank holds beside the plan --------===//

#include "planner/plan/DeviceWorkspace.h"

#include "kernels/AttentionRuns.h"
#include "kernels/DecodeAttention.h"
#include "kernels/RmsNorm.h"
#include "kernels/RmsNormRope.h"

#include <algorithm>
#include <optional>
#include <string>

namespace sharc::plan {
namespace {

int64_t numel(const Buffer &buffer) {
  int64_t n = 1;
  for (int64_t extent : buffer.shape)
    n *= extent;
  return n;
}

/// The scratch instruction `instr` may ask of its stream.
int64_t scratchFor(const Plan &plan, const Instruction &instr) {
  auto operand = [&](size_t i) -> const Buffer * {
    return i < instr.operands.size() ? &plan.buffers[instr.operands[i]]
                                     : nullptr;
  };
  if (instr.op == "rms_norm_grad" || instr.op == "rms_norm_grad_add")
    return kernels::kRmsNormGradMaxBlocks * instr.getInt("group_size", 0) * 4;
  if (instr.op == "rms_norm_rope_grad") {
    // One partial row of head_dim floats per block of the backward's
    // partition of x [S, B, h*D].
    const Buffer *x = operand(0);
    int64_t headDim = instr.getInt("head_dim", 0);
    if (!x || x->shape.size() != 3 || headDim <= 0)
      return 0;
    return kernels::rmsNormRopeGradBlocks(
               x->shape[0], x->shape[1] * (x->shape[2] / headDim)) *
           headDim * 4;
  }
  if (instr.op == "cross_entropy") {
    const Buffer *labels = operand(1);
    return labels ? numel(*labels) * 4 : 0;
  }
  if (instr.op == "decode_attention") {
    // The runs' fp32 partial outputs and statistics (q [T, B, Hq * D], k
    // [T, B, Hkv * D], k_cache [C, B, Hkv * D]).
    const Buffer *q = operand(0), *k = operand(1), *kCache = operand(3);
    int64_t headDim = instr.getInt("head_dim", 0);
    if (!q || !k || !kCache || q->shape.size() != 3 || k->shape.size() != 3 ||
        kCache->shape.empty() || headDim <= 0)
      return 0;
    // A bf16 prefill goes through cuDNN's SDPA: the rotated queries and the
    // counts, then cuDNN's workspace.
    if (kernels::decodePrefillOnCudnn(
            q->shape[0],
            q->dtype == DType::BF16 && kCache->dtype == DType::BF16, headDim))
      return kernels::decodePrefillStagingBytes(
                 q->shape[0], q->shape[1], q->shape[2] / headDim, headDim, 2) +
             kCudnnPrefillWorkspaceBytes;
    return kernels::decodeAttentionScratchBytes(
        q->shape[0], q->shape[1], q->shape[2] / headDim, k->shape[2] / headDim,
        headDim, kCache->shape[0]);
  }
  // cuDNN runs the bf16 backward only, and a block's only without dlse.
  bool block = instr.op == "attention_block_grad";
  if ((instr.op == "attention_grad" || (block && instr.operands.size() == 6))) {
    const Buffer *q = operand(0), *k = operand(1);
    if (!q || !k || q->dtype != DType::BF16)
      return 0;
    std::string axis = instr.getString("position_axis");
    int64_t bytes = cudnnAttentionGradBytes(
        {.q = q->shape,
         .k = k->shape,
         .headDim = instr.getInt("head_dim", 0),
         .axisSize = axis.empty() ? 1 : plan.axisSize(axis),
         .kvShift = instr.getInt("kv_shift", 0),
         .balanced = instr.getString("position_split") == "balanced",
         .ringBlock = block});
    // A workspace the plan places in its activation arena needs none.
    bool planned = instr.results.size() > 3 &&
                   plan.buffers[instr.results[3]].numBytes >= bytes;
    return planned ? 0 : bytes;
  }
  return 0;
}

} // namespace

int64_t cudnnAttentionGradBytes(const AttentionGradShape &shape) {
  if (shape.q.size() != 3 || shape.k.size() != 3 || shape.headDim <= 0 ||
      shape.axisSize <= 0)
    return 0;
  kernels::AttentionExtent extent{.seqLen = shape.q[0],
                                  .batch = shape.q[1],
                                  .numHeads = shape.q[2] / shape.headDim,
                                  .numKvHeads = shape.k[2] / shape.headDim,
                                  .headDim = shape.headDim,
                                  .kvSeqLen = shape.k[0]};
  auto split = shape.balanced ? kernels::SequenceSplit::Balanced
                              : kernels::SequenceSplit::Contiguous;
  int64_t most = 0;
  for (int64_t coord = 0; coord < shape.axisSize; ++coord) {
    extent.queries =
        kernels::rowPositions(split, coord, shape.axisSize, extent.seqLen);
    if (shape.ringBlock) {
      std::optional<int64_t> keys =
          kernels::ringKeyBlock(split, coord, shape.axisSize, shape.kvShift);
      if (!keys)
        continue;
      extent.keys =
          kernels::rowPositions(split, *keys, shape.axisSize, extent.kvSeqLen);
    }
    auto args = kernels::withExtent(kernels::AttentionGradArgs{}, extent);
    auto runs = kernels::queryRuns(args.queries(), args.seqLen,
                                   args.keyPositions(), args.keys());
    most =
        std::max(most, kernels::cudnnAttentionGradRunBytes(
                           runs, extent.seqLen, extent.batch, extent.numHeads,
                           extent.numKvHeads, extent.headDim));
  }
  return most;
}

namespace {

/// NcclCommunicator::allToAll packs its pieces when the split dimension is
/// not the outermost and unpacks them when the concatenated one is not:
/// the input's bytes for each.
int64_t allToAllStagingBytes(const Plan &plan, const Instruction &instr) {
  const Buffer &in = plan.buffers[instr.operands[0]];
  auto rank = static_cast<int64_t>(in.shape.size());
  int64_t split = instr.getInt("split_dim", 0);
  int64_t concat = instr.getInt("concat_dim", 0);
  auto outerBefore = [&](int64_t dim) {
    int64_t outer = 1;
    for (int64_t d = 0; d < std::min(dim, rank); ++d)
      outer *= in.shape[d];
    return outer;
  };
  // The split divides one dimension; an extent of 1 before either
  // dimension leaves it outermost all the same.
  int64_t pack = outerBefore(split) > 1 ? in.numBytes : 0;
  int64_t unpack = outerBefore(concat) > 1 ? in.numBytes : 0;
  return pack + unpack;
}

} // namespace

int64_t collectiveStagingBytes(const Plan &plan, int64_t stream) {
  int64_t bytes = 0;
  for (const Instruction &instr : plan.instructions) {
    if (instr.stream != stream)
      continue;
    if (instr.op == "all_to_all" && instr.operands.size() == 1) {
      bytes = std::max(bytes, allToAllStagingBytes(plan, instr));
      continue;
    }
    bool gather = instr.op == "all_gather";
    if (!gather && instr.op != "reduce_scatter")
      continue;
    if (instr.operands.size() != 1 || instr.results.size() != 1)
      continue;
    const Buffer &in = plan.buffers[instr.operands[0]];
    const Buffer &big =
        plan.buffers[gather ? instr.results[0] : instr.operands[0]];
    int64_t dim = instr.getInt("dim", 0), outer = 1;
    for (int64_t d = 0; d < dim && d < static_cast<int64_t>(in.shape.size());
         ++d)
      outer *= in.shape[d];
    if (outer > 1)
      bytes = std::max(bytes, big.numBytes);
  }
  return bytes;
}

bool runsGemm(const Instruction &instr) {
  return instr.op == "matmul" || instr.op == "matmul_add" ||
         instr.op == "matmul_dgrad" || instr.op == "matmul_dgrad_add" ||
         instr.op == "matmul_wgrad";
}

bool streamRunsGemm(const Plan &plan, int64_t stream) {
  return std::any_of(plan.instructions.begin(), plan.instructions.end(),
                     [&](const Instruction &instr) {
                       return instr.stream == stream && runsGemm(instr);
                     });
}

DeviceWorkspace predictDeviceWorkspace(const Plan &plan) {
  DeviceWorkspace workspace;
  int64_t streams = std::max<int64_t>(plan.numStreams, 1);
  std::vector<int64_t> scratch(static_cast<size_t>(streams), 0);
  for (const Instruction &instr : plan.instructions) {
    auto s =
        static_cast<size_t>(std::clamp<int64_t>(instr.stream, 0, streams - 1));
    scratch[s] = std::max(scratch[s], scratchFor(plan, instr));
  }
  for (int64_t bytes : scratch)
    workspace.scratchBytes += bytes;
  for (int64_t s = 0; s < streams; ++s) {
    if (streamRunsGemm(plan, s))
      workspace.gemmBytes += kGemmWorkspaceBytes;
    workspace.stagingBytes += collectiveStagingBytes(plan, s);
  }
  return workspace;
}

} // namespace sharc::plan
