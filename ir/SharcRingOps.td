//===- SharcRingOps.td - ring attention ops ----------------*- tablegen -*-===//
//
// `--cp-comm ring`: each cp rank keeps its query block while the K/V blocks
// move along the cp axis one rank a step (ring_shift: a chain on the
// contiguous split, the whole ring on the balanced one); each step's block
// attention (attention_block) gives a partial output and its log-sum-exp,
// merged into the running result (lse_merge). Every op is differentiable on
// its own, so autodiff builds the backward: the reverse shifts carry the
// K/V cotangents back to their owners (kernels/Attention.h and
// kernels/LseMerge.h state the math; docs/architecture.md says why).
//
//===----------------------------------------------------------------------===//

#ifndef SHARC_RING_OPS_TD
#define SHARC_RING_OPS_TD

def Sharc_RingShiftOp : Sharc_CollectiveOp<"ring_shift"> {
  let summary = "each rank's block to its neighbour along a mesh axis";
  let description = [{
    Ranks `first`, ..., n-1 of `axis` (n its size) form a chain; each passes
    `x` to its neighbour `offset` (+1 or -1) further along it, and `y` is
    what a rank received: `y[r] = x[r - offset]` where both r and
    r - offset lie in the chain, zeros elsewhere (ranks below `first`, and
    the chain's end that nobody sends to). Under the causal mask on the
    contiguous split the ring's wrap-around link (rank n-1 to 0) would only
    carry keys later than every query of the rank it reaches, and step s's
    ranks below s hold blocks no query of theirs sees; the chain leaves
    both out. With `wrap` (and `first` 0) the chain is the whole ring,
    `y[r] = x[(r - offset) mod n]`: under the balanced split every rank's
    late chunk needs every other rank's keys. The type is kept: the value
    is "a block of the sequence on each rank", whose index the consumer's
    `kv_shift` states. The transpose is the shift back (`offset` negated,
    the same chain).
    ```mlir
    %k1 = sharc.ring_shift %k {axis = "cp", offset = 1 : i64,
                               first = 0 : i64}
        : (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>)
        -> tensor<8x2x64xf32, #sharc.place<cp = S(0)>>
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis, I64Attr:$offset,
                       I64Attr:$first, UnitAttr:$wrap);
}

def Sharc_AttentionBlockOp
    : Sharc_DiffOp<"attention_block", [InferTypeOpAdaptor], ["getFlops"]> {
  let summary = "causal GQA attention of a query block on one key block";
  let description = [{
    `q` is `[S, B, Hq * D]`, this rank's block of a sequence split over
    `position_axis` (query i at global position `coord * S + i`); `k` and
    `v` are `[Sk, B, Hkv * D]`, the key block `c = coord - kv_shift` (key j
    at `c * Sk + j`; none when c < 0). Query i sees the keys at or before
    its position; `out` is `[S, B, Hq * D]`, the softmax over those keys
    only, and `lse`, `[B, Hq, S]` f32, its log-sum-exp (a row that sees no
    key: out 0, lse -1e30). With `position_split = "balanced"` q holds
    chunks coord and 2n-1-coord of 2n (n the axis size) and the key block
    is rank c = (coord - kv_shift) mod n's, chunks c and 2n-1-c: query and
    key positions are two runs each and the mask compares them
    (kernels/SequencePositions.h). Unlike `attention`, lse is
    differentiable: ring attention merges the blocks by it (`lse_merge`),
    and the gradient op takes its cotangent.
    ```mlir
    %o, %lse = sharc.attention_block %q, %k1, %v1 {head_dim = 16 : i64,
        position_axis = "cp", kv_shift = 1 : i64}
        : (tensor<8x2x64xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>)
        -> (tensor<8x2x64xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$q, Sharc_FloatTensor:$k,
                       Sharc_FloatTensor:$v, I64Attr:$head_dim,
                       StrAttr:$position_axis, I64Attr:$kv_shift,
                       OptionalAttr<StrAttr>:$position_split);
  let results = (outs Sharc_FloatTensor:$out, RankedTensorOf<[F32]>:$lse);
}

def Sharc_AttentionBlockGradOp
    : Sharc_ComputeOp<"attention_block_grad", [], ["getFlops"]> {
  let summary = "gradients of attention_block, lse's cotangent included";
  let description = [{
    As `attention_grad` on attention_block's mask, with `dlse` (the
    cotangent of lse; absent, 0): ds = p (dp - delta + dlse). Autodiff
    gives each block its partial `out` and `lse` with the cotangents the
    merges pass down; sharc-merged-block-grads gives it the merged output,
    its lse and their cotangents instead, which yield the same gradients
    (p over the merged lse is the block's p times its merge weight) with no
    dlse when the merged lse has no use.
  }];
  let arguments = (ins Sharc_FloatTensor:$q, Sharc_FloatTensor:$k,
                       Sharc_FloatTensor:$v, Sharc_FloatTensor:$out,
                       RankedTensorOf<[F32]>:$lse, Sharc_FloatTensor:$dout,
                       Optional<RankedTensorOf<[F32]>>:$dlse, I64Attr:$head_dim,
                       StrAttr:$position_axis, I64Attr:$kv_shift,
                       OptionalAttr<StrAttr>:$position_split);
  let results = (outs Sharc_FloatTensor:$dq, Sharc_FloatTensor:$dk,
                      Sharc_FloatTensor:$dv);
}

def Sharc_LseMergeOp : Sharc_DiffOp<"lse_merge",
    [AllTypesMatch<["out_a", "out_b", "out"]>,
     AllTypesMatch<["lse_a", "lse_b", "lse"]>]> {
  let summary = "two attention partials of disjoint keys as one";
  let description = [{
    `out_*` are `[S, B, H * D]` partial outputs of the same queries over
    disjoint key sets, `lse_*` `[B, H, S]` their log-sum-exps:
    lse = log(exp(lse_a) + exp(lse_b)), out = sum_x exp(lse_x - lse) out_x
    (kernels/LseMerge.h).
    ```mlir
    %o, %lse = sharc.lse_merge %o0, %lse0, %o1, %lse1
        : (tensor<8x2x64xf32>, tensor<2x4x8xf32>, tensor<8x2x64xf32>,
           tensor<2x4x8xf32>) -> (tensor<8x2x64xf32>, tensor<2x4x8xf32>)
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$out_a, RankedTensorOf<[F32]>:$lse_a,
                       Sharc_FloatTensor:$out_b,
                       RankedTensorOf<[F32]>:$lse_b);
  let results = (outs Sharc_FloatTensor:$out, RankedTensorOf<[F32]>:$lse);
}

def Sharc_LseMergeGradOp : Sharc_ComputeOp<"lse_merge_grad"> {
  let summary = "cotangents of one part of an lse_merge";
  let description = [{
    For the part (`part`, `lse_part`) of the merge whose result is
    (`out`, `lse`), with cotangents `dout` and `dlse`:
    dpart = w dout, dlse_part = w (dlse + rowsum(dout (part - out))),
    w = exp(lse_part - lse).
  }];
  let arguments = (ins Sharc_FloatTensor:$part,
                       RankedTensorOf<[F32]>:$lse_part,
                       Sharc_FloatTensor:$out, RankedTensorOf<[F32]>:$lse,
                       Sharc_FloatTensor:$dout, RankedTensorOf<[F32]>:$dlse);
  let results = (outs Sharc_FloatTensor:$dpart,
                      RankedTensorOf<[F32]>:$dlse_part);
}

#endif // SHARC_RING_OPS_TD
