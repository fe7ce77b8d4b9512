//===- TestPlans.h - hand-built plans for the executor tests ----*- C++ -*-===//
// defines: PlanBuilder, LinearModel, makeLinearPlan, withAsyncCollectives
//
// The compiler is not needed to test the runtime: these build small plans by
// hand, placing buffers one after another in their regions.
#pragma once

#include "planner/plan/Plan.h"

#include <string>
#include <vector>

namespace sharc::exec::test {

struct PlanBuilder {
  plan::Plan plan;

  int64_t buffer(const std::string &name, plan::Region region, DType dtype,
                 std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (int64_t extent : shape)
      numel *= extent;
    plan::Buffer buffer;
    buffer.id = static_cast<int64_t>(plan.buffers.size());
    buffer.name = name;
    buffer.region = region;
    buffer.dtype = dtype;
    buffer.shape = std::move(shape);
    buffer.numBytes = numel * dtypeSize(dtype);
    buffer.offset = plan.regionBytes[region];
    plan.regionBytes[region] += (buffer.numBytes + 63) / 64 * 64;
    plan.buffers.push_back(buffer);
    return buffer.id;
  }

  void instr(const std::string &op, std::vector<int64_t> operands,
             std::vector<int64_t> results,
             std::map<std::string, plan::AttrValue> attrs = {}) {
    plan::Instruction instruction;
    instruction.op = op;
    instruction.operands = std::move(operands);
    instruction.results = std::move(results);
    instruction.attrs = std::move(attrs);
    plan.instructions.push_back(std::move(instruction));
  }

  /// A parameter with its adam m and v; returns {param, m, v} buffers.
  std::vector<int64_t> param(const std::string &name,
                             std::vector<int64_t> globalShape,
                             std::vector<int64_t> localShape,
                             plan::Sharding sharding, DType dtype,
                             plan::InitSpec init = {}) {
    int64_t id = buffer(name, plan::Region::Param, dtype, localShape);
    int64_t m = buffer(name + ".m", plan::Region::OptState, dtype, localShape);
    int64_t v = buffer(name + ".v", plan::Region::OptState, dtype, localShape);
    plan::ParamEntry entry;
    entry.name = name;
    entry.buffer = id;
    entry.globalShape = std::move(globalShape);
    entry.sharding = std::move(sharding);
    entry.init = init;
    entry.state = {m, v};
    plan.params.push_back(std::move(entry));
    return {id, m, v};
  }

  void io(bool isInput, const std::string &name, int64_t bufferId,
          std::vector<int64_t> globalShape, plan::Sharding sharding = {}) {
    plan::IoEntry entry;
    entry.name = name;
    entry.buffer = bufferId;
    entry.globalShape = std::move(globalShape);
    entry.sharding = std::move(sharding);
    (isInput ? plan.inputs : plan.outputs).push_back(std::move(entry));
  }
};

/// Sizes of the softmax-regression model: logits = E[tokens] W^T.
struct LinearModel {
  int64_t vocab = 8, hidden = 4, seqLen = 5, batch = 4;
  double lr = 0.05;
  /// Columns >= validVocab are padding; token ids stay below it.
  int64_t validVocab = 8;
  /// tp > 1: the vocab-parallel loss ops instead of gathering the logits.
  bool vocabParallel = false;
};

/// embedding -> matmul -> cross_entropy and its backward and adamw, on a
/// [dp, tp] mesh. tp > 1 splits the head over the vocabulary (column
/// parallel, after a replicate): logits are all-gathered and dlogits sliced
/// back, or with vocabParallel the loss is computed from all-reduced row
/// statistics of the local logits; dx is all-reduced. dp > 1 splits the batch;
/// every rank seeds its loss with 1/dp and the gradients are all-reduced, so
/// they equal the dense ones, while the output loss is the sum of the dp ranks'
/// means (dp times the dense loss).
inline plan::Plan makeLinearPlan(const LinearModel &model, int64_t dp,
                                 int64_t tp, DType dtype = DType::F32) {
  using plan::Region;
  PlanBuilder b;
  plan::Plan &p = b.plan;
  p.modelName = "linear";
  p.mode = "test";
  p.mesh = {{"dp", dp}, {"tp", tp}};
  p.seqLen = model.seqLen;
  p.batchSize = model.batch;
  p.vocabSize = model.validVocab;
  int64_t V = model.vocab, H = model.hidden, S = model.seqLen;
  int64_t Bl = model.batch / dp, Vl = V / tp;
  plan::Sharding replicated;
  plan::Sharding byBatch{{{"dp", 1}}};
  plan::Sharding byVocab{{{"tp", 0}}};
  plan::InitSpec init{"normal", 0.5};
  auto embed = b.param("embed.weight", {V, H}, {V, H}, replicated, dtype, init);
  auto head = b.param("head.weight", {V, H}, {Vl, H}, byVocab, dtype, init);

  int64_t tokens = b.buffer("tokens", Region::Input, DType::I32, {S, Bl});
  int64_t labels = b.buffer("labels", Region::Input, DType::I32, {S, Bl});
  b.io(true, "tokens", tokens, {S, model.batch}, byBatch);
  b.io(true, "labels", labels, {S, model.batch}, byBatch);
  int64_t loss = b.buffer("loss", Region::Output, DType::F32, {});
  // With the vocab-parallel loss the logits stay split over tp.
  bool splitLogits = model.vocabParallel && tp > 1;
  int64_t logits =
      b.buffer("logits", Region::Output, dtype, {S, Bl, splitLogits ? Vl : V});
  int64_t gEmbed = b.buffer("grad:embed", Region::Output, dtype, {V, H});
  int64_t gHead = b.buffer("grad:head", Region::Output, dtype, {Vl, H});
  b.io(false, "loss", loss, {});
  b.io(false, "logits", logits, {S, model.batch, V},
       splitLogits ? plan::Sharding{{{"dp", 1}, {"tp", 2}}} : byBatch);
  b.io(false, "grad:embed.weight", gEmbed, {V, H});
  b.io(false, "grad:head.weight", gHead, {V, H}, byVocab);

  int64_t x = b.buffer("x", Region::Activation, dtype, {S, Bl, H});
  int64_t xRep =
      tp > 1 ? b.buffer("x.rep", Region::Activation, dtype, {S, Bl, H}) : x;
  bool gatherLogits = tp > 1 && !model.vocabParallel;
  int64_t logitsLocal =
      gatherLogits
          ? b.buffer("logits.local", Region::Activation, dtype, {S, Bl, Vl})
          : logits;
  int64_t lossLocal =
      dp > 1 ? b.buffer("loss.local", Region::Activation, DType::F32, {})
             : loss;
  int64_t one = b.buffer("one", Region::Activation, DType::F32, {});
  int64_t dloss = b.buffer("dloss", Region::Activation, DType::F32, {});
  int64_t dlogits = b.buffer("dlogits", Region::Activation, dtype,
                             {S, Bl, splitLogits ? Vl : V});
  int64_t dlogitsLocal =
      gatherLogits
          ? b.buffer("dlogits.local", Region::Activation, dtype, {S, Bl, Vl})
          : dlogits;
  int64_t dx = b.buffer("dx", Region::Activation, dtype, {S, Bl, H});
  std::map<std::string, plan::AttrValue> vocabAttrs{
      {"valid_vocab", model.validVocab}, {"vocab_axis", std::string("tp")}};
  auto overTp = [](const char *reduce) {
    return std::map<std::string, plan::AttrValue>{
        {"axis", std::string("tp")}, {"reduce", std::string(reduce)}};
  };

  b.instr("embedding", {embed[0], tokens}, {x});
  if (tp > 1)
    b.instr("replicate", {x}, {xRep}, {{"axis", std::string("tp")}});
  b.instr("matmul", {xRep, head[0]}, {logitsLocal});
  if (gatherLogits)
    b.instr("all_gather", {logitsLocal}, {logits},
            {{"axis", std::string("tp")}, {"dim", int64_t{2}}});
  b.instr("fill", {}, {one}, {{"value", 1.0}});
  b.instr("scale", {one}, {dloss}, {{"factor", 1.0 / static_cast<double>(dp)}});
  if (model.vocabParallel && tp > 1) {
    int64_t m = b.buffer("m", Region::Activation, DType::F32, {S, Bl});
    int64_t t = b.buffer("t", Region::Activation, DType::F32, {S, Bl});
    int64_t e = b.buffer("e", Region::Activation, DType::F32, {S, Bl});
    b.instr("vocab_max", {logits}, {m}, vocabAttrs);
    b.instr("all_reduce", {m}, {m}, overTp("max"));
    b.instr("target_logit", {logits, labels}, {t}, vocabAttrs);
    b.instr("all_reduce", {t}, {t}, overTp("sum"));
    b.instr("sum_exp", {logits, m}, {e}, vocabAttrs);
    b.instr("all_reduce", {e}, {e}, overTp("sum"));
    b.instr("vocab_parallel_loss", {logits, labels, m, t, e}, {lossLocal},
            vocabAttrs);
    b.instr("vocab_parallel_loss_grad", {logits, labels, m, e, dloss},
            {dlogits}, vocabAttrs);
  } else {
    b.instr("cross_entropy", {logits, labels}, {lossLocal},
            {{"valid_vocab", model.validVocab}});
    b.instr("cross_entropy_grad", {logits, labels, dloss}, {dlogits},
            {{"valid_vocab", model.validVocab}});
  }
  if (dp > 1)
    b.instr("all_reduce", {lossLocal}, {loss},
            {{"axis", std::string("dp")}, {"reduce", std::string("sum")}});
  if (gatherLogits)
    b.instr("slice_to_rank", {dlogits}, {dlogitsLocal},
            {{"axis", std::string("tp")}, {"dim", int64_t{2}}});
  b.instr("matmul_wgrad", {dlogitsLocal, xRep}, {gHead});
  b.instr("matmul_dgrad", {dlogitsLocal, head[0]}, {dx});
  if (tp > 1)
    b.instr("all_reduce", {dx}, {dx}, overTp("sum"));
  b.instr("embedding_grad", {dx, tokens}, {gEmbed});
  if (dp > 1) {
    for (int64_t grad : {gEmbed, gHead})
      b.instr("all_reduce", {grad}, {grad},
              {{"axis", std::string("dp")}, {"reduce", std::string("sum")}});
  }
  for (const auto &param : {embed, head})
    b.instr("adamw",
            {param[0], param == embed ? gEmbed : gHead, param[1], param[2]}, {},
            {{"lr", model.lr},
             {"beta1", 0.9},
             {"beta2", 0.999},
             {"eps", 1e-8},
             {"weight_decay", 0.01}});
  return p;
}

inline bool isCollective(const std::string &op) {
  return op == "all_reduce" || op == "all_gather" || op == "reduce_scatter" ||
         op == "all_reduce_coalesced";
}

inline bool sharesBytes(const plan::Plan &p, const plan::Instruction &x,
                        const plan::Instruction &y) {
  for (const auto *xs : {&x.operands, &x.results})
    for (int64_t i : *xs)
      for (const auto *ys : {&y.operands, &y.results})
        for (int64_t j : *ys) {
          const plan::Buffer &bx = p.buffers[i], &by = p.buffers[j];
          if (bx.region == by.region && bx.offset < by.offset + by.numBytes &&
              by.offset < bx.offset + bx.numBytes)
            return true;
        }
  return false;
}

/// Moves every collective of a one-stream plan to stream 1, as the
/// compiler's overlap schedule will: a collective waits for the compute
/// instruction before it, and the first later compute instruction sharing
/// bytes with it waits for the collective; everything else overlaps.
inline plan::Plan withAsyncCollectives(plan::Plan p) {
  p.numStreams = 2;
  p.numEvents = 0;
  int64_t lastCompute = -1;
  std::map<int64_t, int64_t> readyEvent; // compute instr -> its event
  std::vector<std::pair<int64_t, int64_t>> pending; // collective, its event
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    plan::Instruction &instr = p.instructions[i];
    if (isCollective(instr.op)) {
      instr.stream = 1;
      if (lastCompute >= 0) {
        auto [it, isNew] = readyEvent.try_emplace(lastCompute, p.numEvents);
        if (isNew)
          p.instructions[lastCompute].signals.push_back(p.numEvents++);
        instr.waits.push_back(it->second);
      }
      instr.signals.push_back(p.numEvents);
      pending.push_back({static_cast<int64_t>(i), p.numEvents++});
      continue;
    }
    lastCompute = static_cast<int64_t>(i);
    for (auto it = pending.begin(); it != pending.end();) {
      if (sharesBytes(p, p.instructions[it->first], instr)) {
        instr.waits.push_back(it->second);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  }
  return p;
}

} // namespace sharc::exec::test
