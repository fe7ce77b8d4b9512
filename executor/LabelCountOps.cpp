//===- LabelCountOps.cpp - the loss over the step's valid labels ----------===//
//
// valid_count and count_scale (docs/plan-ops.md) on kernels/LabelCount.h:
// labels of any shape, int32; the count, x, total and y f32 scalars.
//
//===----------------------------------------------------------------------===//

#include "executor/OpTable.h"

#include "kernels/LabelCount.h"

namespace sharc::exec {

using namespace opcheck;

namespace {

Status isScalarF32(const TensorRef &ref, const char *role) {
  SHARC_TRY(dtypeIs(ref, DType::F32, role));
  return numelIs(ref, 1, role);
}

Result<int64_t> validVocabOf(const OpCall &c) {
  int64_t validVocab = c.instr->getInt("valid_vocab");
  SHARC_TRY(positiveAttr("valid_vocab", validVocab));
  return validVocab;
}

Result<Launch> bindValidCount(const OpCall &c, const OpEnv &env) {
  const TensorRef &labels = c.operands[0];
  SHARC_TRY(dtypeIs(labels, DType::I32, "labels"));
  SHARC_TRY(isScalarF32(c.results[0], "count"));
  auto validVocab = validVocabOf(c);
  if (!validVocab)
    return validVocab.status();
  return launchKernel(env,
                      kernels::ValidCountArgs{
                          .labels = static_cast<const int32_t *>(labels.data),
                          .count = static_cast<float *>(c.results[0].data),
                          .numTokens = labels.numel(),
                          .validVocab = *validVocab},
                      SHARC_KERNELS(validCount));
}

Result<Launch> bindCountScale(const OpCall &c, const OpEnv &env) {
  const TensorRef &labels = c.operands[1];
  SHARC_TRY(isScalarF32(c.operands[0], "x"));
  SHARC_TRY(dtypeIs(labels, DType::I32, "labels"));
  SHARC_TRY(isScalarF32(c.operands[2], "total"));
  SHARC_TRY(isScalarF32(c.results[0], "y"));
  auto validVocab = validVocabOf(c);
  if (!validVocab)
    return validVocab.status();
  return launchKernel(
      env,
      kernels::CountScaleArgs{
          .x = static_cast<const float *>(c.operands[0].data),
          .labels = static_cast<const int32_t *>(labels.data),
          .total = static_cast<const float *>(c.operands[2].data),
          .y = static_cast<float *>(c.results[0].data),
          .numTokens = labels.numel(),
          .validVocab = *validVocab},
      SHARC_KERNELS(countScale));
}

} // namespace

void addLabelCountOps(std::unordered_map<std::string, OpDef> &table) {
  table["valid_count"] = {bindValidCount, 1, 1};
  table["count_scale"] = {bindCountScale, 3, 1};
}

} // namespace sharc::exec
