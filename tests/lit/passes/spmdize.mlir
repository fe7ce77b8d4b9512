// RUN: sharc-opt %S/Inputs/block.mlir --sharc-declare-axis="name=cp size=2" \
// RUN:   | sharc-opt --sharc-data-parallel=dp=2 --sharc-tensor-parallel=tp=2 \
// RUN:     --sharc-sequence-parallel --sharc-vocab-parallel --sharc-spmdize \
// RUN:     --sharc-autodiff --sharc-verify-placements | FileCheck %s
// RUN: sharc-opt %s --split-input-file --sharc-spmdize --verify-diagnostics

// Spmdize on a three-axis mesh (dp2 x cp2 x tp2, 8 simulated ranks): cp is
// declared first (sharc-declare-axis), the layout passes add dp and tp
// around it in the default nesting, every op's placement comes from its rule, and cp, on which
// nothing is split, stays invariant everywhere.
// CHECK: sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: cp =
// Embedding rule: a vocabulary split gives a partial sum, brought to the
// sequence split of SP by a reduce_scatter.
// CHECK: %[[E:.*]] = sharc.embedding {{.*}} {vocab_axis = "tp"} {{.*}} -> tensor<8x1x8xf32, #sharc.place<dp = S(1), tp = P>>
// CHECK-NEXT: %[[ES:.*]] = sharc.reduce_scatter %[[E]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<4x1x8xf32, #sharc.place<dp = S(1), tp = S(0)>>
// Norm rule: a weight used per part (R) keeps the sequence split.
// CHECK-NEXT: %[[N:.*]] = sharc.rms_norm %[[ES]], {{.*}} -> tensor<4x1x8xf32, #sharc.place<dp = S(1), tp = S(0)>>
// Matmul rule, column: the input gathered to R once for both projections.
// CHECK-NEXT: %[[G:.*]] = sharc.all_gather %[[N]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<8x1x8xf32, #sharc.place<dp = S(1), tp = R>>
// CHECK-NEXT: sharc.matmul %[[G]], {{.*}} -> tensor<8x1x4xf32, #sharc.place<dp = S(1), tp = S(2)>>
// CHECK-NEXT: sharc.matmul %[[G]], {{.*}} -> tensor<8x1x4xf32, #sharc.place<dp = S(1), tp = S(2)>>
// Elementwise default: swiglu on the head split.
// CHECK-NEXT: %[[S:.*]] = sharc.swiglu {{.*}} -> tensor<8x1x4xf32, #sharc.place<dp = S(1), tp = S(2)>>
// Matmul rule, row: a partial sum, reduce-scattered where the residual is.
// CHECK-NEXT: %[[O:.*]] = sharc.matmul %[[S]], {{.*}} -> tensor<8x1x8xf32, #sharc.place<dp = S(1), tp = P>>
// CHECK-NEXT: %[[OS:.*]] = sharc.reduce_scatter %[[O]]
// CHECK-NEXT: sharc.add %[[ES]], %[[OS]]
// Loss rule: the vocab-parallel statistics over tp, the row max typed as
// a partial maximum; each dp rank's mean weighted by its share of the
// valid labels, summed at the return.
// CHECK: sharc.vocab_max {{.*}} -> tensor<8x1xf32, #sharc.place<dp = S(1), tp = P(max)>>
// CHECK-NEXT: sharc.all_reduce {{.*}} {axis = "tp", reduce = "max"}
// CHECK: %[[L:.*]] = sharc.vocab_parallel_loss
// CHECK-NEXT: %[[N:.*]] = sharc.valid_count {{.*}} -> tensor<f32, #sharc.place<dp = P>>
// CHECK-NEXT: %[[T:.*]] = sharc.all_reduce %[[N]] {axis = "dp"}
// CHECK-NEXT: %[[LS:.*]] = sharc.count_scale %[[L]], %{{.*}}, %[[T]]
// CHECK-NEXT: %[[LOSS:.*]] = sharc.all_reduce %[[LS]] {axis = "dp"} : (tensor<f32, #sharc.place<dp = P>>) -> tensor<f32>
// The norm weight, replicated over dp and tp, gets its gradient summed
// over both by one all_reduce; q/k/v/o and the tables over dp only.
// CHECK: sharc.all_reduce {{.*}} {axis = "dp,tp"} : (tensor<8xf32, #sharc.place<dp = P, tp = P>>) -> tensor<8xf32, #sharc.place<dp = R, tp = R>>
// CHECK-NOT: {axis = "tp"} : (tensor<8xf32
// CHECK: return %[[LOSS]]

// -----

// Attention's rule: the sequence must be whole on every axis (a split one
// needs context parallelism's exchange, which is not built yet).
module attributes {sharc.mesh = #sharc.mesh<cp = 2>} {
  func.func @attention_on_sequence_split(
      %q: tensor<8x2x8xf32> {sharc.param = "q", sharc.role = "column",
                            sharc.placement = #sharc.place<cp = S(0)>})
      -> tensor<8x2x8xf32> {
    // expected-error @+1 {{has no sharding rule on cp for operands S(0) S(0) S(0)}}
    %o, %lse = sharc.attention %q, %q, %q {head_dim = 4 : i64}
        : (tensor<8x2x8xf32>, tensor<8x2x8xf32>, tensor<8x2x8xf32>)
        -> (tensor<8x2x8xf32>, tensor<2x2x8xf32>)
    return %o : tensor<8x2x8xf32>
  }
}
