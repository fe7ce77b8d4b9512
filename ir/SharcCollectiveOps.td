//===- SharcCollectiveOps.td - collectives -----------------*- tablegen -*-===//
//
// Collectives move values between placements over one mesh axis. Each one
// declares its transpose as its VJP, so autodiff derives the backward
// collectives mechanically (all_gather <-> reduce_scatter, Megatron's f
// <-> all_reduce, slice_to_rank <-> all_gather, all_to_all <-> its
// inverse).
//
//===----------------------------------------------------------------------===//

#ifndef SHARC_COLLECTIVE_OPS_TD
#define SHARC_COLLECTIVE_OPS_TD

class Sharc_CollectiveOp<string mnemonic>
    : Sharc_DiffOp<mnemonic, [], ["getFlops"]> {
  let results = (outs Sharc_FloatTensor:$y);
  let extraClassDeclaration = [{
    /// Bytes this rank sends over the axis (ring algorithms).
    int64_t getNumBytesSent(int64_t axisSize);
  }];
}

def Sharc_AllReduceOp : Sharc_CollectiveOp<"all_reduce"> {
  let summary = "sum (or max) over the ranks of one mesh axis";
  let description = [{
    P to I (or to R when the sum feeds per-rank uses, as a replicated
    parameter's gradient does). The transpose of a sum is the identity.
    ```mlir
    %y = sharc.all_reduce %x {axis = "tp", reduce = "sum"}
        : (tensor<16x2x64xf32, #sharc.place<dp = I, tp = P>>)
        -> tensor<16x2x64xf32>
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis,
                       DefaultValuedStrAttr<StrAttr, "sum">:$reduce);
}

def Sharc_AllReduceCoalescedOp
    : Sharc_Op<"all_reduce_coalesced", [Pure, SameVariadicOperandSize]> {
  let summary = "one bucket of sums over a mesh axis, issued together";
  let description = [{
    Data-parallel gradient synchronisation in buckets (DDP's 25 MB): operand
    i, partial on `axis`, is summed into result i. Made after autodiff by
    sharc-bucket-gradients, so it has no VJP.
  }];
  let arguments = (ins Variadic<Sharc_FloatTensor>:$xs, StrAttr:$axis);
  let results = (outs Variadic<Sharc_FloatTensor>:$ys);
  let assemblyFormat =
      "$xs attr-dict `:` functional-type($xs, $ys)";
  let hasVerifier = 1;
}

def Sharc_ReduceScatterCoalescedOp
    : Sharc_Op<"reduce_scatter_coalesced", [Pure, SameVariadicOperandSize]> {
  let summary = "one bucket of reduce-scatters along dim 0, issued together";
  let description = [{
    Operand i, partial on `axis`, is summed and result i is this rank's
    block of dim 0 (P to S(0)), as `reduce_scatter` with `dim = 0` does for
    each pair; one launch posts them all (one NCCL group). ZeRO-1's
    gradient buckets (sharc-shard-optimizer), made after autodiff: no VJP.
  }];
  let arguments = (ins Variadic<Sharc_FloatTensor>:$xs, StrAttr:$axis);
  let results = (outs Variadic<Sharc_FloatTensor>:$ys);
  let assemblyFormat =
      "$xs attr-dict `:` functional-type($xs, $ys)";
  let hasVerifier = 1;
}

def Sharc_AllGatherCoalescedOp
    : Sharc_Op<"all_gather_coalesced", [Pure, SameVariadicOperandSize]> {
  let summary = "one bucket of all-gathers along dim 0, issued together";
  let description = [{
    Result i is operand i's blocks of dim 0 from every rank of `axis`,
    concatenated (S(0) to R or I), as `all_gather` with `dim = 0` does for
    each pair; one launch posts them all. ZeRO-1's updated parameter blocks
    (sharc-shard-optimizer), after autodiff: no VJP.
  }];
  let arguments = (ins Variadic<Sharc_FloatTensor>:$xs, StrAttr:$axis);
  let results = (outs Variadic<Sharc_FloatTensor>:$ys);
  let assemblyFormat =
      "$xs attr-dict `:` functional-type($xs, $ys)";
  let hasVerifier = 1;
}

def Sharc_AllGatherOp : Sharc_CollectiveOp<"all_gather"> {
  let summary = "concatenate the per-rank blocks along dim";
  let description = [{
    S(dim) to R (its transpose is reduce_scatter) or to I (its transpose is
    slice_to_rank: every rank already holds the whole cotangent).
  }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis, I64Attr:$dim);
}

def Sharc_ReduceScatterOp : Sharc_CollectiveOp<"reduce_scatter"> {
  let summary = "sum over the axis, keeping this rank's block along dim";
  let description = [{ P to S(dim); the transpose is all_gather to I. }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis, I64Attr:$dim);
}

def Sharc_AllToAllOp : Sharc_CollectiveOp<"all_to_all"> {
  let summary = "exchange blocks: split along split_dim, concat along concat_dim";
  let description = [{
    S(concat_dim) to S(split_dim) on one axis (Ulysses's sequence <-> heads
    exchange): each rank cuts its block into n pieces along `split_dim`,
    sends piece j to rank j, and concatenates what it receives along
    `concat_dim` in rank order. The transpose is the inverse exchange.
    ```mlir
    %y = sharc.all_to_all %x {axis = "cp", split_dim = 2 : i64,
                              concat_dim = 0 : i64}
        : (tensor<4x2x8xf32, #sharc.place<cp = S(0)>>)
        -> tensor<8x2x4xf32, #sharc.place<cp = S(2)>>
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis,
                       I64Attr:$split_dim, I64Attr:$concat_dim);
}

def Sharc_SliceToRankOp : Sharc_CollectiveOp<"slice_to_rank"> {
  let summary = "keep this rank's block along dim (no communication)";
  let description = [{
    I to S(dim); the transpose is all_gather to I. Also R to S(dim) (the
    optimizer's shard of a replicated parameter, after autodiff), which has
    no transpose.
  }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis, I64Attr:$dim);
}

def Sharc_ReplicateOp : Sharc_CollectiveOp<"replicate"> {
  let summary = "Megatron's f: an invariant value fed to per-rank uses";
  let description = [{
    I to R, the identity in the forward; its transpose sums the partial
    cotangents with an all_reduce.
  }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis);
}

def Sharc_ScaleOp : Sharc_DiffOp<"scale", [AllTypesMatch<["x", "y"]>]> {
  let summary = "multiply by a constant";
  let arguments = (ins Sharc_FloatTensor:$x, F64Attr:$factor);
  let results = (outs Sharc_FloatTensor:$y);
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel cross entropy
//===----------------------------------------------------------------------===//

class Sharc_VocabStatOp<string mnemonic> : Sharc_ComputeOp<mnemonic> {
  let results = (outs RankedTensorOf<[F32]>:$stat);
}

def Sharc_VocabMaxOp : Sharc_VocabStatOp<"vocab_max"> {
  let summary = "row max over this rank's valid vocabulary columns";
  let arguments = (ins Sharc_FloatTensor:$logits, I64Attr:$valid_vocab,
                       StrAttr:$vocab_axis);
}

def Sharc_TargetLogitOp : Sharc_VocabStatOp<"target_logit"> {
  let summary = "the label's logit where this rank holds it, else 0";
  let arguments = (ins Sharc_FloatTensor:$logits, Sharc_IdTensor:$labels,
                       I64Attr:$valid_vocab, StrAttr:$vocab_axis);
}

def Sharc_SumExpOp : Sharc_VocabStatOp<"sum_exp"> {
  let summary = "sum of exp(logit - max) over this rank's valid columns";
  let arguments = (ins Sharc_FloatTensor:$logits, RankedTensorOf<[F32]>:$max,
                       I64Attr:$valid_vocab, StrAttr:$vocab_axis);
}

def Sharc_VocabParallelLossOp : Sharc_DiffOp<"vocab_parallel_loss"> {
  let summary = "mean cross entropy from all-reduced statistics";
  let description = [{
    loss = mean over labels != -100 of log(sum_exp) + max - target. The
    logits operand is not read: it is where the gradient goes, computed
    from the same statistics without communication (the statistics are
    treated as constants, which is exact: their contributions cancel).
  }];
  let arguments = (ins Sharc_FloatTensor:$logits, Sharc_IdTensor:$labels,
                       RankedTensorOf<[F32]>:$max,
                       RankedTensorOf<[F32]>:$target,
                       RankedTensorOf<[F32]>:$sum_exp,
                       I64Attr:$valid_vocab, StrAttr:$vocab_axis);
  let results = (outs Sharc_ScalarF32:$loss);
}

def Sharc_VocabParallelLossGradOp
    : Sharc_ComputeOp<"vocab_parallel_loss_grad"> {
  let summary = "gradient of the vocab-parallel loss for the local logits";
  let arguments = (ins Sharc_FloatTensor:$logits, Sharc_IdTensor:$labels,
                       RankedTensorOf<[F32]>:$max,
                       RankedTensorOf<[F32]>:$sum_exp, Sharc_ScalarF32:$dloss,
                       I64Attr:$valid_vocab, StrAttr:$vocab_axis);
  let results = (outs Sharc_FloatTensor:$dlogits);
}

//===----------------------------------------------------------------------===//
// The loss over the step's valid labels
//===----------------------------------------------------------------------===//

def Sharc_ValidCountOp : Sharc_ComputeOp<"valid_count"> {
  let summary = "how many labels count towards the loss";
  let description = [{
    The number of `labels` in `[0, valid_vocab)` (not -100), as an f32
    scalar. Over labels split across ranks it is partial; summed over the
    ranks (and counted on the whole step's labels under microbatches) it is
    the count the step's loss is the mean over.
    ```mlir
    %n = sharc.valid_count %labels {valid_vocab = 128 : i64}
        : (tensor<16x2xi32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Sharc_IdTensor:$labels, I64Attr:$valid_vocab);
  let results = (outs Sharc_ScalarF32:$count);
}

def Sharc_CountScaleOp : Sharc_DiffOp<"count_scale"> {
  let summary = "a piece's mean loss as its share of the step's mean";
  let description = [{
    y = x * n(labels) / max(1, total), n as in valid_count: the mean loss
    `x` over this piece's labels becomes its part of the mean over `total`
    labels (kernels/LabelCount.h). Only `x` is differentiated; its
    gradient is count_scale of dy (y is linear in x).
    ```mlir
    %share = sharc.count_scale %mean, %labels, %total {valid_vocab = 128 : i64}
        : (tensor<f32>, tensor<16x2xi32>, tensor<f32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins Sharc_ScalarF32:$x, Sharc_IdTensor:$labels,
                       Sharc_ScalarF32:$total, I64Attr:$valid_vocab);
  let results = (outs Sharc_ScalarF32:$y);
}

//===----------------------------------------------------------------------===//
// Pipeline transfers (sharc-pipeline-partition, sharc-pipeline-schedule)
//===----------------------------------------------------------------------===//

def Sharc_TransferOp : Sharc_CollectiveOp<"transfer"> {
  let summary = "a value moving from one pipeline stage to another";
  let description = [{
    The identity, computed on stage `from` and used on stage `to` of the
    pipeline axis `axis`; the placement is kept. Its transpose is the
    transfer back (the cotangent travels from `to` to `from`).
    sharc-pipeline-schedule splits it into a `send` on `from` and a `recv`
    on `to`.
    ```mlir
    %y = sharc.transfer %x {axis = "pp", from = 0 : i64, to = 1 : i64}
        : (tensor<16x2x64xf32>) -> tensor<16x2x64xf32>
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis, I64Attr:$from,
                       I64Attr:$to);
}

def Sharc_SendOp : Sharc_Op<"send"> {
  let summary = "send a value to stage `peer` of the pipeline axis";
  let description = [{
    Runs on one stage (the op's `sharc.stage`); the `recv` of the same
    `tag` on stage `peer` receives the same bytes. Not pure: it is kept and
    never merged.
    ```mlir
    sharc.send %x {axis = "pp", peer = 1 : i64} : tensor<16x2x64xf32>
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$x, StrAttr:$axis, I64Attr:$peer,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let assemblyFormat = "$x attr-dict `:` type($x)";
  let hasVerifier = 1;
}

def Sharc_RecvOp : Sharc_Op<"recv"> {
  let summary = "receive a value from stage `peer` of the pipeline axis";
  let description = [{
    The counterpart of the `send` of its `tag` (unique per transfer). A
    backend without tags (NCCL) matches the n-th recv from `peer` with the
    n-th send to this stage, which sharc-pipeline-schedule keeps for GPipe
    and 1F1B.
    ```mlir
    %y = sharc.recv {axis = "pp", peer = 0 : i64} : tensor<16x2x64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$axis, I64Attr:$peer,
                       DefaultValuedAttr<I64Attr, "0">:$tag);
  let results = (outs Sharc_FloatTensor:$y);
  let assemblyFormat = "attr-dict `:` type($y)";
  let hasVerifier = 1;
}

#endif // SHARC_COLLECTIVE_OPS_TD
