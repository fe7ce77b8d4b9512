//===- SharcAttrs.h - attributes of the sharc dialect -----------*- C++ -*-===//
// defines: sharc::MeshAttr, sharc::PlacementAttr, getMesh, setMesh,
//          splitAxes, joinAxes, getPlacement, withPlacement, cotangentType,
//          placement::{kI, kR, kP, kPMax, name, axesSplitting,
//          withSplitOrder, splitFactor, matmulRule}
#pragma once

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/TensorEncoding.h"

#include <optional>
#include <string>

namespace mlir {
class ModuleOp;
} // namespace mlir

#define GET_ATTRDEF_CLASSES
#include "ir/SharcAttrs.h.inc"

namespace sharc {

/// The mesh of the module holding `op` (or of `op`, a module): the one
/// place mesh sizes are read. MeshAttr::getDefault when none is declared.
MeshAttr getMesh(mlir::Operation *op);
void setMesh(mlir::ModuleOp module, MeshAttr mesh);

/// The axes of a collective's `axis` attribute: one name, or for a
/// reduction over several axes at once their names joined by ',' in mesh
/// order ("dp,tp"), the plan's spelling too.
llvm::SmallVector<llvm::StringRef> splitAxes(llvm::StringRef axisList);
/// `axes` joined as splitAxes reads them.
std::string joinAxes(llvm::ArrayRef<llvm::StringRef> axes);

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
inline constexpr int64_t kPMax = PlacementAttr::kPartialMax;
/// "I", "R", "P", "P(max)" or "S(d)", as the IR prints them.
std::string name(int64_t code);
/// The axes that split dimension `dim`, outermost (major blocks) first:
/// the placement's stated order, else the mesh's nesting.
llvm::SmallVector<llvm::StringRef> axesSplitting(PlacementAttr placement,
                                                 int64_t dim, MeshAttr mesh);
/// `placement` with the axes splitting `dim` ordered `outerFirst` (all of
/// them), stated only where `mesh`'s nesting would give another order.
PlacementAttr withSplitOrder(PlacementAttr placement, int64_t dim,
                             llvm::ArrayRef<llvm::StringRef> outerFirst,
                             MeshAttr mesh);
/// How many blocks dimension `dim` is cut into: the product of the sizes
/// of the axes splitting it.
int64_t splitFactor(PlacementAttr placement, int64_t dim, MeshAttr mesh);
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
