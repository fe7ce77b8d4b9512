//===- Layout.h - the layout a module asks for ------------------*- C++ -*-===//
// defines: Layout, readLayout, setMeshSize, ModelSizes, setParamPlacement,
//          forEachParam
//
// The sharding passes record what they request on the module (mesh sizes,
// sequence and vocab parallelism, per-parameter placements); sharc-spmdize
// reads it back and materialises it.
#pragma once

#include "ir/ArgumentRoles.h"
#include "ir/SharcAttrs.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>

namespace sharc {

struct Layout {
  MeshAttr mesh; ///< getMesh(module): the one place sizes are read
  bool sequenceParallel = false, vocabParallel = false;
  /// The axis whose activations sequence parallelism splits over the
  /// sequence between layers ("" without it).
  llvm::StringRef sequenceParallelAxis;
  /// The size of `axis`, 1 where the mesh lacks it.
  int64_t size(llvm::StringRef axis) const { return mesh.getSize(axis); }
};

Layout readLayout(mlir::ModuleOp module);
/// Declares `axis` of `size` on the module's mesh (see
/// MeshAttr::withAxisSize for where a new axis goes).
void setMeshSize(mlir::ModuleOp module, llvm::StringRef axis, int64_t size);

/// The model sizes the builder recorded, with where each was written.
class ModelSizes {
public:
  explicit ModelSizes(mlir::ModuleOp module);
  int64_t get(llvm::StringRef key) const;
  mlir::Location loc(llvm::StringRef key) const;

  /// Emits "<axis> (<n>) must divide <key> (<value>)" at the key's place
  /// unless n divides it.
  mlir::LogicalResult requireDivides(llvm::StringRef axis, int64_t n,
                                     llvm::StringRef key) const;

private:
  mutable mlir::ModuleOp module; // MLIR's op handles are non-const
  mlir::DictionaryAttr sizes, places;
};

/// Calls `fn(func, argIndex, role)` for every parameter argument.
void forEachParam(mlir::ModuleOp module,
                  const std::function<void(mlir::func::FuncOp, unsigned,
                                           llvm::StringRef)> &fn);

/// The requested placement of a parameter argument (all I when none).
PlacementAttr getParamPlacement(mlir::func::FuncOp func, unsigned index);
void setParamPlacement(mlir::func::FuncOp func, unsigned index,
                       llvm::StringRef axis, int64_t code);

} // namespace sharc
