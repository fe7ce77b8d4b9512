//===- RingAttentionOps.cpp - ring attention instructions ----------------===//
//
// ring_shift (axis, offset, first, wrap: a block to the neighbour on a
// chain of the axis' ranks, or around the whole ring), attention_block /
// attention_block_grad (head_dim, position_axis, kv_shift, position_split:
// this rank's query block on the key block coord - kv_shift, mod the axis
// size under the balanced split) and lse_merge / lse_merge_grad (no
// attributes);
// ir/SharcRingOps.td, kernels/Attention.h and kernels/LseMerge.h state the
// math. Which ranks send and receive and which blocks no query sees follow
// from the rank's coordinate, so bind decides them once: a step only
// launches.
//
//===----------------------------------------------------------------------===//

#include "executor/AttentionViews.h"
#include "executor/OpTable.h"

#include "kernels/Attention.h"
#include "kernels/Elementwise.h"
#include "kernels/LseMerge.h"

#include <tuple>
#include <utility>

namespace sharc::exec {

using namespace opcheck;

namespace {

/// Mailbox tag of the ring's messages on the cpu (NCCL has none): apart
/// from pipeline transfers' tags, which count from 0.
constexpr int64_t kRingTag = int64_t(1) << 40;

/// A launch filling `ref` with `value` (a block no query of this rank sees).
Result<Launch> fillLaunch(const OpEnv &env, const TensorRef &ref,
                          double value) {
  return launchKernel(env,
                      kernels::FillArgs{.out = ref.view(),
                                        .numel = ref.numel(),
                                        .value = value},
                      SHARC_KERNELS(fill));
}

/// The launches in order, as one.
Result<Launch> inSequence(std::vector<Result<Launch>> parts) {
  std::vector<Launch> launches;
  for (Result<Launch> &part : parts) {
    if (!part)
      return part.status();
    launches.push_back(std::move(*part));
  }
  return Launch([launches = std::move(launches)](const LaunchContext &ctx) {
    for (const Launch &launch : launches)
      SHARC_TRY(launch(ctx));
    return Status::ok();
  });
}

Result<Launch> bindRingShift(const OpCall &c, const OpEnv &env) {
  std::string axis = c.instr->getString("axis");
  int64_t offset = c.instr->getInt("offset"), first = c.instr->getInt("first");
  int64_t wrap = c.instr->getInt("wrap", 0);
  int64_t size = env.axisSize(axis), coord = env.coord(axis);
  if (offset != 1 && offset != -1)
    return Status::invalidInput("offset " + std::to_string(offset) +
                                " is not 1 or -1");
  if (first < 0 || first >= size)
    return Status::invalidInput("first " + std::to_string(first) +
                                " is not a rank of " + axis);
  if (wrap != 0 && wrap != 1)
    return Status::invalidInput("wrap " + std::to_string(wrap) +
                                " is not 0 or 1");
  if (wrap && first != 0)
    return Status::invalidInput("a wrapping ring_shift takes first 0, got " +
                                std::to_string(first));
  const TensorRef &x = c.operands[0], &y = c.results[0];
  SHARC_TRY(isFloat(x, "x"));
  SHARC_TRY(dtypeIs(y, x.dtype(), "y"));
  SHARC_TRY(sameShape(y, x, "y"));
  // The whole ring under wrap (the balanced split: every rank needs every
  // block), else the chain from `first`.
  auto onChain = [&](int64_t rank) {
    return wrap || (rank >= first && rank < size);
  };
  auto peer = [&](int64_t rank) { return (rank + size) % size; };
  bool sends = onChain(coord) && onChain(coord + offset);
  bool receives = onChain(coord) && onChain(coord - offset);
  int64_t sendPeer = peer(coord + offset), recvPeer = peer(coord - offset);
  int64_t numBytes = x.numel() * dtypeSize(x.dtype());
  std::vector<Result<Launch>> parts;
  if (!receives) // what no neighbour sends here is zero
    parts.push_back(fillLaunch(env, y, 0.0));
  if (sends || receives)
    parts.push_back(Launch([=](const LaunchContext &context) -> Status {
      // One group: each neighbour both sends and receives, and NCCL's
      // blocking point-to-point calls would otherwise wait on each other.
      SHARC_TRY(context.comm->beginTransfers());
      Status status = Status::ok();
      if (sends)
        status = context.comm->send(x.data, numBytes, sendPeer, kRingTag, axis);
      if (status && receives)
        status = context.comm->recv(y.data, numBytes, recvPeer, kRingTag, axis);
      Status end = context.comm->endTransfers();
      return status ? end : status;
    }));
  return inSequence(std::move(parts));
}

/// Sizes of a ring block (q [S, B, Hq*D], k and v [Sk, B, Hkv*D]) and where
/// its queries and keys sit in the sequence (one run each on the
/// contiguous split, two on the balanced one); `masked` when no query sees
/// a key (the block is later than every query, or none arrived).
struct BlockSizes {
  kernels::AttentionExtent extent;
  bool masked;
};

Result<BlockSizes> blockSizes(const OpCall &c, const OpEnv &env) {
  const TensorRef &q = c.operands[0], &k = c.operands[1], &v = c.operands[2];
  int64_t headDim = c.instr->getInt("head_dim");
  SHARC_TRY(positiveAttr("head_dim", headDim));
  for (auto [ref, role] : {std::pair{&q, "q"}, std::pair{&k, "k"}}) {
    SHARC_TRY(isFloat(*ref, role));
    SHARC_TRY(rankIs(*ref, 3, role));
    if (ref->shape()[2] % headDim != 0)
      return Status::invalidInput(
          std::string(role) + "'s last dim " + std::to_string(ref->shape()[2]) +
          " is not a multiple of head_dim " + std::to_string(headDim));
  }
  SHARC_TRY(sameShape(v, k, "v"));
  kernels::AttentionExtent e{.seqLen = q.shape()[0],
                             .batch = q.shape()[1],
                             .numHeads = q.shape()[2] / headDim,
                             .numKvHeads = k.shape()[2] / headDim,
                             .headDim = headDim,
                             .kvSeqLen = k.shape()[0]};
  if (k.shape()[1] != e.batch)
    return Status::invalidInput("k's batch differs from q's");
  if (e.numKvHeads == 0 || e.numHeads % e.numKvHeads != 0)
    return Status::invalidInput(std::to_string(e.numKvHeads) +
                                " kv heads do not divide " +
                                std::to_string(e.numHeads) + " query heads");
  std::string axis = c.instr->getString("position_axis");
  int64_t coord = env.coord(axis), size = env.axisSize(axis);
  auto split = c.instr->getString("position_split") == "balanced"
                   ? kernels::SequenceSplit::Balanced
                   : kernels::SequenceSplit::Contiguous;
  if (split == kernels::SequenceSplit::Balanced && size > 1 &&
      (e.seqLen % 2 != 0 || e.kvSeqLen % 2 != 0))
    return Status::invalidInput(
        "the balanced split needs even q and k blocks (two chunks), got " +
        std::to_string(e.seqLen) + " and " + std::to_string(e.kvSeqLen));
  std::optional<int64_t> keyBlock =
      kernels::ringKeyBlock(split, coord, size, c.instr->getInt("kv_shift", 0));
  e.queries = kernels::rowPositions(split, coord, size, e.seqLen);
  e.keys = kernels::rowPositions(split, keyBlock.value_or(0), size, e.kvSeqLen);
  bool masked =
      !keyBlock || e.seqLen == 0 || e.keys.at(0) > e.queries.at(e.seqLen - 1);
  return BlockSizes{e, masked};
}

Result<Launch> bindAttentionBlock(const OpCall &c, const OpEnv &env) {
  auto s = blockSizes(c, env);
  if (!s)
    return s.status();
  const TensorRef &out = c.results[0], &lse = c.results[1];
  SHARC_TRY(isFloat(out, "out"));
  SHARC_TRY(sameShape(out, c.operands[0], "out"));
  SHARC_TRY(lseMatches(lse, s->extent, "lse"));
  if (s->masked)
    return inSequence({fillLaunch(env, out, 0.0),
                       fillLaunch(env, lse, kernels::kEmptyRowLse)});
  return launchAttention(
      c, env,
      kernels::withExtent(
          kernels::AttentionArgs{.q = c.operands[0].cview(),
                                 .k = c.operands[1].cview(),
                                 .v = c.operands[2].cview(),
                                 .out = out.view(),
                                 .lse = static_cast<float *>(lse.data),
                                 .vPitch = c.operands[2].buffer->rowStride},
          s->extent),
      /*workspace=*/nullptr, SHARC_KERNELS(attention));
}

Result<Launch> bindAttentionBlockGrad(const OpCall &c, const OpEnv &env) {
  auto s = blockSizes(c, env);
  if (!s)
    return s.status();
  auto args = attentionGradArgs(c, s->extent);
  if (!args)
    return args.status();
  args->vPitch = c.operands[2].buffer->rowStride;
  args->dvPitch = c.results[2].buffer->rowStride;
  if (s->masked)
    return inSequence({fillLaunch(env, c.results[0], 0.0),
                       fillLaunch(env, c.results[1], 0.0),
                       fillLaunch(env, c.results[2], 0.0)});
  // With dlse the block reads its own partial, which the library cannot
  // differentiate (kernels/AttentionRuns.h); without, it reads the merged
  // output (passes/MergedBlockGrads.cpp) and runs on the library.
  if (c.operands.size() > 6) {
    const TensorRef &dlse = c.operands[6];
    SHARC_TRY(lseMatches(dlse, s->extent, "dlse"));
    args->dlse = static_cast<const float *>(dlse.data);
    return launchKernel(env, *args, SHARC_KERNELS(attentionGrad));
  }
  const TensorRef *workspace = c.results.size() > 3 ? &c.results[3] : nullptr;
  return launchAttention(c, env, *args, workspace,
                         SHARC_KERNELS(attentionGrad));
}

/// Rows of an [S, B, H*D] partial whose lse is [B, H, S].
struct PartialSizes {
  int64_t seqLen, batch, numHeads, headDim;
};

Result<PartialSizes> partialSizes(const TensorRef &out, const TensorRef &lse,
                                  const char *outRole, const char *lseRole) {
  SHARC_TRY(isFloat(out, outRole));
  SHARC_TRY(rankIs(out, 3, outRole));
  SHARC_TRY(dtypeIs(lse, DType::F32, lseRole));
  SHARC_TRY(rankIs(lse, 3, lseRole));
  const std::vector<int64_t> &o = out.shape(), &l = lse.shape();
  if (l[0] != o[1] || l[2] != o[0] || l[1] <= 0 || o[2] % l[1] != 0)
    return Status::invalidInput(std::string(lseRole) + " " + shapeText(l) +
                                " is not [B, H, S] for " + outRole + " " +
                                shapeText(o));
  return PartialSizes{o[0], o[1], l[1], o[2] / l[1]};
}

Result<Launch> bindLseMerge(const OpCall &c, const OpEnv &env) {
  const TensorRef &outA = c.operands[0], &lseA = c.operands[1],
                  &outB = c.operands[2], &lseB = c.operands[3];
  const TensorRef &out = c.results[0], &lse = c.results[1];
  auto s = partialSizes(outA, lseA, "out_a", "lse_a");
  if (!s)
    return s.status();
  SHARC_TRY(sameShape(outB, outA, "out_b"));
  SHARC_TRY(sameShape(out, outA, "out"));
  SHARC_TRY(sameShape(lseB, lseA, "lse_b"));
  SHARC_TRY(sameShape(lse, lseA, "lse"));
  return launchKernel(
      env,
      kernels::LseMergeArgs{.outA = outA.cview(),
                            .outB = outB.cview(),
                            .lseA = static_cast<const float *>(lseA.data),
                            .lseB = static_cast<const float *>(lseB.data),
                            .out = out.view(),
                            .lse = static_cast<float *>(lse.data),
                            .seqLen = s->seqLen,
                            .batch = s->batch,
                            .numHeads = s->numHeads,
                            .headDim = s->headDim},
      SHARC_KERNELS(lseMerge));
}

Result<Launch> bindLseMergeGrad(const OpCall &c, const OpEnv &env) {
  const TensorRef &part = c.operands[0], &lsePart = c.operands[1],
                  &out = c.operands[2], &lse = c.operands[3],
                  &dout = c.operands[4], &dlse = c.operands[5];
  const TensorRef &dpart = c.results[0], &dlsePart = c.results[1];
  auto s = partialSizes(out, lse, "out", "lse");
  if (!s)
    return s.status();
  for (auto [ref, role] : {std::pair{&part, "part"}, std::pair{&dout, "dout"},
                           std::pair{&dpart, "dpart"}})
    SHARC_TRY(sameShape(*ref, out, role));
  for (auto [ref, role] :
       {std::pair{&lsePart, "lse_part"}, std::pair{&dlse, "dlse"},
        std::pair{&dlsePart, "dlse_part"}})
    SHARC_TRY(sameShape(*ref, lse, role));
  return launchKernel(env,
                      kernels::LseMergeGradArgs{
                          .part = part.cview(),
                          .out = out.cview(),
                          .dout = dout.cview(),
                          .lsePart = static_cast<const float *>(lsePart.data),
                          .lse = static_cast<const float *>(lse.data),
                          .dlse = static_cast<const float *>(dlse.data),
                          .dpart = dpart.view(),
                          .dlsePart = static_cast<float *>(dlsePart.data),
                          .seqLen = s->seqLen,
                          .batch = s->batch,
                          .numHeads = s->numHeads,
                          .headDim = s->headDim},
                      SHARC_KERNELS(lseMergeGrad));
}

} // namespace

void addRingAttentionOps(std::unordered_map<std::string, OpDef> &table) {
  table["ring_shift"] = {bindRingShift, 1, 1};
  table["attention_block"] = {bindAttentionBlock, 3, 2};
  // dlse is left out where the block reads the merged output
  // (passes/MergedBlockGrads.cpp).
  table["attention_block_grad"] = {bindAttentionBlockGrad, 7, 4, 0,
                                   /*optionalOperands=*/1};
  // dq, dk, dv and, where the planner placed one, cuDNN's workspace.
  table["attention_block_grad"].workspaceResults = 1;
  table["lse_merge"] = {bindLseMerge, 4, 2};
  table["lse_merge_grad"] = {bindLseMergeGrad, 6, 2};
}

} // namespace sharc::exec
