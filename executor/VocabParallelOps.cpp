//===- VocabParallelOps.cpp - cross entropy over a split vocabulary -------===//
//
// The vocab-parallel decomposition of cross entropy (docs/plan-ops.md) on
// kernels/VocabParallelLoss.h: every rank holds logits [S, B, Vl] for the
// global columns [start, start + Vl), start = coord(vocab_axis) * Vl; the
// row statistics vocab_max, target_logit and sum_exp are combined by
// all_reduce instructions between these ops. valid_vocab is at most the
// global vocabulary Vl * size(vocab_axis).
//
//===----------------------------------------------------------------------===//

#include "executor/OpTable.h"

#include "kernels/VocabParallelLoss.h"

namespace sharc::exec {

using namespace opcheck;

namespace {

/// The local logits' geometry and the rank's first global column.
struct VocabShard {
  int64_t numTokens = 0, localVocab = 0, start = 0, validVocab = 0;
};

Result<VocabShard> vocabShard(const OpCall &c, const OpEnv &env) {
  const TensorRef &logits = c.operands[0];
  SHARC_TRY(isFloat(logits, "logits"));
  if (logits.shape().empty() || logits.shape().back() <= 0)
    return Status::invalidInput("logits need a non-empty last dimension");
  VocabShard shard;
  shard.localVocab = logits.shape().back();
  shard.numTokens = logits.numel() / shard.localVocab;
  std::string axis = c.instr->getString("vocab_axis");
  shard.start = env.blockStart(*c.instr, "vocab_axis", shard.localVocab);
  int64_t globalVocab = shard.localVocab * env.axisSize(axis);
  shard.validVocab = c.instr->getInt("valid_vocab");
  if (shard.validVocab <= 0 || shard.validVocab > globalVocab)
    return Status::invalidInput(
        "valid_vocab " + std::to_string(shard.validVocab) + " outside (0, " +
        std::to_string(globalVocab) + "]");
  return shard;
}

/// A per-token f32 statistic [S, B] (or any shape of numTokens elements).
Status rowStat(const TensorRef &ref, int64_t numTokens, const char *role) {
  SHARC_TRY(dtypeIs(ref, DType::F32, role));
  return numelIs(ref, numTokens, role);
}

const int32_t *labelsOf(const OpCall &c) {
  return static_cast<const int32_t *>(c.operands[1].data);
}

Status checkLabels(const OpCall &c, const VocabShard &s) {
  SHARC_TRY(dtypeIs(c.operands[1], DType::I32, "labels"));
  return numelIs(c.operands[1], s.numTokens, "labels");
}

Result<Launch> bindVocabMax(const OpCall &c, const OpEnv &env) {
  auto s = vocabShard(c, env);
  if (!s)
    return s.status();
  SHARC_TRY(rowStat(c.results[0], s->numTokens, "m"));
  return launchKernel(env,
                      kernels::VocabMaxArgs{.logits = c.operands[0].cview(),
                                            .vocabMax = c.results[0].view(),
                                            .numTokens = s->numTokens,
                                            .localVocab = s->localVocab,
                                            .vocabStart = s->start,
                                            .validVocab = s->validVocab},
                      SHARC_KERNELS(vocabMax));
}

Result<Launch> bindTargetLogit(const OpCall &c, const OpEnv &env) {
  auto s = vocabShard(c, env);
  if (!s)
    return s.status();
  SHARC_TRY(checkLabels(c, *s));
  SHARC_TRY(rowStat(c.results[0], s->numTokens, "t"));
  return launchKernel(
      env,
      kernels::TargetLogitArgs{.logits = c.operands[0].cview(),
                               .labels = labelsOf(c),
                               .targetLogit = c.results[0].view(),
                               .numTokens = s->numTokens,
                               .localVocab = s->localVocab,
                               .vocabStart = s->start,
                               .validVocab = s->validVocab},
      SHARC_KERNELS(targetLogit));
}

Result<Launch> bindSumExp(const OpCall &c, const OpEnv &env) {
  auto s = vocabShard(c, env);
  if (!s)
    return s.status();
  SHARC_TRY(rowStat(c.operands[1], s->numTokens, "m"));
  SHARC_TRY(rowStat(c.results[0], s->numTokens, "e"));
  return launchKernel(env,
                      kernels::SumExpArgs{.logits = c.operands[0].cview(),
                                          .vocabMax = c.operands[1].cview(),
                                          .sumExp = c.results[0].view(),
                                          .numTokens = s->numTokens,
                                          .localVocab = s->localVocab,
                                          .vocabStart = s->start,
                                          .validVocab = s->validVocab},
                      SHARC_KERNELS(sumExp));
}

Result<Launch> bindVocabParallelLoss(const OpCall &c, const OpEnv &env) {
  auto s = vocabShard(c, env);
  if (!s)
    return s.status();
  SHARC_TRY(checkLabels(c, *s));
  for (auto [i, role] : {std::pair{2, "m"}, {3, "t"}, {4, "e"}})
    SHARC_TRY(rowStat(c.operands[i], s->numTokens, role));
  SHARC_TRY(rowStat(c.results[0], 1, "loss"));
  return launchKernel(env,
                      kernels::VocabParallelLossArgs{
                          .labels = labelsOf(c),
                          .vocabMax = c.operands[2].cview(),
                          .targetLogit = c.operands[3].cview(),
                          .sumExp = c.operands[4].cview(),
                          .loss = static_cast<float *>(c.results[0].data),
                          .numTokens = s->numTokens,
                          .validVocab = s->validVocab},
                      SHARC_KERNELS(vocabParallelLoss));
}

Result<Launch> bindVocabParallelLossGrad(const OpCall &c, const OpEnv &env) {
  auto s = vocabShard(c, env);
  if (!s)
    return s.status();
  const TensorRef &dlogits = c.results[0];
  SHARC_TRY(checkLabels(c, *s));
  SHARC_TRY(rowStat(c.operands[2], s->numTokens, "m"));
  SHARC_TRY(rowStat(c.operands[3], s->numTokens, "e"));
  SHARC_TRY(rowStat(c.operands[4], 1, "dloss"));
  SHARC_TRY(isFloat(dlogits, "dlogits"));
  SHARC_TRY(numelIs(dlogits, c.operands[0].numel(), "dlogits"));
  return launchKernel(
      env,
      kernels::VocabParallelLossGradArgs{
          .logits = c.operands[0].cview(),
          .labels = labelsOf(c),
          .vocabMax = c.operands[2].cview(),
          .sumExp = c.operands[3].cview(),
          .dloss = static_cast<const float *>(c.operands[4].data),
          .dlogits = dlogits.view(),
          .numTokens = s->numTokens,
          .localVocab = s->localVocab,
          .vocabStart = s->start,
          .validVocab = s->validVocab},
      SHARC_KERNELS(vocabParallelLossGrad));
}

} // namespace

void addVocabParallelOps(std::unordered_map<std::string, OpDef> &table) {
  table["vocab_max"] = {bindVocabMax, 1, 1};
  table["target_logit"] = {bindTargetLogit, 2, 1};
  table["sum_exp"] = {bindSumExp, 2, 1};
  table["vocab_parallel_loss"] = {bindVocabParallelLoss, 5, 1};
  table["vocab_parallel_loss_grad"] = {bindVocabParallelLossGrad, 5, 1};
}

} // namespace sharc::exec
