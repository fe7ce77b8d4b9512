//===- SharcAttrs.h - attributes of the sharc dialect -----------*- C++ -*-===//
// defines: sharc::PlacementAttr, getPlacement, withPlacement, cotangentType
#pragma once

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"

#define GET_ATTRDEF_CLASSES
#include "ir/SharcAttrs.h.inc"

namespace sharc {

/// The placement in a tensor type's encoding, or all-invariant when the
/// type has none.
PlacementAttr getPlacement(mlir::Type type);

/// `type` with its encoding replaced by `placement` (none when it is all
/// invariant, so dense programs print without encodings).
mlir::RankedTensorType withPlacement(mlir::Type type, PlacementAttr placement);

/// The type of a cotangent of a value of `primal` type: on each axis
/// S(d) stays S(d), a replicated value's cotangent is partial (each rank's
/// use contributes a part), a partial value's cotangent is invariant (every
/// summand gets the whole), an invariant value's stays invariant.
mlir::RankedTensorType cotangentType(mlir::Type primal);

} // namespace sharc
