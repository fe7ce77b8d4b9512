//===- ColumnSlots.h - which op slots take a column view ----------------===//
//
// A column view is a buffer whose rows are row_stride elements apart
// (plan::Buffer::rowStride): q, k and v read in place from the fused q/k/v
// GEMM's output, dq, dk and dv written in place into its joined gradient.
// Only some kernels take a row stride. The planner makes a view only where
// every reader or writer is such a slot (planner/ColumnViews.cpp); the
// runtime lets a view into those slots alone and refuses it elsewhere
// (executor checkPacked, from OpDef::stridedOperands and stridedResults,
// which the op table sets from this list). One list, so the two cannot
// disagree.
//
//===----------------------------------------------------------------------===//

#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sharc::plan {

/// Bit k of operands (results): operand (result) k of `op` may be a column
/// view.
struct ColumnSlots {
  std::string_view op;
  uint32_t operands = 0, results = 0;
};

inline constexpr ColumnSlots kColumnSlots[] = {
    {"rms_norm_rope", 1u << 0, 0},            // x
    {"rms_norm_rope_grad", 1u << 0, 1u << 0}, // x; dx
    {"attention", 1u << 2, 0},                // v
    {"attention_grad", 1u << 2, 1u << 2},     // v; dv
};

/// `op`'s entry of kColumnSlots; none for an op that takes only packed
/// buffers.
inline std::optional<ColumnSlots> columnSlotsOf(std::string_view op) {
  for (const ColumnSlots &slots : kColumnSlots)
    if (slots.op == op)
      return slots;
  return std::nullopt;
}

} // namespace sharc::plan
