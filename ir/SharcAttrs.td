//===- SharcAttrs.td - attributes of the sharc dialect -----*- tablegen -*-===//
//
// Placements: how a value is laid out over each axis of the device mesh.
//
//===----------------------------------------------------------------------===//

#ifndef SHARC_ATTRS_TD
#define SHARC_ATTRS_TD

include "ir/SharcDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Sharc_PlacementAttr : AttrDef<Sharc_Dialect, "Placement"> {
  let mnemonic = "place";
  let summary = "per-mesh-axis placement of a tensor, the type's encoding";
  let description = [{
    For each mesh axis (dp, tp) one of:
    - `I` invariant: every rank holds the whole value and uses it
      identically, so its cotangent is identical too (also invariant);
    - `R` replicated: every rank holds the whole value but uses it
      differently (as the input of its own weight shard), so its cotangent
      comes back partial and must be summed;
    - `P` partial: the value is the sum (or, feeding an all_reduce max, the
      max) of the per-rank tensors;
    - `S(d)`: dimension d is split into contiguous per-rank blocks in rank
      order; the tensor type's shape is the local block.
    Megatron's f turns I into R. A tensor without an encoding is invariant
    on every axis.
    ```mlir
    tensor<16x2x32xf32, #sharc.place<dp = I, tp = S(2)>>
    ```
  }];
  let parameters = (ins "int64_t":$dp, "int64_t":$tp);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    /// Codes of the non-shard kinds; a shard on dimension d is d itself.
    static constexpr int64_t kInvariant = -1;
    static constexpr int64_t kReplicated = -2;
    static constexpr int64_t kPartial = -3;
    /// The code on `axis` ("dp" or "tp").
    int64_t getAxis(::llvm::StringRef axis) const;
    /// A copy with `axis` set to `code`.
    PlacementAttr withAxis(::llvm::StringRef axis, int64_t code) const;
  }];
}

#endif // SHARC_ATTRS_TD
