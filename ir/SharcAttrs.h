//===- SharcAttrs.h - attributes of the sharc dialect -----------*- C++ -*-===//
// defines: sharc::PlacementAttr, getPlacement, withPlacement
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

} // namespace sharc
