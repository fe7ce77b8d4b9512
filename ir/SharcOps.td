//===- SharcOps.td - operations of the sharc dialect -------*- tablegen -*-===//
//
// One def per op. The math of each op is stated once in its kernel header
// (kernels/<Op>.h); the description here gives the shapes and an example.
//
//===----------------------------------------------------------------------===//

#ifndef SHARC_OPS_TD
#define SHARC_OPS_TD

include "ir/SharcDialect.td"
include "ir/SharcAttrs.td"
include "ir/SharcInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Sharc_FloatTensor : RankedTensorOf<[F32, BF16]>;
def Sharc_IdTensor : RankedTensorOf<[I32]>;
def Sharc_ScalarF32 : 0DTensorOf<[F32]>;
// A copy moves any element type (a microbatch's slice of the token ids).
def Sharc_AnyTensor : RankedTensorOf<[F32, BF16, I32]>;

// `costMethods` lists the CostOpInterface methods an op defines itself; the
// others keep the interface's elementwise default.
class Sharc_ComputeOp<string mnemonic, list<Trait> traits = [],
                      list<string> costMethods = []>
    : Sharc_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<Sharc_CostOpInterface, costMethods>])> {
  let assemblyFormat =
      "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

class Sharc_DiffOp<string mnemonic, list<Trait> traits = [],
                   list<string> costMethods = []>
    : Sharc_ComputeOp<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<Sharc_VJPOpInterface>]), costMethods>;

// A forward op spmdize can shard; `ruleMethods` lists the
// ShardingRuleOpInterface methods it defines itself (the others keep the
// elementwise defaults).
class Sharc_ShardedOp<string mnemonic, list<Trait> traits = [],
                      list<string> ruleMethods = [],
                      list<string> costMethods = []>
    : Sharc_DiffOp<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<Sharc_ShardingRuleOpInterface,
                                   ruleMethods>]), costMethods>;

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

def Sharc_EmbeddingOp : Sharc_ShardedOp<"embedding", [InferTypeOpAdaptor],
    ["getAxisRule", "buildSharded"]> {
  let summary = "token embedding lookup";
  let description = [{
    `table` is `[V, H]` (rows `[vocab_start, vocab_start + V)` of the
    vocabulary), `ids` is `[S, B]`, the result `[S, B, H]`. Ids outside the
    table's rows give zero rows.
    ```mlir
    %h = sharc.embedding %table, %ids
        : (tensor<128x64xf32>, tensor<16x2xi32>) -> tensor<16x2x64xf32>
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$table, Sharc_IdTensor:$ids,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_start,
                       OptionalAttr<StrAttr>:$vocab_axis);
  let results = (outs Sharc_FloatTensor:$out);
}

def Sharc_RmsNormOp : Sharc_ShardedOp<"rms_norm",
    [AllTypesMatch<["x", "y"]>], ["getAxisRule"]> {
  let summary = "RMSNorm over contiguous groups of the last dimension";
  let description = [{
    `x` is `[.., C]`, `w` is `[G]` with `C % G == 0`; each group of G
    contiguous elements is normalised on its own (G = C for layer norms,
    G = head_dim for q_norm/k_norm). Same type as `x`.
  }];
  let arguments = (ins Sharc_FloatTensor:$x, Sharc_FloatTensor:$w,
                       F64Attr:$eps);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_MatmulOp
    : Sharc_ShardedOp<"matmul", [InferTypeOpAdaptor],
        ["getAxisRule", "buildSharded"], ["getFlops"]> {
  let summary = "linear layer y = x w^T";
  let description = [{
    `x` is `[.., K]`, `w` is `[N, K]` (the `[out, in]` layout), the result
    `[.., N]`. The result type is inferred: its placement on each mesh
    axis follows the rule of placement::matmulRule (column parallel,
    row parallel, whole weights, a batch or sequence split passing through).
    ```mlir
    %q = sharc.matmul %x, %wq
        : (tensor<16x2x64xf32>, tensor<64x64xf32>) -> tensor<16x2x64xf32>
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$x, Sharc_FloatTensor:$w);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_RopeOp : Sharc_ShardedOp<"rope", [AllTypesMatch<["x", "y"]>],
    ["buildSharded"]> {
  let summary = "rotary position embedding, rotate-half form";
  let description = [{
    `x` is `[S, B, h * head_dim]`; position of row s is
    `s + position_offset`. With `position_axis` (context parallelism), x is
    this rank's part of a sequence split over that axis, and positions are
    global: its contiguous block, `s + coord(axis) * S + position_offset`,
    or with `position_split = "balanced"` chunks `coord` and
    `2 size(axis) - 1 - coord` of `2 size(axis)` (kernels/SequencePositions.h).
    Same type as `x`.
  }];
  let arguments = (ins Sharc_FloatTensor:$x, I64Attr:$head_dim, F64Attr:$theta,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset,
                       OptionalAttr<StrAttr>:$position_axis,
                       OptionalAttr<StrAttr>:$position_split);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_AttentionOp
    : Sharc_ShardedOp<"attention", [InferTypeOpAdaptor],
        ["getAxisRule", "buildSharded"], ["getFlops"]> {
  let summary = "causal grouped-query attention";
  let description = [{
    `q` is `[S, B, Hq * D]`, `k` and `v` are `[Sk, B, Hkv * D]` with
    `Hq % Hkv == 0`; `out` is `[S, B, Hq * D]` and `lse`, the log-sum-exp of
    each softmax row kept for the backward, is `[B, Hq, S]` f32. Without
    `position_axis`, `Sk == S` and query i sees keys j <= i. With it
    (context parallelism's K/V all-gather), q is this rank's part of a
    sequence split over that axis (as rope's `position_axis` and
    `position_split` place it), k and v hold the whole sequence in natural
    order, and query i sees keys j <= its global position.

    Sharding rule: batch (S(1)) and heads (S(2)) splits pass through. A
    sequence split (S(0), context parallelism) takes the exchange the
    module's `sharc.context_parallel` attribute names: `a2a` (Ulysses)
    brings q, k and v to S(2) by all_to_all and runs whole-sequence
    attention on the local heads; `all_gather` gathers k and v to R (their
    gradients come back by reduce_scatter) and sets `position_axis`. Under
    the balanced split (`sharc.balanced_axis`) the exchanged sequence
    arrives in rank order, chunks `0, 2n-1, 1, 2n-2, ...`: the local op
    puts it in natural order with `sharc.permute_blocks` (q, k, v and back
    for the output under a2a; k and v under all_gather).
  }];
  let arguments = (ins Sharc_FloatTensor:$q, Sharc_FloatTensor:$k,
                       Sharc_FloatTensor:$v, I64Attr:$head_dim,
                       OptionalAttr<StrAttr>:$position_axis,
                       OptionalAttr<StrAttr>:$position_split);
  let results = (outs Sharc_FloatTensor:$out, RankedTensorOf<[F32]>:$lse);
}

def Sharc_PermuteBlocksOp
    : Sharc_DiffOp<"permute_blocks", [AllTypesMatch<["x", "y"]>]> {
  let summary = "a static permutation of equal blocks along dimension 0";
  let description = [{
    Dimension 0 of `x` is cut into `size(order)` equal blocks; block i of
    `y` is block `order[i]` of `x`. Made by attention's local builder under
    the balanced context-parallel split, to bring a sequence gathered in
    rank order into natural order and back; its VJP is the inverse
    permutation. Same type as `x`.
    ```mlir
    %y = sharc.permute_blocks %x {order = array<i64: 0, 2, 3, 1>}
        : (tensor<16x2x64xf32>) -> tensor<16x2x64xf32>
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$x, DenseI64ArrayAttr:$order);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_SwigluOp
    : Sharc_ShardedOp<"swiglu", [AllTypesMatch<["gate", "up", "y"]>]> {
  let summary = "silu(gate) * up";
  let arguments = (ins Sharc_FloatTensor:$gate, Sharc_FloatTensor:$up);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_AddOp : Sharc_ShardedOp<"add", [AllTypesMatch<["a", "b", "y"]>]> {
  let summary = "elementwise sum of two tensors of one type";
  let arguments = (ins Sharc_FloatTensor:$a, Sharc_FloatTensor:$b);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_CrossEntropyOp : Sharc_ShardedOp<"cross_entropy", [],
    ["getAxisRule", "buildSharded"]> {
  let summary = "mean token cross entropy over non-ignored labels";
  let description = [{
    `logits` is `[S, B, V]`, `labels` `[S, B]` (already shifted; -100 is
    ignored); the result is the f32 mean loss. Columns at or beyond
    `valid_vocab` (vocabulary padding) take no part.
  }];
  let arguments = (ins Sharc_FloatTensor:$logits, Sharc_IdTensor:$labels,
                       I64Attr:$valid_vocab);
  let results = (outs Sharc_ScalarF32:$loss);
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

def Sharc_EmbeddingGradOp : Sharc_ComputeOp<"embedding_grad"> {
  let summary = "gradient of the embedding table";
  let arguments = (ins Sharc_FloatTensor:$dout, Sharc_IdTensor:$ids,
                       DefaultValuedAttr<I64Attr, "0">:$vocab_start,
                       OptionalAttr<StrAttr>:$vocab_axis);
  let results = (outs Sharc_FloatTensor:$dtable);
}

def Sharc_RmsNormGradOp : Sharc_ComputeOp<"rms_norm_grad"> {
  let summary = "gradients of rms_norm with respect to x and w";
  let arguments = (ins Sharc_FloatTensor:$x, Sharc_FloatTensor:$w,
                       Sharc_FloatTensor:$dy, F64Attr:$eps);
  let results = (outs Sharc_FloatTensor:$dx, Sharc_FloatTensor:$dw);
}

def Sharc_RmsNormGradAddOp : Sharc_ComputeOp<"rms_norm_grad_add"> {
  let summary = "gradients of rms_norm, dx plus an addend";
  let description = [{
    Made by `sharc-fuse-adds` from the residual stream's gradient sum
    autodiff builds at every norm, `sharc.add(dx, r)` with `dx` from
    `sharc.rms_norm_grad(x, w, dy)`: one kernel that adds `r` to dx in fp32
    before its one rounding, instead of a stored dx and an elementwise pass.
    `r` has `dx`'s type; `dw` is as rms_norm_grad's.
  }];
  let arguments = (ins Sharc_FloatTensor:$x, Sharc_FloatTensor:$w,
                       Sharc_FloatTensor:$dy, Sharc_FloatTensor:$r,
                       F64Attr:$eps);
  let results = (outs Sharc_FloatTensor:$dx, Sharc_FloatTensor:$dw);
}

def Sharc_MatmulDgradOp : Sharc_ComputeOp<"matmul_dgrad", [], ["getFlops"]> {
  let summary = "input gradient of a linear layer, dx = dy w";
  let arguments = (ins Sharc_FloatTensor:$dy, Sharc_FloatTensor:$w);
  let results = (outs Sharc_FloatTensor:$dx);
}

def Sharc_MatmulAddOp : Sharc_ComputeOp<"matmul_add", [], ["getFlops"]> {
  let summary = "a linear layer plus an addend, y = x w^T + r";
  let description = [{
    Made by `sharc-fuse-adds` from `sharc.add(sharc.matmul(x, w), r)` when
    nothing else reads the product: one GEMM whose epilogue adds `r`
    (cuBLASLt's C with beta 1) before the one rounding to storage, instead
    of a GEMM, a stored product and an elementwise pass. `r` has `y`'s type.
  }];
  let arguments = (ins Sharc_FloatTensor:$x, Sharc_FloatTensor:$w,
                       Sharc_FloatTensor:$r);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_MatmulDgradAddOp
    : Sharc_ComputeOp<"matmul_dgrad_add", [], ["getFlops"]> {
  let summary = "an input gradient plus an addend, dx = dy w + r";
  let description = [{
    Made by `sharc-fuse-adds` from the sum of input gradients autodiff
    builds where a value feeds several GEMMs (q, k and v; gate and up; a
    residual branch): `sharc.add(sharc.matmul_dgrad(dy, w), r)` becomes one
    GEMM that adds `r` in its epilogue. `r` has `dx`'s type.
  }];
  let arguments = (ins Sharc_FloatTensor:$dy, Sharc_FloatTensor:$w,
                       Sharc_FloatTensor:$r);
  let results = (outs Sharc_FloatTensor:$dx);
}

def Sharc_MatmulWgradOp : Sharc_ComputeOp<"matmul_wgrad", [], ["getFlops"]> {
  let summary = "weight gradient of a linear layer, dw = dy^T x";
  let arguments = (ins Sharc_FloatTensor:$dy, Sharc_FloatTensor:$x);
  let results = (outs Sharc_FloatTensor:$dw);
}

def Sharc_RopeGradOp : Sharc_ComputeOp<"rope_grad"> {
  let summary = "gradient of rope: the rotation by minus the angle";
  let arguments = (ins Sharc_FloatTensor:$dy, I64Attr:$head_dim,
                       F64Attr:$theta,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset,
                       OptionalAttr<StrAttr>:$position_axis,
                       OptionalAttr<StrAttr>:$position_split);
  let results = (outs Sharc_FloatTensor:$dx);
}

def Sharc_RmsNormRopeOp : Sharc_ComputeOp<"rms_norm_rope",
    [AllTypesMatch<["x", "y"]>]> {
  let summary = "per-head RMSNorm then rope, in one pass";
  let description = [{
    Made by `sharc-fuse-norm-rope` from `sharc.rope(sharc.rms_norm(x, w))`
    with `w` of `[head_dim]` (q_norm, k_norm): `x` is `[S, B, h * head_dim]`,
    each head normalised, scaled by `w` and rotated without storing the
    normalised value. Same type as `x`; kernels/RmsNormRope.h has the math.
  }];
  let arguments = (ins Sharc_FloatTensor:$x, Sharc_FloatTensor:$w,
                       F64Attr:$eps, I64Attr:$head_dim, F64Attr:$theta,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_RmsNormRopeGradOp : Sharc_ComputeOp<"rms_norm_rope_grad"> {
  let summary = "gradients of rms_norm_rope with respect to x and w";
  let description = [{
    Made by `sharc-fuse-norm-rope` from `sharc.rms_norm_grad(x, w,
    sharc.rope_grad(dy))`: the rotation back and the norm's backward in one
    pass. `x`, `dy` and `dx` share a shape, `w` and `dw` are `[head_dim]`.
  }];
  let arguments = (ins Sharc_FloatTensor:$x, Sharc_FloatTensor:$w,
                       Sharc_FloatTensor:$dy, F64Attr:$eps, I64Attr:$head_dim,
                       F64Attr:$theta,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset);
  let results = (outs Sharc_FloatTensor:$dx, Sharc_FloatTensor:$dw);
}

def Sharc_SwigluPackedOp : Sharc_ComputeOp<"swiglu_packed"> {
  let summary = "swiglu of the two halves of each row of one tensor";
  let description = [{
    Made by `sharc-fuse-projections` where the fused gate/up GEMM feeds
    `sharc.swiglu`: `gu` is `[.., 2 * I]`, each row's first I columns the
    gate and its last I the up projection, and `y` is `[.., I]`. The GEMM's
    output is read in place, so it needs no split by columns.
  }];
  let arguments = (ins Sharc_FloatTensor:$gu);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_SwigluPackedGradOp : Sharc_ComputeOp<"swiglu_packed_grad"> {
  let summary = "gradients of swiglu_packed, packed as its input is";
  let description = [{
    `dgu` has `gu`'s shape: each row's gate gradient, then its up gradient,
    which is the layout the fused GEMM's input- and weight-gradient GEMMs
    read, so the two gradients need no join by columns.
  }];
  let arguments = (ins Sharc_FloatTensor:$gu, Sharc_FloatTensor:$dy);
  let results = (outs Sharc_FloatTensor:$dgu);
}

def Sharc_AttentionGradOp : Sharc_ComputeOp<"attention_grad", [], ["getFlops"]> {
  let summary = "gradients of attention with respect to q, k and v";
  let arguments = (ins Sharc_FloatTensor:$q, Sharc_FloatTensor:$k,
                       Sharc_FloatTensor:$v, Sharc_FloatTensor:$out,
                       RankedTensorOf<[F32]>:$lse, Sharc_FloatTensor:$dout,
                       I64Attr:$head_dim,
                       OptionalAttr<StrAttr>:$position_axis,
                       OptionalAttr<StrAttr>:$position_split);
  let results = (outs Sharc_FloatTensor:$dq, Sharc_FloatTensor:$dk,
                      Sharc_FloatTensor:$dv);
}

def Sharc_SwigluGradOp : Sharc_ComputeOp<"swiglu_grad"> {
  let summary = "gradients of swiglu with respect to gate and up";
  let arguments = (ins Sharc_FloatTensor:$gate, Sharc_FloatTensor:$up,
                       Sharc_FloatTensor:$dy);
  let results = (outs Sharc_FloatTensor:$dgate, Sharc_FloatTensor:$dup);
}

def Sharc_CrossEntropyGradOp : Sharc_ComputeOp<"cross_entropy_grad"> {
  let summary = "gradient of cross_entropy with respect to the logits";
  let arguments = (ins Sharc_FloatTensor:$logits, Sharc_IdTensor:$labels,
                       Sharc_ScalarF32:$dloss, I64Attr:$valid_vocab);
  let results = (outs Sharc_FloatTensor:$dlogits);
}

def Sharc_FillOp : Sharc_ComputeOp<"fill"> {
  let summary = "a tensor with every element equal to value";
  let description = [{
    The seed of the backward: `d loss / d loss = 1`.
    ```mlir
    %one = sharc.fill {value = 1.0 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs RankedTensorOf<[F32, BF16]>:$out);
  let assemblyFormat = "attr-dict `:` type($out)";
}

//===----------------------------------------------------------------------===//
// Concatenation (sharc-fuse-projections)
//===----------------------------------------------------------------------===//

class Sharc_ConcatenationOp<string mnemonic> : Sharc_ComputeOp<mnemonic> {
  let extraClassDeclaration = [{
    /// Along dim 0 each piece is a contiguous block of rows: the planner
    /// gives the pieces views of one buffer and writes no instruction.
    bool isView() { return getDim() == 0; }
  }];
}

def Sharc_ConcatOp : Sharc_ConcatenationOp<"concat"> {
  let summary = "concatenation of tensors along one dimension";
  let description = [{
    The pieces agree in every dimension but `dim`, in element type and in
    placement; the result's `dim` is the sum of theirs, in operand order.
    Along the last dimension (a fused projection's output gradients) the
    planner writes one `column_insert` per piece; along dim 0 (the fused
    weight of q, k and v) the pieces must be parameters, which the planner
    places side by side as views of one buffer.
    ```mlir
    %w = sharc.concat %wq, %wk, %wv {dim = 0 : i64}
        : (tensor<64x64xf32>, tensor<32x64xf32>, tensor<32x64xf32>)
        -> tensor<128x64xf32>
    ```
  }];
  let arguments = (ins Variadic<Sharc_FloatTensor>:$xs, I64Attr:$dim);
  let results = (outs Sharc_FloatTensor:$y);
}

def Sharc_SplitOp : Sharc_ConcatenationOp<"split"> {
  let summary = "split of a tensor into consecutive pieces along one dimension";
  let description = [{
    The inverse of `sharc.concat`: the result types give each piece's
    extent along `dim`, in order. Along the last dimension (a fused
    projection's output, or a microbatch's ids: sharc-microbatch) the
    planner writes one `column_slice` per piece; along dim 0 (a fused
    weight gradient) each piece is a view of the operand's buffer.
    ```mlir
    %q, %k, %v = sharc.split %qkv {dim = 2 : i64}
        : (tensor<16x2x128xf32>)
        -> (tensor<16x2x64xf32>, tensor<16x2x32xf32>, tensor<16x2x32xf32>)
    ```
  }];
  let arguments = (ins Sharc_AnyTensor:$x, I64Attr:$dim);
  let results = (outs Variadic<Sharc_AnyTensor>:$ys);
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def Sharc_AdamWOp : Sharc_ComputeOp<"adamw", [AttrSizedOperandSegments]> {
  let summary = "one AdamW update of a parameter and its moments";
  let description = [{
    Returns the updated parameter and moments (the planner writes them in
    place); the 1-based step number comes from the runtime. The math is in
    kernels/AdamW.h, torch.optim.AdamW's order. With `grad_norm_sq` (the
    step's squared global gradient norm, an f32 scalar) and `max_norm`, the
    gradient is first scaled by min(1, max_norm / (sqrt(grad_norm_sq) +
    1e-6)), torch.nn.utils.clip_grad_norm_'s rule.

    With `master` (bf16-mixed training: an f32 copy of a bf16 parameter,
    with f32 moments) the update reads the bf16 gradient, updates the
    master in fp32 and writes the parameter as the master rounded to bf16;
    it then also returns the updated master.
    ```mlir
    %p2, %m2, %v2, %w2 = sharc.adamw %p, %g, %m, %v master %w {...}
        : (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>,
           tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>,
                              tensor<8xf32>)
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$param, Sharc_FloatTensor:$grad,
                       Sharc_FloatTensor:$m, Sharc_FloatTensor:$v,
                       Optional<Sharc_FloatTensor>:$master,
                       Optional<Sharc_ScalarF32>:$grad_norm_sq,
                       F64Attr:$lr, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       OptionalAttr<F64Attr>:$max_norm);
  let results = (outs Sharc_FloatTensor:$new_param, Sharc_FloatTensor:$new_m,
                      Sharc_FloatTensor:$new_v,
                      Optional<Sharc_FloatTensor>:$new_master);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v (`master` $master^)?
    (`,` $grad_norm_sq^)? attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    ::mlir::LogicalResult verifyMaster();
  }];
}

def Sharc_SumSquaresOp : Sharc_ComputeOp<"sum_squares", [], ["getFlops"]> {
  let summary = "a rank's share of the squared global gradient norm";
  let description = [{
    `sum = sum_i (sum_j xs[i][j]^2) / replicas[i]`, an f32 scalar
    (kernels/SumSquares.h). A tensor that `replicas[i]` ranks hold alike (a
    gradient R or I on mesh axes of that many ranks together) counts
    1/replicas[i] on each, so the sum over every rank, one all_reduce over
    the mesh's axes, counts each element once: the result is P on the axes
    that all_reduce sums over (sharc-adamw with `grad_clip`).
    ```mlir
    %s = sharc.sum_squares %gw, %gn {replicas = array<i64: 1, 2>}
        : (tensor<32x64xf32, #sharc.place<tp = S(0)>>,
           tensor<64xf32, #sharc.place<tp = R>>)
        -> tensor<f32, #sharc.place<tp = P>>
    ```
  }];
  let arguments = (ins Variadic<Sharc_FloatTensor>:$xs,
                       DenseI64ArrayAttr:$replicas);
  let results = (outs Sharc_ScalarF32:$sum);
}

include "ir/SharcCollectiveOps.td"
include "ir/SharcRingOps.td"
include "ir/SharcDecodeOps.td"

#endif // SHARC_OPS_TD
