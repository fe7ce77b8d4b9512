//===- SharcAttrs.td - attributes of the sharc dialect -----*- tablegen -*-===//
//
// The device mesh and placements: how a value is laid out over each axis
// of the mesh.
//
//===----------------------------------------------------------------------===//

#ifndef SHARC_ATTRS_TD
#define SHARC_ATTRS_TD

include "ir/SharcDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/TensorEncoding.td"

def Sharc_MeshAttr : AttrDef<Sharc_Dialect, "Mesh"> {
  let mnemonic = "mesh";
  let summary = "the device mesh: named axes with sizes, outermost first";
  let description = [{
    An ordered list of named axes. Ranks are numbered with the last axis
    fastest, so the innermost axis (tp by default) joins neighbouring
    devices. The default nesting is dp, pp, cp, tp; any subset may appear.
    Where several axes split one tensor dimension, the outer axis takes
    the outer (major) blocks: under `<cp = 2, tp = 2>` a sequence split
    over both gives cp rank c and tp rank t the block `2 * c + t`.
    ```mlir
    module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>}
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$axes,
                        ArrayRefParameter<"int64_t">:$sizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The size of `axis`, 1 for an axis the mesh lacks.
    int64_t getSize(::llvm::StringRef axis) const;
    /// The position of `axis`, or -1.
    int64_t indexOf(::llvm::StringRef axis) const;
    bool hasAxis(::llvm::StringRef axis) const { return indexOf(axis) >= 0; }
    /// The number of ranks.
    int64_t getNumRanks() const;
    /// A copy with `axis` of `size`: an existing axis is resized, a new one
    /// goes where the default nesting (dp, pp, cp, tp) puts it.
    MeshAttr withAxisSize(::llvm::StringRef axis, int64_t size) const;
    /// The mesh of a module that declares none: dp and tp of size 1, the
    /// axes every plan has listed.
    static MeshAttr getDefault(::mlir::MLIRContext *context);
  }];
}

def Sharc_PlacementAttr : AttrDef<Sharc_Dialect, "Placement",
    [DeclareAttrInterfaceMethods<VerifiableTensorEncoding>]> {
  let mnemonic = "place";
  let summary = "per-mesh-axis placement of a tensor, the type's encoding";
  let description = [{
    For each mesh axis one of:
    - `I` invariant: every rank holds the whole value and uses it
      identically, so its cotangent is identical too (also invariant);
    - `R` replicated: every rank holds the whole value but uses it
      differently (as the input of its own weight shard), so its cotangent
      comes back partial and must be summed;
    - `P` (or `P(sum)`) partial: the value is the sum of the per-rank
      tensors; `P(max)` their element-wise maximum;
    - `S(d)`: dimension d is split into contiguous per-rank blocks in rank
      order; the tensor type's shape is the local block. Several axes may
      split one dimension: the outer axis takes the outer (major) blocks.
      By default the mesh's nesting says which is outer; `order = [...]`
      states it where it differs, listing every axis of such a dimension
      outermost first.
    Megatron's f turns I into R. An axis not listed is invariant, so a
    tensor without an encoding is invariant on every axis and dense
    programs print as before. Entries are kept sorted by axis name, with
    no I entries and no order the default nesting (dp, pp, cp, tp) gives,
    so equal placements are equal attributes.
    ```mlir
    tensor<8x2x32xf32, #sharc.place<cp = S(0), dp = S(1), tp = S(0)>>
    // heads split by tp, each tp block split again by cp (Ulysses in tp)
    tensor<8x2x8xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$axes,
                        ArrayRefParameter<"int64_t">:$codes,
                        ArrayRefParameter<"::mlir::StringAttr">:$order);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Codes of the non-shard kinds; a shard on dimension d is d itself.
    static constexpr int64_t kInvariant = -1;
    static constexpr int64_t kReplicated = -2;
    static constexpr int64_t kPartial = -3;    ///< partial sum
    static constexpr int64_t kPartialMax = -4; ///< partial maximum
    /// The canonical placement of (axis, code) pairs in any order; I
    /// entries are dropped. The pairs name each axis at most once.
    /// `order` states the split order (outermost first) of dimensions
    /// several axes split; it is dropped where it is the default nesting.
    static PlacementAttr make(::mlir::MLIRContext *context,
        ::llvm::ArrayRef<std::pair<::llvm::StringRef, int64_t>> entries,
        ::llvm::ArrayRef<::llvm::StringRef> order = {});
    /// Invariant on every axis (no entries).
    static PlacementAttr getInvariant(::mlir::MLIRContext *context);
    /// The code on `axis`; I for an axis not listed.
    int64_t getAxis(::llvm::StringRef axis) const;
    /// A copy with `axis` set to `code`; a new split of a dimension other
    /// axes already split goes inside them (innermost).
    PlacementAttr withAxis(::llvm::StringRef axis, int64_t code) const;
    /// The axes splitting `dim` outermost first: the stated order, else
    /// the default nesting (placement::axesSplitting reads the mesh's).
    ::llvm::SmallVector<::llvm::StringRef> splitOrder(int64_t dim) const;
    /// True when every axis is I.
    bool isInvariant() const { return getAxes().empty(); }
  }];
}

#endif // SHARC_ATTRS_TD
