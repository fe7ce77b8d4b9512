//===- OpTable.cpp - model ops: checks, sizes and kernel arguments --------===//

#include "executor/OpTable.h"

#include "executor/ShardLayout.h"
#include "kernels/AdamW.h"
#include "kernels/CrossEntropy.h"
#include "kernels/Elementwise.h"
#include "kernels/Embedding.h"
#include "kernels/Matmul.h"
#include "kernels/RmsNorm.h"
#include "planner/plan/ColumnSlots.h"

#include <algorithm>
#include <tuple>

namespace sharc::exec {

int64_t TensorRef::numel() const { return numElements(buffer->shape); }

Status checkPacked(const OpDef &def, const OpCall &call) {
  auto check = [&](const std::vector<TensorRef> &refs, uint32_t strided,
                   const char *role) {
    for (size_t k = 0; k < refs.size(); ++k)
      if (refs[k].buffer->isStrided() && !(k < 32 && (strided >> k & 1u)))
        return Status::invalidInput(
            std::string(role) + " " + std::to_string(k) + " (buffer " +
            std::to_string(refs[k].buffer->id) + " '" + refs[k].buffer->name +
            "') is a column view with row_stride " +
            std::to_string(refs[k].buffer->rowStride) + ", which " +
            call.instr->op + " takes only packed");
    return Status::ok();
  };
  SHARC_TRY(check(call.operands, def.stridedOperands, "operand"));
  return check(call.results, def.stridedResults, "result");
}

int64_t OpEnv::coord(const std::string &axis) const {
  for (size_t a = 0; mesh && a < mesh->size(); ++a)
    if ((*mesh)[a].name == axis)
      return coords[a];
  return 0;
}

int64_t OpEnv::blockStart(const plan::Instruction &instr, const char *axisAttr,
                          int64_t localExtent) const {
  std::string axis = instr.getString(axisAttr);
  return axis.empty() ? 0 : coord(axis) * localExtent;
}

kernels::RowPositions OpEnv::rowPositions(const plan::Instruction &instr,
                                          int64_t localRows) const {
  int64_t offset = instr.getInt("position_offset", 0);
  std::string axis = instr.getString("position_axis");
  if (axis.empty())
    return {offset, 0, 0};
  auto split = instr.getString("position_split") == "balanced"
                   ? kernels::SequenceSplit::Balanced
                   : kernels::SequenceSplit::Contiguous;
  return kernels::rowPositions(split, coord(axis), axisSize(axis), localRows,
                               offset);
}

int64_t OpEnv::axisSize(const std::string &axis) const {
  for (size_t a = 0; mesh && a < mesh->size(); ++a)
    if ((*mesh)[a].name == axis)
      return (*mesh)[a].size;
  return 1;
}

void OpEnv::needScratch(const plan::Instruction &instr, int64_t bytes) const {
  // Without a list (no runtime binding) the launch reports the missing
  // scratch.
  if (!scratchBytes)
    return;
  auto stream = static_cast<size_t>(instr.stream);
  if (scratchBytes->size() <= stream)
    scratchBytes->resize(stream + 1, 0);
  (*scratchBytes)[stream] = std::max((*scratchBytes)[stream], bytes);
}

int64_t StepConstants::reserve(int64_t bytes, Fill fill) {
  int64_t offset = bytes_;
  slots_.push_back({offset, std::move(fill)});
  bytes_ += (bytes + 15) / 16 * 16;
  return offset;
}

void StepConstants::fillAll(void *table, int64_t step, double lrScale) const {
  for (const auto &[offset, fill] : slots_)
    fill(static_cast<char *>(table) + offset, step, lrScale);
}

using namespace opcheck;

namespace {

/// A GEMM runs on the cpu kernel, or on the rank's GemmEngine on a device.
template <typename Args>
Result<Launch> launchGemm(
    const OpEnv &env, int64_t stream, const Args &args,
    Status (GemmEngine::*deviceGemm)(const Args &, kernels::DeviceStream),
    void (*cpuGemm)(const Args &)) {
  if (!env.onDevice)
    return Launch([args, cpuGemm](const LaunchContext &) {
      cpuGemm(args);
      return Status::ok();
    });
  // A device stream has a GEMM engine only where the plan puts a GEMM
  // (plan::streamRunsGemm), so a missing one is a set-up error.
  if (stream < 0 || stream >= static_cast<int64_t>(env.gemms.size()) ||
      !env.gemms[stream])
    return Status::invalidInput("no GEMM engine on stream " +
                                std::to_string(stream) + " of this backend");
  SHARC_TRY(env.gemms[stream]->prepare(args));
  return Launch([args, deviceGemm](const LaunchContext &context) {
    return (context.gemm->*deviceGemm)(args, context.stream);
  });
}

/// Last dimension of a float tensor of rank >= 1 (the K of [.., K]).
Result<int64_t> innerDim(const TensorRef &ref, const char *role) {
  SHARC_TRY(isFloat(ref, role));
  if (ref.shape().empty() || ref.shape().back() <= 0)
    return Status::invalidInput(std::string(role) + " (buffer '" +
                                ref.buffer->name +
                                "') needs a non-empty last dimension");
  return ref.shape().back();
}

Result<Launch> bindEmbedding(const OpCall &c, const OpEnv &env) {
  const TensorRef &table = c.operands[0], &ids = c.operands[1];
  const TensorRef &out = c.results[0];
  SHARC_TRY(isFloat(table, "table"));
  SHARC_TRY(rankIs(table, 2, "table"));
  SHARC_TRY(dtypeIs(ids, DType::I32, "ids"));
  SHARC_TRY(isFloat(out, "out"));
  int64_t numRows = table.shape()[0], hidden = table.shape()[1];
  SHARC_TRY(numelIs(out, ids.numel() * hidden, "out"));
  // vocab_axis: the table is this rank's contiguous piece of a vocabulary
  // split over that axis.
  int64_t vocabStart = c.instr->getInt("vocab_start", 0) +
                       env.blockStart(*c.instr, "vocab_axis", numRows);
  return launchKernel(
      env,
      kernels::EmbeddingArgs{.table = table.cview(),
                             .ids = static_cast<const int32_t *>(ids.data),
                             .out = out.view(),
                             .numTokens = ids.numel(),
                             .numRows = numRows,
                             .hidden = hidden,
                             .vocabStart = vocabStart},
      SHARC_KERNELS(embedding));
}

Result<Launch> bindEmbeddingGrad(const OpCall &c, const OpEnv &env) {
  const TensorRef &dout = c.operands[0], &ids = c.operands[1];
  const TensorRef &dtable = c.results[0];
  SHARC_TRY(isFloat(dtable, "dtable"));
  SHARC_TRY(rankIs(dtable, 2, "dtable"));
  SHARC_TRY(dtypeIs(ids, DType::I32, "ids"));
  SHARC_TRY(isFloat(dout, "dout"));
  int64_t numRows = dtable.shape()[0], hidden = dtable.shape()[1];
  SHARC_TRY(numelIs(dout, ids.numel() * hidden, "dout"));
  int64_t vocabStart = c.instr->getInt("vocab_start", 0) +
                       env.blockStart(*c.instr, "vocab_axis", numRows);
  return launchKernel(
      env,
      kernels::EmbeddingGradArgs{.dout = dout.cview(),
                                 .ids = static_cast<const int32_t *>(ids.data),
                                 .dtable = dtable.view(),
                                 .numTokens = ids.numel(),
                                 .numRows = numRows,
                                 .hidden = hidden,
                                 .vocabStart = vocabStart},
      SHARC_KERNELS(embeddingGrad));
}

/// rows, cols and group size of an rms_norm over x [.., C] with w [G].
struct NormSizes {
  int64_t rows, cols, groupSize;
};

Result<NormSizes> normSizes(const OpCall &c) {
  const TensorRef &x = c.operands[0], &w = c.operands[1];
  auto cols = innerDim(x, "x");
  if (!cols)
    return cols.status();
  SHARC_TRY(isFloat(w, "w"));
  int64_t groupSize = c.instr->getInt("group_size");
  SHARC_TRY(positiveAttr("group_size", groupSize));
  SHARC_TRY(numelIs(w, groupSize, "w"));
  if (*cols % groupSize != 0)
    return Status::invalidInput("group_size " + std::to_string(groupSize) +
                                " does not divide the " +
                                std::to_string(*cols) + " columns of x");
  return NormSizes{x.numel() / *cols, *cols, groupSize};
}

/// The addend a fused op sums into `result` (matmul_add and
/// matmul_dgrad_add: operand 2; rms_norm_grad_add: operand 3), of the
/// result's dtype and size; an empty view when the op has none.
Result<kernels::ConstTensorView> addendOf(const OpCall &c, size_t operand,
                                          const TensorRef &result) {
  if (c.operands.size() <= operand)
    return kernels::ConstTensorView{};
  const TensorRef &r = c.operands[operand];
  SHARC_TRY(dtypeIs(r, result.dtype(), "r"));
  SHARC_TRY(numelIs(r, result.numel(), "r"));
  return r.cview();
}

Result<Launch> bindRmsNorm(const OpCall &c, const OpEnv &env) {
  auto sizes = normSizes(c);
  if (!sizes)
    return sizes.status();
  const TensorRef &y = c.results[0];
  SHARC_TRY(isFloat(y, "y"));
  SHARC_TRY(numelIs(y, c.operands[0].numel(), "y"));
  return launchKernel(env,
                      kernels::RmsNormArgs{.x = c.operands[0].cview(),
                                           .w = c.operands[1].cview(),
                                           .y = y.view(),
                                           .rows = sizes->rows,
                                           .cols = sizes->cols,
                                           .groupSize = sizes->groupSize,
                                           .eps = c.instr->getFloat("eps")},
                      SHARC_KERNELS(rmsNorm));
}

Result<Launch> bindRmsNormGrad(const OpCall &c, const OpEnv &env) {
  auto sizes = normSizes(c);
  if (!sizes)
    return sizes.status();
  const TensorRef &dy = c.operands[2], &dx = c.results[0], &dw = c.results[1];
  for (auto [ref, role] : {std::pair{&dy, "dy"}, {&dx, "dx"}}) {
    SHARC_TRY(isFloat(*ref, role));
    SHARC_TRY(numelIs(*ref, c.operands[0].numel(), role));
  }
  SHARC_TRY(isFloat(dw, "dw"));
  SHARC_TRY(numelIs(dw, sizes->groupSize, "dw"));
  auto addend = addendOf(c, 3, dx);
  if (!addend)
    return addend.status();
  return launchKernelWithScratch(
      env, *c.instr,
      kernels::RmsNormGradArgs{.x = c.operands[0].cview(),
                               .w = c.operands[1].cview(),
                               .dy = dy.cview(),
                               .dx = dx.view(),
                               .dw = dw.view(),
                               .rows = sizes->rows,
                               .cols = sizes->cols,
                               .groupSize = sizes->groupSize,
                               .eps = c.instr->getFloat("eps"),
                               .r = *addend},
      SHARC_KERNELS_WITH_SCRATCH(rmsNormGrad));
}

/// For an [N, K] weight.
Status weightShape(const TensorRef &w, const char *role) {
  SHARC_TRY(isFloat(w, role));
  return rankIs(w, 2, role);
}

Result<Launch> bindMatmul(const OpCall &c, const OpEnv &env) {
  const TensorRef &x = c.operands[0], &w = c.operands[1], &y = c.results[0];
  SHARC_TRY(weightShape(w, "w"));
  int64_t n = w.shape()[0], k = w.shape()[1];
  auto xk = innerDim(x, "x");
  if (!xk)
    return xk.status();
  if (*xk != k)
    return Status::invalidInput("x's last dim " + std::to_string(*xk) +
                                " differs from w's K " + std::to_string(k));
  int64_t m = x.numel() / k;
  SHARC_TRY(isFloat(y, "y"));
  SHARC_TRY(numelIs(y, m * n, "y"));
  auto addend = addendOf(c, 2, y);
  if (!addend)
    return addend.status();
  return launchGemm(env, c.instr->stream,
                    kernels::MatmulArgs{.x = x.cview(),
                                        .w = w.cview(),
                                        .y = y.view(),
                                        .m = m,
                                        .n = n,
                                        .k = k,
                                        .addend = *addend},
                    &GemmEngine::matmul, &kernels::cpu::matmul);
}

Result<Launch> bindMatmulDgrad(const OpCall &c, const OpEnv &env) {
  const TensorRef &dy = c.operands[0], &w = c.operands[1], &dx = c.results[0];
  SHARC_TRY(weightShape(w, "w"));
  int64_t n = w.shape()[0], k = w.shape()[1];
  auto dyn = innerDim(dy, "dy");
  if (!dyn)
    return dyn.status();
  if (*dyn != n)
    return Status::invalidInput("dy's last dim " + std::to_string(*dyn) +
                                " differs from w's N " + std::to_string(n));
  int64_t m = dy.numel() / n;
  SHARC_TRY(isFloat(dx, "dx"));
  SHARC_TRY(numelIs(dx, m * k, "dx"));
  auto addend = addendOf(c, 2, dx);
  if (!addend)
    return addend.status();
  return launchGemm(env, c.instr->stream,
                    kernels::MatmulDgradArgs{.dy = dy.cview(),
                                             .w = w.cview(),
                                             .dx = dx.view(),
                                             .m = m,
                                             .n = n,
                                             .k = k,
                                             .addend = *addend},
                    &GemmEngine::matmulDgrad, &kernels::cpu::matmulDgrad);
}

Result<Launch> bindMatmulWgrad(const OpCall &c, const OpEnv &env) {
  const TensorRef &dy = c.operands[0], &x = c.operands[1], &dw = c.results[0];
  SHARC_TRY(weightShape(dw, "dw"));
  int64_t n = dw.shape()[0], k = dw.shape()[1];
  auto dyn = innerDim(dy, "dy");
  if (!dyn)
    return dyn.status();
  if (*dyn != n)
    return Status::invalidInput("dy's last dim " + std::to_string(*dyn) +
                                " differs from dw's N " + std::to_string(n));
  int64_t m = dy.numel() / n;
  SHARC_TRY(isFloat(x, "x"));
  SHARC_TRY(numelIs(x, m * k, "x"));
  return launchGemm(env, c.instr->stream,
                    kernels::MatmulWgradArgs{.dy = dy.cview(),
                                             .x = x.cview(),
                                             .dw = dw.view(),
                                             .m = m,
                                             .n = n,
                                             .k = k},
                    &GemmEngine::matmulWgrad, &kernels::cpu::matmulWgrad);
}

/// Every operand and result a float tensor of the first operand's size.
Status sameNumelFloats(const OpCall &c) {
  int64_t numel = c.operands[0].numel();
  for (const auto *list : {&c.operands, &c.results})
    for (const TensorRef &ref : *list) {
      SHARC_TRY(isFloat(ref, list == &c.operands ? "operand" : "result"));
      SHARC_TRY(
          numelIs(ref, numel, list == &c.operands ? "operand" : "result"));
    }
  return Status::ok();
}

Result<Launch> bindAdd(const OpCall &c, const OpEnv &env) {
  SHARC_TRY(sameNumelFloats(c));
  return launchKernel(env,
                      kernels::AddArgs{.a = c.operands[0].cview(),
                                       .b = c.operands[1].cview(),
                                       .y = c.results[0].view(),
                                       .numel = c.operands[0].numel()},
                      SHARC_KERNELS(add));
}

Result<Launch> bindSwiglu(const OpCall &c, const OpEnv &env) {
  SHARC_TRY(sameNumelFloats(c));
  return launchKernel(env,
                      kernels::SwigluArgs{.gate = c.operands[0].cview(),
                                          .up = c.operands[1].cview(),
                                          .y = c.results[0].view(),
                                          .numel = c.operands[0].numel()},
                      SHARC_KERNELS(swiglu));
}

Result<Launch> bindSwigluGrad(const OpCall &c, const OpEnv &env) {
  SHARC_TRY(sameNumelFloats(c));
  return launchKernel(env,
                      kernels::SwigluGradArgs{.gate = c.operands[0].cview(),
                                              .up = c.operands[1].cview(),
                                              .dy = c.operands[2].cview(),
                                              .dgate = c.results[0].view(),
                                              .dup = c.results[1].view(),
                                              .numel = c.operands[0].numel()},
                      SHARC_KERNELS(swigluGrad));
}

/// The packed swiglu's halves: gate at the start of each row of `gu`
/// ([.., 2 * width]), up `width` elements on; checks `half` ([.., width]).
struct PackedHalves {
  int64_t width = 0;
  int64_t upOffsetBytes = 0;
};

Result<PackedHalves> packedHalves(const TensorRef &gu, const TensorRef &half,
                                  const char *halfRole) {
  SHARC_TRY(isFloat(gu, "gu"));
  SHARC_TRY(isFloat(half, halfRole));
  if (half.shape().empty())
    return Status::invalidInput(std::string(halfRole) +
                                " must have a last dimension");
  int64_t width = half.shape().back();
  std::vector<int64_t> packedShape = half.shape();
  packedShape.back() *= 2;
  if (gu.shape() != packedShape)
    return Status::invalidInput("gu must be " + std::string(halfRole) +
                                "'s shape with twice its last dimension");
  return PackedHalves{width,
                      width * static_cast<int64_t>(dtypeSize(gu.dtype()))};
}

kernels::ConstTensorView offsetView(kernels::ConstTensorView view,
                                    int64_t bytes) {
  return {static_cast<const char *>(view.data) + bytes, view.dtype};
}

kernels::TensorView offsetView(kernels::TensorView view, int64_t bytes) {
  return {static_cast<char *>(view.data) + bytes, view.dtype};
}

Result<Launch> bindSwigluPacked(const OpCall &c, const OpEnv &env) {
  auto halves = packedHalves(c.operands[0], c.results[0], "y");
  if (!halves)
    return halves.status();
  kernels::ConstTensorView gu = c.operands[0].cview();
  return launchKernel(
      env,
      kernels::SwigluArgs{.gate = gu,
                          .up = offsetView(gu, halves->upOffsetBytes),
                          .y = c.results[0].view(),
                          .numel = c.results[0].numel(),
                          .width = halves->width,
                          .packedStride = 2 * halves->width},
      SHARC_KERNELS(swiglu));
}

Result<Launch> bindSwigluPackedGrad(const OpCall &c, const OpEnv &env) {
  auto halves = packedHalves(c.operands[0], c.operands[1], "dy");
  if (!halves)
    return halves.status();
  SHARC_TRY(sameShape(c.results[0], c.operands[0], "dgu"));
  SHARC_TRY(isFloat(c.results[0], "dgu"));
  kernels::ConstTensorView gu = c.operands[0].cview();
  kernels::TensorView dgu = c.results[0].view();
  return launchKernel(
      env,
      kernels::SwigluGradArgs{.gate = gu,
                              .up = offsetView(gu, halves->upOffsetBytes),
                              .dy = c.operands[1].cview(),
                              .dgate = dgu,
                              .dup = offsetView(dgu, halves->upOffsetBytes),
                              .numel = c.operands[1].numel(),
                              .width = halves->width,
                              .packedStride = 2 * halves->width},
      SHARC_KERNELS(swigluGrad));
}

/// Tokens, vocab and valid vocab of logits [.., V] and labels.
struct LossSizes {
  int64_t numTokens, vocab, validVocab;
};

Result<LossSizes> lossSizes(const OpCall &c) {
  const TensorRef &logits = c.operands[0], &labels = c.operands[1];
  auto vocab = innerDim(logits, "logits");
  if (!vocab)
    return vocab.status();
  int64_t numTokens = logits.numel() / *vocab;
  SHARC_TRY(dtypeIs(labels, DType::I32, "labels"));
  SHARC_TRY(numelIs(labels, numTokens, "labels"));
  int64_t validVocab = c.instr->getInt("valid_vocab");
  if (validVocab <= 0 || validVocab > *vocab)
    return Status::invalidInput("valid_vocab " + std::to_string(validVocab) +
                                " outside (0, " + std::to_string(*vocab) + "]");
  return LossSizes{numTokens, *vocab, validVocab};
}

Result<Launch> bindCrossEntropy(const OpCall &c, const OpEnv &env) {
  auto sizes = lossSizes(c);
  if (!sizes)
    return sizes.status();
  const TensorRef &loss = c.results[0];
  SHARC_TRY(dtypeIs(loss, DType::F32, "loss"));
  SHARC_TRY(numelIs(loss, 1, "loss"));
  return launchKernelWithScratch(
      env, *c.instr,
      kernels::CrossEntropyArgs{
          .logits = c.operands[0].cview(),
          .labels = static_cast<const int32_t *>(c.operands[1].data),
          .loss = static_cast<float *>(loss.data),
          .numTokens = sizes->numTokens,
          .vocab = sizes->vocab,
          .validVocab = sizes->validVocab},
      SHARC_KERNELS_WITH_SCRATCH(crossEntropy));
}

Result<Launch> bindCrossEntropyGrad(const OpCall &c, const OpEnv &env) {
  auto sizes = lossSizes(c);
  if (!sizes)
    return sizes.status();
  const TensorRef &dloss = c.operands[2], &dlogits = c.results[0];
  SHARC_TRY(dtypeIs(dloss, DType::F32, "dloss"));
  SHARC_TRY(numelIs(dloss, 1, "dloss"));
  SHARC_TRY(isFloat(dlogits, "dlogits"));
  SHARC_TRY(numelIs(dlogits, c.operands[0].numel(), "dlogits"));
  return launchKernel(
      env,
      kernels::CrossEntropyGradArgs{
          .logits = c.operands[0].cview(),
          .labels = static_cast<const int32_t *>(c.operands[1].data),
          .dloss = static_cast<const float *>(dloss.data),
          .dlogits = dlogits.view(),
          .numTokens = sizes->numTokens,
          .vocab = sizes->vocab,
          .validVocab = sizes->validVocab},
      SHARC_KERNELS(crossEntropyGrad));
}

Result<Launch> bindFill(const OpCall &c, const OpEnv &env) {
  const TensorRef &out = c.results[0];
  SHARC_TRY(isFloat(out, "out"));
  return launchKernel(env,
                      kernels::FillArgs{.out = out.view(),
                                        .numel = out.numel(),
                                        .value = c.instr->getFloat("value")},
                      SHARC_KERNELS(fill));
}

Result<Launch> bindScale(const OpCall &c, const OpEnv &env) {
  SHARC_TRY(sameNumelFloats(c));
  return launchKernel(env,
                      kernels::ScaleArgs{.x = c.operands[0].cview(),
                                         .y = c.results[0].view(),
                                         .numel = c.operands[0].numel(),
                                         .factor = c.instr->getFloat("factor")},
                      SHARC_KERNELS(scale));
}

} // namespace

OpTable::OpTable() {
  table_ = {
      {"embedding", {bindEmbedding, 2, 1}},
      {"embedding_grad", {bindEmbeddingGrad, 2, 1}},
      {"rms_norm", {bindRmsNorm, 2, 1}},
      {"rms_norm_grad", {bindRmsNormGrad, 3, 2}},
      {"rms_norm_grad_add", {bindRmsNormGrad, 4, 2}},
      {"matmul", {bindMatmul, 2, 1}},
      {"matmul_dgrad", {bindMatmulDgrad, 2, 1}},
      {"matmul_add", {bindMatmul, 3, 1}},
      {"matmul_dgrad_add", {bindMatmulDgrad, 3, 1}},
      {"matmul_wgrad", {bindMatmulWgrad, 2, 1}},
      {"swiglu", {bindSwiglu, 2, 1}},
      {"swiglu_grad", {bindSwigluGrad, 3, 2}},
      {"swiglu_packed", {bindSwigluPacked, 1, 1}},
      {"swiglu_packed_grad", {bindSwigluPackedGrad, 2, 1}},
      {"add", {bindAdd, 2, 1}},
      {"cross_entropy", {bindCrossEntropy, 2, 1}},
      {"cross_entropy_grad", {bindCrossEntropyGrad, 3, 1}},
      {"fill", {bindFill, 0, 1}},
      {"scale", {bindScale, 1, 1}},
  };
  addCollectiveOps(table_);
  addVocabParallelOps(table_);
  addLabelCountOps(table_);
  addAttentionOps(table_);
  addRingAttentionOps(table_);
  addDecodeOps(table_);
  addOptimizerOps(table_);
  // The slots that take column views, as the planner makes them.
  for (const plan::ColumnSlots &slots : plan::kColumnSlots) {
    auto it = table_.find(std::string(slots.op));
    if (it == table_.end())
      continue; // ExecutorTest requires every listed op to be here
    it->second.stridedOperands = slots.operands;
    it->second.stridedResults = slots.results;
  }
}

const OpTable &OpTable::get() {
  static const OpTable table;
  return table;
}

const OpDef *OpTable::find(const std::string &op) const {
  auto it = table_.find(op);
  return it == table_.end() ? nullptr : &it->second;
}

} // namespace sharc::exec
