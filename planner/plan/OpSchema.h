//===- OpSchema.h - the operands and attributes of each plan op -*- C++ -*-===//
// defines: AttrKind, AttrSpec, SlotSpec, OpSchema, findOpSchema,
//          attrKindName
//
// One entry per op of docs/plan-ops.md: its operands and results in order,
// each with the element type its kernel accepts, and its attributes, each
// with a kind and whether a plan may leave it out. The compiler always
// writes every required attribute; an optional one (vocab_axis,
// vocab_start, position_axis, position_offset) has a documented meaning
// when absent. PlanContract.cpp checks every instruction against it.
//
//   const OpSchema *schema = findOpSchema("rms_norm");
//   schema->attrs[0].name;  // "eps", AttrKind::Float, required
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sharc::plan {

enum class AttrKind : uint8_t {
  Int,
  Float,   ///< a float; an integer is taken as the same float
  String,  ///< one of `choices`
  Axis,    ///< a string naming an axis of the plan's mesh
  IntList, ///< a list of integers, each at least `minimum`
};

const char *attrKindName(AttrKind kind);

struct AttrSpec {
  std::string name;
  AttrKind kind = AttrKind::Int;
  bool required = true;
  int64_t minimum = INT64_MIN;      ///< Int and IntList only
  std::vector<std::string> choices; ///< String only
};

/// An operand or result: its role (for messages) and the element type its
/// kernel takes: 'T' a float type, f32 or bf16, shared by every 'T' slot of
/// the instruction (cuBLASLt and the fused kernels take one float type);
/// 'F' f32 (statistics, the loss); 'I' i32 (token ids, labels); 'A' any
/// type, shared by every 'A' slot (byte copies: column_slice of ids).
struct SlotSpec {
  std::string role;
  char type = 'T';
};

struct OpSchema {
  std::string name;
  std::vector<SlotSpec> operands, results;
  /// The one operand and one result repeat, in pairs (a gradient bucket):
  /// one or more operands and as many results; each pair shares its 'T'.
  bool variadic = false;
  std::vector<AttrSpec> attrs;
  /// The last this many operands may be left out (adamw's grad_norm_sq,
  /// attention_block_grad's dlse).
  int optionalOperands = 0;
  /// The one operand repeats, one or more times, each with its own 'T'
  /// (sum_squares); the results are as listed.
  bool repeatedOperand = false;
  /// The last this many results may be left out: scratch a kernel works in
  /// during the instruction (attention_grad's cuDNN workspace), placed in
  /// the activation arena like any buffer but never read as a value.
  int workspaceResults = 0;

  const AttrSpec *findAttr(std::string_view attr) const;
};

/// Null for an op the plan format does not define.
const OpSchema *findOpSchema(std::string_view op);

} // namespace sharc::plan
