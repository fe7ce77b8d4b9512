//===- OpSchema.cpp - the operands and attributes of each plan op ---------===//
//
// The table follows the ODS definitions in ir/SharcOps.td and
// ir/SharcCollectiveOps.td, as planner/PlanEmitter.cpp writes them (it adds
// rms_norm's group_size), and the binds in executor/*Ops.cpp and
// executor/OpTable.cpp, which read exactly these attributes.
//
//===----------------------------------------------------------------------===//

#include "planner/plan/OpSchema.h"

#include <algorithm>

namespace sharc::plan {
namespace {

AttrSpec intAttr(const char *name, int64_t minimum) {
  return {name, AttrKind::Int, true, minimum, {}};
}

AttrSpec floatAttr(const char *name) {
  return {name, AttrKind::Float, true, INT64_MIN, {}};
}

AttrSpec axisAttr(const char *name) {
  return {name, AttrKind::Axis, true, INT64_MIN, {}};
}

AttrSpec intListAttr(const char *name, int64_t minimum) {
  return {name, AttrKind::IntList, true, minimum, {}};
}
AttrSpec optional(AttrSpec spec) {
  spec.required = false;
  return spec;
}

std::vector<OpSchema> makeSchemas() {
  // Absent, vocab_start and position_offset are 0; an absent vocab_axis or
  // position_axis means the dimension is not split.
  std::vector<AttrSpec> embedding = {optional(intAttr("vocab_start", 0)),
                                     optional(axisAttr("vocab_axis"))};
  std::vector<AttrSpec> rmsNorm = {floatAttr("eps"), intAttr("group_size", 1)};
  // position_split: absent, the axis's contiguous blocks; "balanced",
  // chunks r and 2n-1-r of 2n (kernels/SequencePositions.h).
  AttrSpec positionSplit = {
      "position_split", AttrKind::String, false, INT64_MIN, {"balanced"}};
  std::vector<AttrSpec> rope = {intAttr("head_dim", 1), floatAttr("theta"),
                                optional(intAttr("position_offset", 0)),
                                optional(axisAttr("position_axis")),
                                positionSplit};
  std::vector<AttrSpec> attention = {intAttr("head_dim", 1),
                                     optional(axisAttr("position_axis")),
                                     positionSplit};
  // Ring attention's blocks: position_axis names the split, kv_shift the
  // steps the K/V block has moved, position_split as attention's
  // (docs/plan-ops.md).
  std::vector<AttrSpec> attentionBlock = {
      intAttr("head_dim", 1), axisAttr("position_axis"), intAttr("kv_shift", 0),
      positionSplit};
  std::vector<AttrSpec> normRope = rope;
  normRope.push_back(floatAttr("eps"));
  std::vector<AttrSpec> validVocab = {intAttr("valid_vocab", 1)};
  std::vector<AttrSpec> vocabParallel = {intAttr("valid_vocab", 1),
                                         axisAttr("vocab_axis")};
  std::vector<AttrSpec> overAxis = {axisAttr("axis")};
  std::vector<AttrSpec> alongDim = {axisAttr("axis"), intAttr("dim", 0)};
  std::vector<AttrSpec> reduce = {
      axisAttr("axis"),
      {"reduce", AttrKind::String, true, INT64_MIN, {"sum", "max"}}};
  std::vector<AttrSpec> adamw = {
      floatAttr("lr"),           floatAttr("beta1"),
      floatAttr("beta2"),        floatAttr("eps"),
      floatAttr("weight_decay"), optional(floatAttr("max_norm"))};
  return {
      {"embedding",
       {{"table", 'T'}, {"ids", 'I'}},
       {{"out", 'T'}},
       false,
       embedding},
      {"embedding_grad",
       {{"dout", 'T'}, {"ids", 'I'}},
       {{"dtable", 'T'}},
       false,
       embedding},
      {"rms_norm", {{"x", 'T'}, {"w", 'T'}}, {{"y", 'T'}}, false, rmsNorm},
      {"rms_norm_grad",
       {{"x", 'T'}, {"w", 'T'}, {"dy", 'T'}},
       {{"dx", 'T'}, {"dw", 'T'}},
       false,
       rmsNorm},
      {"rms_norm_grad_add",
       {{"x", 'T'}, {"w", 'T'}, {"dy", 'T'}, {"r", 'T'}},
       {{"dx", 'T'}, {"dw", 'T'}},
       false,
       rmsNorm},
      {"matmul", {{"x", 'T'}, {"w", 'T'}}, {{"y", 'T'}}, false, {}},
      {"matmul_dgrad", {{"dy", 'T'}, {"w", 'T'}}, {{"dx", 'T'}}, false, {}},
      {"matmul_add",
       {{"x", 'T'}, {"w", 'T'}, {"r", 'T'}},
       {{"y", 'T'}},
       false,
       {}},
      {"matmul_dgrad_add",
       {{"dy", 'T'}, {"w", 'T'}, {"r", 'T'}},
       {{"dx", 'T'}},
       false,
       {}},
      {"matmul_wgrad", {{"dy", 'T'}, {"x", 'T'}}, {{"dw", 'T'}}, false, {}},
      {"rope", {{"x", 'T'}}, {{"y", 'T'}}, false, rope},
      {"rope_grad", {{"dy", 'T'}}, {{"dx", 'T'}}, false, rope},
      {"rms_norm_rope",
       {{"x", 'T'}, {"w", 'T'}},
       {{"y", 'T'}},
       false,
       normRope},
      {"rms_norm_rope_grad",
       {{"x", 'T'}, {"w", 'T'}, {"dy", 'T'}},
       {{"dx", 'T'}, {"dw", 'T'}},
       false,
       normRope},
      {"attention",
       {{"q", 'T'}, {"k", 'T'}, {"v", 'T'}},
       {{"out", 'T'}, {"lse", 'F'}},
       false,
       attention},
      // Generation's step (--decode): k_cache and v_cache updated in place.
      {"decode_attention",
       {{"q", 'T'},
        {"k", 'T'},
        {"v", 'T'},
        {"k_cache", 'T'},
        {"v_cache", 'T'},
        {"positions", 'I'}},
       {{"out", 'T'}},
       false,
       {intAttr("head_dim", 2), floatAttr("theta")}},
      {"attention_grad",
       {{"q", 'T'},
        {"k", 'T'},
        {"v", 'T'},
        {"out", 'T'},
        {"lse", 'F'},
        {"dout", 'T'}},
       {{"dq", 'T'}, {"dk", 'T'}, {"dv", 'T'}, {"workspace", 'F'}},
       false,
       attention,
       0,
       false,
       /*workspaceResults=*/1},
      {"attention_block",
       {{"q", 'T'}, {"k", 'T'}, {"v", 'T'}},
       {{"out", 'T'}, {"lse", 'F'}},
       false,
       attentionBlock},
      {"attention_block_grad",
       {{"q", 'T'},
        {"k", 'T'},
        {"v", 'T'},
        {"out", 'T'},
        {"lse", 'F'},
        {"dout", 'T'},
        {"dlse", 'F'}},
       {{"dq", 'T'}, {"dk", 'T'}, {"dv", 'T'}, {"workspace", 'F'}},
       false,
       attentionBlock,
       /*optionalOperands=*/1,
       false,
       /*workspaceResults=*/1},
      {"lse_merge",
       {{"out_a", 'T'}, {"lse_a", 'F'}, {"out_b", 'T'}, {"lse_b", 'F'}},
       {{"out", 'T'}, {"lse", 'F'}},
       false,
       {}},
      {"lse_merge_grad",
       {{"part", 'T'},
        {"lse_part", 'F'},
        {"out", 'T'},
        {"lse", 'F'},
        {"dout", 'T'},
        {"dlse", 'F'}},
       {{"dpart", 'T'}, {"dlse_part", 'F'}},
       false,
       {}},
      {"swiglu", {{"gate", 'T'}, {"up", 'T'}}, {{"y", 'T'}}, false, {}},
      {"swiglu_grad",
       {{"gate", 'T'}, {"up", 'T'}, {"dy", 'T'}},
       {{"dgate", 'T'}, {"dup", 'T'}},
       false,
       {}},
      {"swiglu_packed", {{"gu", 'T'}}, {{"y", 'T'}}, false, {}},
      {"swiglu_packed_grad",
       {{"gu", 'T'}, {"dy", 'T'}},
       {{"dgu", 'T'}},
       false,
       {}},
      {"add", {{"a", 'T'}, {"b", 'T'}}, {{"y", 'T'}}, false, {}},
      {"cross_entropy",
       {{"logits", 'T'}, {"labels", 'I'}},
       {{"loss", 'F'}},
       false,
       validVocab},
      {"cross_entropy_grad",
       {{"logits", 'T'}, {"labels", 'I'}, {"dloss", 'F'}},
       {{"dlogits", 'T'}},
       false,
       validVocab},
      {"valid_count", {{"labels", 'I'}}, {{"count", 'F'}}, false, validVocab},
      {"count_scale",
       {{"x", 'F'}, {"labels", 'I'}, {"total", 'F'}},
       {{"y", 'F'}},
       false,
       validVocab},
      {"fill", {}, {{"out", 'T'}}, false, {floatAttr("value")}},
      {"scale", {{"x", 'T'}}, {{"y", 'T'}}, false, {floatAttr("factor")}},
      {"adamw",
       {{"param", 'T'},
        {"grad", 'T'},
        {"m", 'T'},
        {"v", 'T'},
        {"grad_norm_sq", 'F'}},
       {},
       false,
       adamw,
       /*optionalOperands=*/1},
      // bf16-mixed: the f32 master is updated, param = bf16(master).
      {"adamw_master",
       {{"param", 'T'},
        {"grad", 'T'},
        {"m", 'F'},
        {"v", 'F'},
        {"master", 'F'},
        {"grad_norm_sq", 'F'}},
       {},
       false,
       adamw,
       /*optionalOperands=*/1},
      {"sum_squares",
       {{"x", 'T'}},
       {{"sum", 'F'}},
       false,
       {intListAttr("replicas", 1)},
       0,
       /*repeatedOperand=*/true},
      {"all_reduce", {{"x", 'T'}}, {{"y", 'T'}}, false, reduce},
      {"all_reduce_coalesced", {{"x", 'T'}}, {{"y", 'T'}}, true, overAxis},
      {"reduce_scatter_coalesced", {{"x", 'T'}}, {{"y", 'T'}}, true, overAxis},
      {"all_gather_coalesced", {{"x", 'T'}}, {{"y", 'T'}}, true, overAxis},
      {"all_gather", {{"x", 'T'}}, {{"y", 'T'}}, false, alongDim},
      {"reduce_scatter", {{"x", 'T'}}, {{"y", 'T'}}, false, alongDim},
      {"all_to_all",
       {{"x", 'T'}},
       {{"y", 'T'}},
       false,
       {axisAttr("axis"), intAttr("split_dim", 0), intAttr("concat_dim", 0)}},
      {"slice_to_rank", {{"x", 'T'}}, {{"y", 'T'}}, false, alongDim},
      {"ring_shift",
       {{"x", 'T'}},
       {{"y", 'T'}},
       false,
       {axisAttr("axis"), intAttr("offset", -1), intAttr("first", 0),
        optional(intAttr("wrap", 0))}},
      {"replicate", {{"x", 'T'}}, {{"y", 'T'}}, false, overAxis},
      {"send",
       {{"x", 'T'}},
       {},
       false,
       {axisAttr("axis"), intAttr("peer", 0), optional(intAttr("tag", 0))}},
      {"recv",
       {},
       {{"y", 'T'}},
       false,
       {axisAttr("axis"), intAttr("peer", 0), optional(intAttr("tag", 0))}},
      {"permute_blocks",
       {{"x", 'T'}},
       {{"y", 'T'}},
       false,
       {intListAttr("order", 0)}},
      {"column_slice",
       {{"x", 'A'}},
       {{"y", 'A'}},
       false,
       {intAttr("offset", 0)}},
      {"column_insert",
       {{"x", 'A'}},
       {{"y", 'A'}},
       false,
       {intAttr("offset", 0)}},
      {"vocab_max", {{"logits", 'T'}}, {{"max", 'F'}}, false, vocabParallel},
      {"target_logit",
       {{"logits", 'T'}, {"labels", 'I'}},
       {{"target", 'F'}},
       false,
       vocabParallel},
      {"sum_exp",
       {{"logits", 'T'}, {"max", 'F'}},
       {{"sum_exp", 'F'}},
       false,
       vocabParallel},
      {"vocab_parallel_loss",
       {{"logits", 'T'},
        {"labels", 'I'},
        {"max", 'F'},
        {"target", 'F'},
        {"sum_exp", 'F'}},
       {{"loss", 'F'}},
       false,
       vocabParallel},
      {"vocab_parallel_loss_grad",
       {{"logits", 'T'},
        {"labels", 'I'},
        {"max", 'F'},
        {"sum_exp", 'F'},
        {"dloss", 'F'}},
       {{"dlogits", 'T'}},
       false,
       vocabParallel},
  };
}

} // namespace

const char *attrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "an integer";
  case AttrKind::Float:
    return "a float";
  case AttrKind::String:
    return "a string";
  case AttrKind::Axis:
    return "a mesh axis name";
  case AttrKind::IntList:
    return "a list of integers";
  }
  return "?";
}

const AttrSpec *OpSchema::findAttr(std::string_view attr) const {
  for (const AttrSpec &spec : attrs)
    if (spec.name == attr)
      return &spec;
  return nullptr;
}

const OpSchema *findOpSchema(std::string_view op) {
  static const std::vector<OpSchema> schemas = makeSchemas();
  auto it =
      std::find_if(schemas.begin(), schemas.end(),
                   [&](const OpSchema &schema) { return schema.name == op; });
  return it == schemas.end() ? nullptr : &*it;
}

} // namespace sharc::plan
