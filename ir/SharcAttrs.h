//===- SharcAttrs.h - attributes of the sharc dialect -----------*- C++ -*-===//
// defines: sharc::PlacementAttr, getPlacement, withPlacement, cotangentType,
//          placement::{kI, kR, kP, name, matmulRule}
#pragma once

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"

#include <optional>
#include <string>

#define GET_ATTRDEF_CLASSES
#include "ir/SharcAttrs.h.inc"

namespace sharc {

/// The placement in a tensor type's encoding, or all-invariant when the
/// type has none.
PlacementAttr getPlacement(mlir::Type type);

/// `type` with its encoding replaced by `placement` (none when it is all
/// invariant, so dense programs print without encodings).
mlir::RankedTensorType withPlacement(mlir::Type type, PlacementAttr placement);

/// Short names of the placement codes, for passes and verifiers.
namespace placement {
inline constexpr int64_t kI = PlacementAttr::kInvariant;
inline constexpr int64_t kR = PlacementAttr::kReplicated;
inline constexpr int64_t kP = PlacementAttr::kPartial;
/// "I", "R", "P" or "S(d)", as the IR prints them.
std::string name(int64_t code);
/// The placement rule of y = x w^T on one axis: column parallel (R, S(0))
/// gives S(last), row parallel (S(last), S(1)) gives P, whole weights keep
/// an I input I, and a batch or sequence split passes through a weight
/// held whole (R or I). nullopt where the rule has no case.
std::optional<int64_t> matmulRule(int64_t x, int64_t w, int64_t lastDim);
} // namespace placement

/// The type of a cotangent of a value of `primal` type: on each axis
/// S(d) stays S(d), a replicated value's cotangent is partial (each rank's
/// use contributes a part), a partial value's cotangent is invariant (every
/// summand gets the whole), an invariant value's stays invariant.
mlir::RankedTensorType cotangentType(mlir::Type primal);

} // namespace sharc
