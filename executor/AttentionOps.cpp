//===- AttentionOps.cpp - rope and attention instructions ----------------===//
//
// rope / rope_grad (attrs head_dim, theta, optional position_offset,
// position_axis and position_split), rms_norm_rope / rms_norm_rope_grad
// (rope's attrs and eps) and causal GQA attention / attention_grad
// (head_dim, optional position_axis and position_split: q is this rank's
// part of the sequence, k/v the whole sequence) on
// sequence-first [S, B, heads*head_dim] activations; kernels/Rope.h and
// kernels/Attention.h state the math. rms_norm_rope's x (and its
// gradient's x and dx), attention's v (and its gradient's v and dv) may be
// column views (plan-format.md, "Views").
//
//===----------------------------------------------------------------------===//

#include "executor/AttentionViews.h"
#include "executor/OpTable.h"

#include "kernels/Attention.h"
#include "kernels/RmsNormRope.h"
#include "kernels/Rope.h"

#include <cstdio>
#include <tuple>
#include <utility>

namespace sharc::exec {

using namespace opcheck;

namespace {

/// Sizes of a sequence-first [S, B, heads*D] activation.
struct HeadSizes {
  int64_t seqLen, batch, numHeads, headDim;
};

Result<HeadSizes> headSizes(const TensorRef &x, const plan::Instruction &instr,
                            const char *role) {
  SHARC_TRY(isFloat(x, role));
  SHARC_TRY(rankIs(x, 3, role));
  int64_t headDim = instr.getInt("head_dim");
  SHARC_TRY(positiveAttr("head_dim", headDim));
  if (x.shape()[2] % headDim != 0)
    return Status::invalidInput(
        std::string(role) + "'s last dim " + std::to_string(x.shape()[2]) +
        " is not a multiple of head_dim " + std::to_string(headDim));
  return HeadSizes{x.shape()[0], x.shape()[1], x.shape()[2] / headDim, headDim};
}

/// The balanced split's two chunks are half a rank's rows each.
Status balancedRowsEven(const kernels::RowPositions &positions,
                        int64_t seqLen) {
  if (positions.isOneRun() || 2 * positions.secondRow == seqLen)
    return Status::ok();
  return Status::invalidInput("a balanced split of " + std::to_string(seqLen) +
                              " rows has no two equal chunks");
}

template <bool Inverse>
Result<Launch> bindRope(const OpCall &c, const OpEnv &env) {
  const TensorRef &x = c.operands[0], &y = c.results[0];
  auto sizes = headSizes(x, *c.instr, Inverse ? "dy" : "x");
  if (!sizes)
    return sizes.status();
  if (sizes->headDim % 2 != 0)
    return Status::invalidInput("head_dim " + std::to_string(sizes->headDim) +
                                " must be even for rope");
  SHARC_TRY(isFloat(y, Inverse ? "dx" : "y"));
  SHARC_TRY(sameShape(y, x, Inverse ? "dx" : "y"));
  // position_axis (an extension): x is this rank's part of a sequence
  // split over that axis.
  auto positions = env.rowPositions(*c.instr, sizes->seqLen);
  SHARC_TRY(balancedRowsEven(positions, sizes->seqLen));
  return launchKernel(env,
                      kernels::RopeArgs{.x = x.cview(),
                                        .y = y.view(),
                                        .seqLen = sizes->seqLen,
                                        .batch = sizes->batch,
                                        .numHeads = sizes->numHeads,
                                        .headDim = sizes->headDim,
                                        .positionOffset = positions.start,
                                        .secondRow = positions.secondRow,
                                        .secondStart = positions.secondStart,
                                        .theta = c.instr->getFloat("theta"),
                                        .inverse = Inverse},
                      SHARC_KERNELS(rope));
}

/// rms_norm_rope(x, w) and its gradient (x, w, dy): x [S, B, h*D], w [D],
/// D even; the rope position as bindRope has it.
struct NormRopeSizes {
  HeadSizes heads;
  kernels::RowPositions positions;
};

Result<NormRopeSizes> normRopeSizes(const OpCall &c, const OpEnv &env) {
  const TensorRef &x = c.operands[0], &w = c.operands[1];
  auto sizes = headSizes(x, *c.instr, "x");
  if (!sizes)
    return sizes.status();
  if (sizes->headDim % 2 != 0)
    return Status::invalidInput("head_dim " + std::to_string(sizes->headDim) +
                                " must be even for rope");
  SHARC_TRY(isFloat(w, "w"));
  SHARC_TRY(numelIs(w, sizes->headDim, "w"));
  auto positions = env.rowPositions(*c.instr, sizes->seqLen);
  SHARC_TRY(balancedRowsEven(positions, sizes->seqLen));
  return NormRopeSizes{*sizes, positions};
}

Result<Launch> bindRmsNormRope(const OpCall &c, const OpEnv &env) {
  auto sizes = normRopeSizes(c, env);
  if (!sizes)
    return sizes.status();
  const TensorRef &y = c.results[0];
  SHARC_TRY(isFloat(y, "y"));
  SHARC_TRY(sameShape(y, c.operands[0], "y"));
  const HeadSizes &h = sizes->heads;
  return launchKernel(
      env,
      kernels::RmsNormRopeArgs{.x = c.operands[0].cview(),
                               .w = c.operands[1].cview(),
                               .y = y.view(),
                               .seqLen = h.seqLen,
                               .batch = h.batch,
                               .numHeads = h.numHeads,
                               .headDim = h.headDim,
                               .xPitch = c.operands[0].buffer->rowStride,
                               .positionOffset = sizes->positions.start,
                               .secondRow = sizes->positions.secondRow,
                               .secondStart = sizes->positions.secondStart,
                               .eps = c.instr->getFloat("eps"),
                               .theta = c.instr->getFloat("theta")},
      SHARC_KERNELS(rmsNormRope));
}

Result<Launch> bindRmsNormRopeGrad(const OpCall &c, const OpEnv &env) {
  auto sizes = normRopeSizes(c, env);
  if (!sizes)
    return sizes.status();
  const TensorRef &dy = c.operands[2], &dx = c.results[0], &dw = c.results[1];
  for (auto [ref, role] : {std::pair{&dy, "dy"}, {&dx, "dx"}}) {
    SHARC_TRY(isFloat(*ref, role));
    SHARC_TRY(sameShape(*ref, c.operands[0], role));
  }
  SHARC_TRY(isFloat(dw, "dw"));
  SHARC_TRY(numelIs(dw, sizes->heads.headDim, "dw"));
  const HeadSizes &h = sizes->heads;
  return launchKernelWithScratch(
      env, *c.instr,
      kernels::RmsNormRopeGradArgs{.x = c.operands[0].cview(),
                                   .w = c.operands[1].cview(),
                                   .dy = dy.cview(),
                                   .dx = dx.view(),
                                   .dw = dw.view(),
                                   .seqLen = h.seqLen,
                                   .batch = h.batch,
                                   .numHeads = h.numHeads,
                                   .headDim = h.headDim,
                                   .xPitch = c.operands[0].buffer->rowStride,
                                   .dxPitch = dx.buffer->rowStride,
                                   .positionOffset = sizes->positions.start,
                                   .secondRow = sizes->positions.secondRow,
                                   .secondStart = sizes->positions.secondStart,
                                   .eps = c.instr->getFloat("eps"),
                                   .theta = c.instr->getFloat("theta")},
      SHARC_KERNELS_WITH_SCRATCH(rmsNormRopeGrad));
}

/// Checks q, k, v (operands 0..2) and returns their sizes and the global
/// positions of q's rows; the keys start at position 0 (all of them, in
/// order).
Result<kernels::AttentionExtent> attentionSizes(const OpCall &c,
                                                const OpEnv &env) {
  const TensorRef &q = c.operands[0], &k = c.operands[1], &v = c.operands[2];
  auto qs = headSizes(q, *c.instr, "q");
  if (!qs)
    return qs.status();
  auto ks = headSizes(k, *c.instr, "k");
  if (!ks)
    return ks.status();
  SHARC_TRY(sameShape(v, k, "v"));
  // With position_axis, q is this rank's part of the sequence and k, v
  // hold all of it, in natural order.
  auto queries = env.rowPositions(*c.instr, qs->seqLen);
  SHARC_TRY(balancedRowsEven(queries, qs->seqLen));
  bool blocked = !c.instr->getString("position_axis").empty();
  if (ks->batch != qs->batch || (!blocked && ks->seqLen != qs->seqLen))
    return Status::invalidInput("k's [S, B] differs from q's");
  int64_t queryEnd = qs->seqLen > 0 ? queries.at(qs->seqLen - 1) + 1 : 0;
  if (blocked && queryEnd > ks->seqLen)
    return Status::invalidInput("q's last position " +
                                std::to_string(queryEnd - 1) + " is past k's " +
                                std::to_string(ks->seqLen) + " positions");
  if (qs->numHeads % ks->numHeads != 0)
    return Status::invalidInput(std::to_string(ks->numHeads) +
                                " kv heads do not divide " +
                                std::to_string(qs->numHeads) + " query heads");
  return kernels::AttentionExtent{.seqLen = qs->seqLen,
                                  .batch = qs->batch,
                                  .numHeads = qs->numHeads,
                                  .numKvHeads = ks->numHeads,
                                  .headDim = qs->headDim,
                                  .kvSeqLen = ks->seqLen,
                                  .queries = queries};
}

Result<Launch> bindAttention(const OpCall &c, const OpEnv &env) {
  auto sizes = attentionSizes(c, env);
  if (!sizes)
    return sizes.status();
  const TensorRef &out = c.results[0], &lse = c.results[1];
  SHARC_TRY(isFloat(out, "out"));
  SHARC_TRY(sameShape(out, c.operands[0], "out"));
  SHARC_TRY(lseMatches(lse, *sizes, "lse"));
  return launchAttention(
      c, env,
      kernels::withExtent(
          kernels::AttentionArgs{.q = c.operands[0].cview(),
                                 .k = c.operands[1].cview(),
                                 .v = c.operands[2].cview(),
                                 .out = out.view(),
                                 .lse = static_cast<float *>(lse.data),
                                 .vPitch = c.operands[2].buffer->rowStride},
          *sizes),
      /*workspace=*/nullptr, SHARC_KERNELS(attention));
}

Result<Launch> bindAttentionGrad(const OpCall &c, const OpEnv &env) {
  auto sizes = attentionSizes(c, env);
  if (!sizes)
    return sizes.status();
  auto args = attentionGradArgs(c, *sizes);
  if (!args)
    return args.status();
  args->vPitch = c.operands[2].buffer->rowStride;
  args->dvPitch = c.results[2].buffer->rowStride;
  const TensorRef *workspace = c.results.size() > 3 ? &c.results[3] : nullptr;
  return launchAttention(c, env, *args, workspace,
                         SHARC_KERNELS(attentionGrad));
}

} // namespace

Status lseMatches(const TensorRef &lse, const kernels::AttentionExtent &extent,
                  const char *role) {
  SHARC_TRY(dtypeIs(lse, DType::F32, role));
  return numelIs(lse, extent.batch * extent.numHeads * extent.seqLen, role);
}

Result<kernels::AttentionGradArgs>
attentionGradArgs(const OpCall &c, const kernels::AttentionExtent &extent) {
  const TensorRef &q = c.operands[0], &k = c.operands[1];
  const TensorRef &out = c.operands[3], &lse = c.operands[4],
                  &dout = c.operands[5];
  for (auto [ref, role] : {std::pair{&out, "out"}, std::pair{&dout, "dout"}}) {
    SHARC_TRY(isFloat(*ref, role));
    SHARC_TRY(sameShape(*ref, q, role));
  }
  SHARC_TRY(lseMatches(lse, extent, "lse"));
  const TensorRef &dq = c.results[0], &dk = c.results[1], &dv = c.results[2];
  for (auto [ref, like, role] :
       {std::tuple{&dq, &q, "dq"}, {&dk, &k, "dk"}, {&dv, &k, "dv"}}) {
    SHARC_TRY(isFloat(*ref, role));
    SHARC_TRY(sameShape(*ref, *like, role));
  }
  return kernels::withExtent(
      kernels::AttentionGradArgs{.q = q.cview(),
                                 .k = k.cview(),
                                 .v = c.operands[2].cview(),
                                 .out = out.cview(),
                                 .dout = dout.cview(),
                                 .lse = static_cast<const float *>(lse.data),
                                 .dq = dq.view(),
                                 .dk = dk.view(),
                                 .dv = dv.view()},
      extent);
}

void addAttentionOps(std::unordered_map<std::string, OpDef> &table) {
  table["rope"] = {bindRope<false>, 1, 1};
  table["rope_grad"] = {bindRope<true>, 1, 1};
  // The fused q/k/v projection's q, k and v are column views of its
  // output, read in place; dq, dk and dv are written into the columns of
  // the joined gradient its backward GEMMs read. Which slots take them is
  // plan/ColumnSlots.h's (the OpTable sets the strided flags from it).
  table["rms_norm_rope"] = {bindRmsNormRope, 2, 1};
  table["rms_norm_rope_grad"] = {bindRmsNormRopeGrad, 3, 2};
  table["attention"] = {bindAttention, 3, 2};
  // dq, dk, dv and, where the planner placed one, cuDNN's workspace.
  table["attention_grad"] = {bindAttentionGrad, 6, 4};
  table["attention_grad"].workspaceResults = 1;
}

} // namespace sharc::exec
