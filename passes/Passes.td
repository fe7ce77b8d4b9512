//===- Passes.td - the passes of sharc ---------------------*- tablegen -*-===//

#ifndef SHARC_PASSES_TD
#define SHARC_PASSES_TD

include "mlir/Pass/PassBase.td"

def Autodiff : Pass<"sharc-autodiff", "::mlir::ModuleOp"> {
  let summary = "derive the backward from each op's VJP";
  let description = [{
    Reverse-mode differentiation of every function whose result carries
    `sharc.output = "loss"`. Walks the ops backwards from the seed
    `d loss = 1` (a `sharc.fill`), asks each op for the cotangents of its
    operands through `VJPOpInterface`, and sums the cotangents of values
    used more than once with `sharc.add`. Every argument marked
    `sharc.param` gets its gradient appended to the results as
    `sharc.output = "grad:<name>"`.

    Before: `func @f(%w {sharc.param = "w"}, ...) -> (loss)`.
    After: `func @f(%w, ...) -> (loss, grad:w)`.
  }];
}

def MergedBlockGrads : Pass<"sharc-merged-block-grads", "::mlir::ModuleOp"> {
  let summary = "ring attention's block gradients from the merged output";
  let description = [{
    After autodiff, each `sharc.attention_block_grad` reads its block's
    partial output and lse and the cotangents the `sharc.lse_merge_grad`
    chain passes down. With p over the merged lse equal to the block's p
    times its merge weight, the block's gradients are those of the merged
    output, its lse and their cotangents (kernels/Attention.h): each block
    gradient reads those instead, the merged lse's cotangent left out when
    it is a zero fill, and the merge gradients, now unused, go. The
    backward then keeps the merged output alone rather than every partial
    and intermediate merge of the ring, and a block gradient without dlse
    is the plain attention backward on the block's mask, which a fused
    attention library runs.

    Before: `%dp, %dl = sharc.lse_merge_grad %o1, %l1, %o, %l, %do, %zero`,
    `sharc.attention_block_grad %q, %k1, %v1, %o1, %l1, %dp, %dl`.
    After: `sharc.attention_block_grad %q, %k1, %v1, %o, %l, %do`.
  }];
}

def AdamW : Pass<"sharc-adamw", "::mlir::ModuleOp"> {
  let summary = "add the AdamW update of every parameter";
  let options = [Option<"keepGradients", "keep-gradients", "bool", "false",
                        "also return the gradients">,
                 Option<"groupBytes", "group-bytes", "int64_t", "0",
                        "gather the updates into runs of about this many "
                        "bytes of gradients (or an eighth of all, if less), "
                        "one launch each (0: each update where its gradient "
                        "is final)">];
  let description = [{
    For each `grad:<name>` result, adds two moment arguments
    (`sharc.state = "m:<name>"` and `"v:<name>"`, zero at the start, the
    parameter's element type as the original's pure low-precision training),
    a `sharc.adamw` op, and returns the updated parameter and moments with
    `sharc.update_of = <argument index>` so the planner writes them in place.
    The gradient results are dropped unless `keep-gradients` is set (the
    validation plans compare them). Hyperparameters come from the module's
    `sharc.optimizer` dictionary (written by the builder from the run
    config). Each update goes where its gradient is final; with
    `group-bytes`, consecutive updates gather until their gradients reach
    that size (or an eighth of all the gradients, if less) and run together
    at the last of them (one launch on a device), the clipped ones and
    pipeline stages' aside.
  }];
}

def DeclareAxis : Pass<"sharc-declare-axis", "::mlir::ModuleOp"> {
  let summary = "add an axis to the module's mesh";
  let description = [{
    Declares mesh axis `name` of `size` ranks (where the default nesting
    dp, pp, cp, tp puts it). Nothing is split over it until a layout pass
    asks: every value is invariant there, so its ranks compute alike. The
    layout passes of pipeline and context parallelism start from it; tests
    use it to run on meshes of three axes.
  }];
  let options = [Option<"axisName", "name", "std::string", "\"cp\"",
                        "the axis">,
                 Option<"axisSize", "size", "int64_t", "2",
                        "its ranks">];
}

def DataParallel : Pass<"sharc-data-parallel", "::mlir::ModuleOp"> {
  let summary = "request data parallelism: batch split over the dp axis";
  let description = [{
    Annotates the program for `dp` data-parallel ranks: tokens and labels
    `S(1)` (the batch dimension of `[S, B]`), every parameter `R` on dp
    (held whole, used on different data), and the mesh's dp size.
    `sharc-spmdize` materialises it; the gradient all_reduce over dp then
    falls out of the placements in autodiff.
  }];
  let options = [Option<"dpSize", "dp", "int64_t", "2",
                        "data-parallel ranks">];
}

def TensorParallel : Pass<"sharc-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "request Megatron tensor parallelism over the tp axis";
  let description = [{
    Annotates parameters with their tp placement by role: q, k, v, gate and
    up column parallel (`S(0)` of the `[out, in]` weight), o and down row
    parallel (`S(1)`), q_norm/k_norm `R` (each rank applies them to its own
    heads), layer norms, embedding and LM head `I`. Checks that tp divides
    hidden, intermediate, heads and KV heads, naming the model key.
  }];
  let options = [Option<"tpSize", "tp", "int64_t", "2",
                        "tensor-parallel ranks">];
}

def SequenceParallel : Pass<"sharc-sequence-parallel", "::mlir::ModuleOp"> {
  let summary = "request sequence parallelism of the norms and residuals";
  let description = [{
    On top of tensor parallelism: the residual stream between blocks is
    split over the sequence (`S(0)` on tp), so layer-norm weights become `R`
    (each rank normalises its own tokens). `sharc-spmdize` then turns
    Megatron's f into an all_gather and the row-parallel all_reduce into a
    reduce_scatter. Checks that tp divides seq_len.
  }];
}

def ContextParallel : Pass<"sharc-context-parallel", "::mlir::ModuleOp"> {
  let summary = "request context parallelism: the sequence split over cp";
  let description = [{
    Annotates the program for `cp` context-parallel ranks: tokens and labels
    `S(0)` (the sequence dimension of `[S, B]`), every parameter `R` on cp (held whole, used on different
    tokens), and the exchange attention uses on a split sequence (the
    module's `sharc.context_parallel`). `sharc-spmdize` materialises it:
    activations stay sequence-split, RoPE takes global positions
    (`position_axis`), and attention either exchanges q, k, v from sequence
    to heads and back by all_to_all (`a2a`, Ulysses) or gathers k and v
    over cp, its query block offset by its rank's position (`all_gather`;
    the gradients come back by reduce_scatter), or keeps q, k and v split
    and moves the K/V blocks rank to rank (`ring`: ring_shift,
    attention_block and lse_merge, SharcRingOps.td; on the balanced split
    the whole ring, masked by the chunks' positions). `split=balanced` (the
    default) cuts the sequence into 2 cp chunks and gives rank r chunks r
    and 2 cp - 1 - r, so a causal mask leaves every rank the same work; the
    module's `sharc.balanced_axis` records it for RoPE's and attention's
    positions and for the plan's token split. `split=contiguous` gives
    rank r the contiguous block r (the original's split). Checks that cp
    (2 cp when balanced) divides seq_len (times tp under sequence
    parallelism) and, for `a2a`, the heads and KV heads each tp rank holds,
    naming the sizes.
  }];
  let options = [Option<"cpSize", "cp", "int64_t", "2",
                        "context-parallel ranks">,
                 Option<"exchange", "comm", "std::string", "\"a2a\"",
                        "attention's exchange: a2a, all_gather or ring">,
                 Option<"split", "split", "std::string", "\"balanced\"",
                        "the sequence split: balanced or contiguous">];
}

def VocabParallel : Pass<"sharc-vocab-parallel", "::mlir::ModuleOp"> {
  let summary = "request vocabulary parallelism of embedding, head and loss";
  let description = [{
    The embedding table and the LM head are split over the vocabulary
    (`S(0)` on tp); `sharc-spmdize` makes the lookup a masked local lookup
    plus an all_reduce (reduce_scatter under SP) and the loss a
    vocab-parallel cross entropy from all-reduced max, target logit and
    sum of exponentials. A vocabulary tp does not divide is padded to a
    multiple of tp; padded columns take no part in the softmax.
  }];
}

def Spmdize : Pass<"sharc-spmdize", "::mlir::ModuleOp"> {
  let summary = "materialise the requested layout as a per-rank program";
  let description = [{
    Rewrites the dense forward into the SPMD program of one rank: local
    shapes, a placement on every value, and the collectives each op's
    sharding rule needs. For every op and every mesh axis it asks the op's
    `ShardingRuleOpInterface` which placements the operands need, brings
    them there with the generic reshard (passes/Reshard.h; one per value
    and target placement, so one all_gather feeds q, k and v) and lets the
    op build itself on its local operands; it knows no op type and no axis
    name. Runs before autodiff, which derives the backward collectives from
    their transposes.
  }];
}

def Microbatch : Pass<"sharc-microbatch", "::mlir::ModuleOp"> {
  let summary = "gradient accumulation over the run's microbatches";
  let description = [{
    After autodiff, with `num_microbatches` M > 1 in the module's model
    sizes: the token inputs are split along the batch into M pieces
    (`sharc.split`, dim 1) and the forward and backward run once per piece,
    one after the other, so activations live for one microbatch at a time.
    Each piece's gradients are added to a running sum; the seed of each
    backward is 1/M and the loss is the mean of the pieces' losses, so the
    step equals the dense step on the whole batch (each piece's mean over
    its tokens; exact when every piece has as many valid labels, as the
    data-parallel mean is). Values that do not depend on the tokens (fused
    weights, zero gradients) are computed once, and a gradient's
    synchronisation (an all_reduce of the returned value) runs once, on the
    sum, not once per piece.

    Before: `%g = all_reduce(backward(tokens))`, returned.
    After: `%t0, %t1 = split %tokens`; `%s = add(backward(%t0),
    backward(%t1))`; `%g = all_reduce(%s)`, returned.
  }];
}

def FuseNormRope : Pass<"sharc-fuse-norm-rope", "::mlir::ModuleOp"> {
  let summary = "per-head q/k norms and the rope after them as one op";
  let description = [{
    After autodiff: `sharc.rope(sharc.rms_norm(x, w))`, where `w` is one
    head's weights and the norm's result feeds the rope alone, becomes
    `sharc.rms_norm_rope(x, w)`; `sharc.rms_norm_grad(x, w,
    sharc.rope_grad(dy))` becomes `sharc.rms_norm_rope_grad(x, w, dy)`. Each
    saves a read and a write of q and k per layer and direction. The
    fused forward takes the norm's place and the fused backward the norm
    backward's; in fp32 the results are the unfused ones bit for bit, in
    bf16 the normalised value and the rotated gradient are no longer
    rounded to storage in between.
  }];
}

def PipelinePartition : Pass<"sharc-pipeline-partition", "::mlir::ModuleOp"> {
  let summary = "split the forward program into pipeline stages";
  let description = [{
    Before autodiff, on a mesh with a pipeline axis `axis` of P ranks:
    every forward op gets a stage (`sharc.stage`), contiguous layers per
    stage, the embedding on the first stage and the final norm, LM head and
    loss on the last. A value used on a later stage than it is computed on
    goes through a `sharc.transfer` (one per value and stage), whose
    transpose carries the cotangent back, so autodiff builds the backward
    transfers. `balance`: `layers` gives stage r the layers
    [floor(L r / P), floor(L (r+1) / P)) (the original's split); `cost`
    chooses the contiguous split whose costliest stage is cheapest, by the
    forward ops' flops (CostOpInterface), embedding and LM head included.
    A parameter read on several stages (tied embeddings) stays on the first
    and reaches the others through a transfer, once a step; its transpose
    brings their gradient back to be summed. Error: fewer layers than
    stages.

    Before: `%h1 = block0(%h0)`, `%h2 = block1(%h1)` (pp = 2).
    After: `%h1 = block0(%h0) {sharc.stage = 0}`, `%t = sharc.transfer %h1
    {from = 0, to = 1}`, `%h2 = block1(%t) {sharc.stage = 1}`.
  }];
  let options = [Option<"axis", "axis", "std::string", "\"pp\"",
                        "the pipeline mesh axis">,
                 Option<"balance", "balance", "std::string", "\"cost\"",
                        "layers or cost">,
                 Option<"chunks", "chunks", "int64_t", "1",
                        "model chunks a stage (interleaved: virtual stage "
                        "r + c P holds the (r + c P)-th of P x chunks "
                        "contiguous layer ranges)">];
}

def PipelineSchedule : Pass<"sharc-pipeline-schedule", "::mlir::ModuleOp"> {
  let summary = "stage every op and order each stage by a pipeline schedule";
  let description = [{
    After the train step is complete (autodiff, microbatches, optimizer):
    every op joins the stage of the ops it exchanges values with (stages
    meet only at transfers; an op that reads only inputs runs on each stage
    that uses it, cloned), each `sharc.transfer` becomes a `sharc.send` on
    its source stage and a `sharc.recv` on its destination, and the ops are
    reordered so that each stage runs its microbatches' forwards (F m) and
    backwards (B m) in the schedule's order. `gpipe`: F 0..M-1, then
    B 0..M-1. `1f1b`: w = min(P - r - 1, M) forwards, then F w+i, B i for
    each remaining microbatch i, then the last w backwards. A rank runs
    only its stage's ops, so per stage the order is what counts.
  }];
  let options = [Option<"axis", "axis", "std::string", "\"pp\"",
                        "the pipeline mesh axis">,
                 Option<"schedule", "schedule", "std::string", "\"gpipe\"",
                        "gpipe, 1f1b or interleaved">,
                 Option<"chunks", "chunks", "int64_t", "1",
                        "model chunks a stage (interleaved)">];
}

def FuseAdds : Pass<"sharc-fuse-adds", "::mlir::ModuleOp"> {
  let summary = "sums into the ops that produce one of their operands";
  let description = [{
    Last in the pipeline: each `sharc.add` one of whose operands is a
    `sharc.matmul` or `sharc.matmul_dgrad` result, or the dx of a
    `sharc.rms_norm_grad`, that nothing else reads becomes that op with
    the other operand as its addend (`sharc.matmul_add`,
    `sharc.matmul_dgrad_add`, `sharc.rms_norm_grad_add`: the residual
    stream's gradient sum at every norm). The fused GEMM stays
    where the GEMM was (what runs between it and the add may update its
    weight in place: an AdamW step), so the addend must be computed before
    the GEMM; of an add of two GEMMs, the later one takes the other's
    product. The residual adds of the forward (where no collective sits
    between the GEMM and the add) and the sums of input gradients in the
    backward then cost no elementwise pass and no stored product; the sum
    is rounded once instead of twice.

    Before: `%q = sharc.matmul_dgrad %dq, %wq`; `%p = sharc.matmul_dgrad
    %dk, %wk`; `%s = sharc.add %q, %p`.
    After: `%q = sharc.matmul_dgrad %dq, %wq`; `%s = sharc.matmul_dgrad_add
    %dk, %wk, %q`.
  }];
}

def FuseProjections : Pass<"sharc-fuse-projections", "::mlir::ModuleOp"> {
  let summary = "one GEMM for the projections that read one input";
  let description = [{
    After autodiff, the column GEMMs reading one input (q, k and v; gate
    and up) become one GEMM over their weights' rows, because a GEMM of
    the fused width runs several times faster on a GPU than the separate
    narrow ones. Each rank concatenates its own shards. The parameters stay
    apart (names, shapes, placements and checkpoints unchanged): the fused
    weight is a dim-0 `sharc.concat` of them, which the planner makes one
    buffer with each parameter a view of it. The output is split by
    columns; in the backward the output gradients are concatenated by
    columns and feed one input-gradient GEMM (replacing autodiff's sum of
    the separate ones) and one weight-gradient GEMM, whose dim-0
    `sharc.split` gives each parameter's gradient as a view. A gradient
    synchronisation (all_reduce) moves before the split, so that it stays
    one collective on one buffer. A weight that anything else reads (a tied
    table) is left alone.

    Before: `%q = sharc.matmul %x, %wq`, the same for `%k` and `%v`.
    After: `%w = sharc.concat %wq, %wk, %wv {dim = 0}`,
    `%qkv = sharc.matmul %x, %w`, `%q, %k, %v = sharc.split %qkv {dim = 2}`.

    Gate and up need no split: where the fused output's two halves feed
    only `sharc.swiglu` and its gradient, `sharc.swiglu_packed` reads the
    output in place and `sharc.swiglu_packed_grad` writes the gradient
    packed for the fused GEMMs. q, k and v are still split by columns (a
    strided copy each way), so `attention=false` fuses gate/up alone.
  }];
  let options = [Option<"attention", "attention", "bool", "true",
                        "also fuse the projections that feed no swiglu "
                        "(q, k and v)">];
}

def BucketGradients : Pass<"sharc-bucket-gradients", "::mlir::ModuleOp"> {
  let summary = "gather data-parallel gradient all_reduces into buckets";
  let description = [{
    After autodiff, the gradient of every data-parallel parameter ends in
    its own all_reduce over dp (over `dp,cp` when context parallelism splits
    the tokens as well, over cp alone without dp). This pass groups them, in the order the backward
    produces the gradients (last layer first), into buckets of at most
    `bucket-bytes` (DDP's default 25 MiB), each one all_reduce_coalesced
    placed right after its last gradient is ready, so that a bucket can
    run while the backward of earlier layers continues.

    The planner lays a bucket's gradients side by side in one slab, in
    operand order, and reduces the slab in place with one collective call
    (docs/memory.md). Hence a bucket holds one element type over one group
    of axes (each fills its own open bucket), and a gradient that anything
    but its all_reduce reads keeps its own all_reduce: in place, that
    reader would see the sum.

    Before: `%a = sharc.all_reduce %ga {axis = "dp"}`, the same for `%b`.
    After: `%a, %b = sharc.all_reduce_coalesced %ga, %gb {axis = "dp"}`.
  }];
  let options = [Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
                        "bucket size in bytes">,
                 Option<"leaveShardable", "leave-shardable", "bool", "false",
                        "leave out the dp syncs whose gradients "
                        "sharc-shard-optimizer will reduce-scatter (ZeRO-1)">];
}

def ShardOptimizer : Pass<"sharc-shard-optimizer", "::mlir::ModuleOp"> {
  let summary = "shard the optimizer state over dp (ZeRO-1)";
  let description = [{
    After sharc-adamw, on a mesh with a dp axis: each update whose gradient
    is synced by its own all_reduce over dp (sharc-bucket-gradients with
    `leave-shardable` leaves those out of its buckets) runs on one block of
    its parameter per dp rank. The gradient is reduce-scattered instead of
    all-reduced (the same bytes on the wire), the rank's block of the
    parameter is sliced, the update reads and writes moments (and the
    bf16-mixed master) of that block alone, and the updated blocks are
    all-gathered into the parameter's buffer, which the result still
    updates in place (`sharc.update_of`). A sync over dp and other axes
    (`dp,cp`, a norm weight's `dp,tp`) first sums over the others (an
    all_reduce, bucketed as an all_reduce_coalesced), then reduce-scatters
    over dp. The block is along dim 0 where dp divides the rank's extent,
    inside any tp split of it (a column-parallel weight's rows)
    (passes/OptimizerShards.h); another parameter keeps its whole update.
    Moments are 2/dp of the parameter bytes a rank instead of 2x (ZeRO
    stage 1); gradients and parameters stay whole.

    A clipped step's global norm reads the gradient blocks, each counted
    once. A gradient the step also returns (`keep-gradients`) must stay
    whole, so its update is left as it is.

    Before: `%g = sharc.all_reduce %pg {axis = "dp"}`,
    `%w2, %m2, %v2 = sharc.adamw %w, %g, %m, %v`.
    After: `%gb = sharc.reduce_scatter %pg {axis = "dp", dim = 0}`,
    `%wb = sharc.slice_to_rank %w`, `%wb2, %m2, %v2 = sharc.adamw %wb, %gb,
    %m, %v`, `%w2 = sharc.all_gather %wb2 {axis = "dp", dim = 0}`.

    The dim-0 reduce_scatters then gather into buckets of about
    `bucket-bytes` of gradients in the order the backward makes them (one
    `reduce_scatter_coalesced` where the bucket's last gradient is ready,
    one NCCL group), and their updates' all_gathers into one
    `all_gather_coalesced` after the bucket's last update: a few
    collective calls a step, as DDP's buckets, not two per parameter.
  }];
  let options = [Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
                        "gradient bytes a bucket gathers">];
}

def ShardParameters : Pass<"sharc-shard-parameters", "::mlir::ModuleOp"> {
  let summary = "keep each parameter as one block a dp rank (ZeRO-3)";
  let description = [{
    After sharc-shard-optimizer: a parameter whose update it runs on a
    block (`slice_to_rank`, `adamw`, and the `all_gather` the step returns)
    keeps that block alone from one step to the next. Its argument becomes
    the block, the update writes it in place and the step returns it, so
    neither the slice nor the update's all_gather remains. Each op that
    reads the whole parameter (the forward's GEMM or norm, the backward's
    dgrad GEMM or norm gradient, each microbatch's) reads an `all_gather`
    of the block instead, which dies at that op. A fused weight (a dim-0
    `concat` of parameters, sharc-fuse-projections) is gathered member by
    member and concatenated again before each op that reads it; the
    planner places the gathered members as the rows of one buffer, so the
    concat copies nothing. A fused weight any member of which keeps a whole
    update keeps all of them whole (ZeRO-1 for those).

    The gathers go in program order into groups of about `bucket-bytes` of
    whole parameters, one `all_gather_coalesced` each (one NCCL group),
    placed before the first op of the group before it: group g+1 arrives
    while group g computes, and at most two groups are whole at once.
    Parameters are then 1/dp of their bytes a rank, as are moments;
    gradients already die at their update in every plan (ZeRO stage 2's
    saving), at the cost of two all-gathers of every parameter a
    microbatch where ddp all-reduces its gradients once a step.

    Before: `%wb = sharc.slice_to_rank %w`, `%wb2, ... = sharc.adamw %wb,
    ...`, `%w2 = sharc.all_gather %wb2`, `return %w2` and `sharc.matmul %x,
    %w`. After: `%wb2, ... = sharc.adamw %w, ...`, `return %wb2` and `%wf =
    sharc.all_gather %w {axis = "dp", dim = 0}`, `sharc.matmul %x, %wf`.
  }];
  let options = [Option<"bucketBytes", "bucket-bytes", "int64_t", "26214400",
                        "whole parameter bytes a gather group holds">];
}

def Recompute : Pass<"sharc-recompute", "::mlir::ModuleOp"> {
  let summary = "rematerialise values in the backward instead of keeping them";
  let description = [{
    Policy `sp-allgather` (Megatron SP, the original's SP + Async): the
    backward re-all-gathers the sequence-sharded input of each
    column-parallel matmul for its weight gradient, so the gathered tensor
    dies after the forward and only the local shard is kept.

    Policy `full` (Megatron's full recompute, every layer): of each layer's
    forward only its input lives into the backward; right before the first
    backward op that reads anything else the layer computed, the layer's
    forward (its collectives included) runs again and the backward reads
    the copies. Runs after autodiff and before sharc-microbatch. With
    `layers=N` only the first N layers are re-run (Megatron's block
    method): under 1F1B the first stage keeps the most microbatches.

    Policy `selective`: of each layer only the cheap ops (norms, rope,
    SwiGLU, views) run again, each right before its first backward
    reader; what GEMMs, attention and collectives computed is kept.
    `policy=full layers=N rest=selective` re-runs the first N layers whole
    and the others selectively (what `--recompute auto` settles on when
    selective alone does not fit).
  }];
  let options = [Option<"policy", "policy", "std::string", "\"sp-allgather\"",
                        "what to recompute: full, selective, sp-allgather "
                        "or none">,
                 Option<"layers", "layers", "int64_t", "-1",
                        "policy full: re-run layers 0 .. layers-1 alone "
                        "(-1: every layer)">,
                 Option<"rest", "rest", "std::string", "\"none\"",
                        "policy full with layers=N: what the layers past "
                        "N re-run (none or selective)">];
}

def VerifyPlacements : Pass<"sharc-verify-placements", "::mlir::ModuleOp"> {
  let summary = "check every op's placement rule and every gradient";
  let description = [{
    Rejects a program where a parameter's gradient (or update) does not
    have the parameter's placement, naming the value. Each op's own
    placement rule is checked when the op is verified: matmul, embedding
    and attention infer their result placements, the elementwise ops need
    equal types, and each collective checks its placement change.
  }];
}

#endif // SHARC_PASSES_TD
