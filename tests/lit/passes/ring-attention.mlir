// RUN: sharc-opt %S/Inputs/attention-block.mlir \
// RUN:   "--sharc-context-parallel=cp=2 comm=ring split=contiguous" --sharc-spmdize \
// RUN:   --sharc-autodiff --sharc-verify-placements | FileCheck %s
// RUN: sharc-opt %S/Inputs/attention-block.mlir \
// RUN:   "--sharc-context-parallel=cp=2 comm=ring split=contiguous" --sharc-spmdize \
// RUN:   --sharc-autodiff --sharc-merged-block-grads --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=MERGED
// RUN: sharc-opt %S/Inputs/attention-block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-sequence-parallel "--sharc-context-parallel=cp=2 comm=ring split=contiguous" \
// RUN:   --sharc-spmdize --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=TPCP

// Ring attention at cp 2, one block: q, k and v stay sequence blocks
// (rope rotates them by global positions); step 0 attends to the own
// block, the K/V blocks move one rank on (the chain from rank 0), step 1
// attends to them, and lse_merge joins the two partials. Nothing is
// gathered or exchanged all-to-all.
// CHECK-LABEL: module attributes {sharc.context_parallel = "ring"
// CHECK: %[[Q:.*]] = sharc.rope {{.*}}position_axis = "cp"{{.*}} -> tensor<4x2x16xf32, #sharc.place<cp = S(0)>>
// CHECK-NEXT: %[[K:.*]] = sharc.rope {{.*}}position_axis = "cp"{{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
// CHECK-NEXT: %[[O0:.*]], %[[L0:.*]] = sharc.attention_block %[[Q]], %[[K]], %[[V:.*]] {head_dim = 2 : i64, kv_shift = 0 : i64, position_axis = "cp"} {{.*}} -> (tensor<4x2x16xf32, #sharc.place<cp = S(0)>>, tensor<2x8x4xf32, #sharc.place<cp = S(2)>>)
// CHECK-NEXT: %[[K1:.*]] = sharc.ring_shift %[[K]] {axis = "cp", first = 0 : i64, offset = 1 : i64}
// CHECK-NEXT: %[[V1:.*]] = sharc.ring_shift %[[V]] {axis = "cp", first = 0 : i64, offset = 1 : i64}
// CHECK-NEXT: %[[O1:.*]], %[[L1:.*]] = sharc.attention_block %[[Q]], %[[K1]], %[[V1]] {head_dim = 2 : i64, kv_shift = 1 : i64, position_axis = "cp"}
// CHECK-NEXT: %[[O:.*]], %[[L:.*]] = sharc.lse_merge %[[O0]], %[[L0]], %[[O1]], %[[L1]]
// CHECK-NEXT: sharc.matmul %[[O]]
// CHECK-NOT: sharc.all_gather
// CHECK-NOT: sharc.all_to_all
// Backward: the merged lse feeds nothing, so its cotangent is zeros; each
// part's gradient, then each block's with its dlse; the shifted block's
// dK and dV go back one rank (offset -1, the same chain) and add to the
// own block's.
// CHECK: %[[ZERO:.*]] = sharc.fill {value = 0.000000e+00 : f64} : tensor<2x8x4xf32, #sharc.place<cp = S(2)>>
// CHECK-NEXT: %[[D0:.*]], %[[DL0:.*]] = sharc.lse_merge_grad %[[O0]], %[[L0]], %[[O]], %[[L]], %[[DO:.*]], %[[ZERO]]
// CHECK-NEXT: %[[D1:.*]], %[[DL1:.*]] = sharc.lse_merge_grad %[[O1]], %[[L1]], %[[O]], %[[L]], %[[DO]], %[[ZERO]]
// CHECK-NEXT: %[[DQ1:.*]], %[[DK1:.*]], %[[DV1:.*]] = sharc.attention_block_grad %[[Q]], %[[K1]], %[[V1]], %[[O1]], %[[L1]], %[[D1]], %[[DL1]] {head_dim = 2 : i64, kv_shift = 1 : i64, position_axis = "cp"}
// CHECK-NEXT: %[[DVB:.*]] = sharc.ring_shift %[[DV1]] {axis = "cp", first = 0 : i64, offset = -1 : i64}
// CHECK-NEXT: %[[DKB:.*]] = sharc.ring_shift %[[DK1]] {axis = "cp", first = 0 : i64, offset = -1 : i64}
// CHECK-NEXT: %[[DQ0:.*]], %[[DK0:.*]], %[[DV0:.*]] = sharc.attention_block_grad %[[Q]], %[[K]], %[[V]], %[[O0]], %[[L0]], %[[D0]], %[[DL0]] {head_dim = 2 : i64, kv_shift = 0 : i64, position_axis = "cp"}
// CHECK-NEXT: sharc.add %[[DQ1]], %[[DQ0]]
// CHECK-NEXT: sharc.add %[[DKB]], %[[DK0]]
// CHECK-NEXT: sharc.add %[[DVB]], %[[DV0]]
// CHECK-NOT: sharc.all_gather
// CHECK-NOT: sharc.all_to_all

// tp x cp with SP: heads are split over tp before the ring (q's 8 heads,
// 4 a rank), the sequence over cp; the blocks keep both.
// TPCP: sharc.attention_block {{.*}} -> (tensor<4x2x8xf32, #sharc.place<cp = S(0), tp = S(2)>>, tensor<2x4x4xf32, #sharc.place<cp = S(2), tp = S(1)>>)
// TPCP: sharc.ring_shift {{.*}} {axis = "cp", first = 0 : i64, offset = 1 : i64} : (tensor<4x2x4xf32, #sharc.place<cp = S(0), tp = S(2)>>)
// TPCP: sharc.lse_merge
// TPCP-NOT: sharc.all_to_all

// sharc-merged-block-grads: both block gradients read the merged output,
// its lse and the output's cotangent, and no dlse (the merged lse's is the
// zero fill); the merge gradients and the fill are gone.
// MERGED: %[[O0:.*]], %[[L0:.*]] = sharc.attention_block
// MERGED: %[[O:.*]], %[[L:.*]] = sharc.lse_merge %[[O0]], %[[L0]]
// MERGED-NOT: sharc.fill {value = 0.000000e+00 : f64} : tensor<2x8x4xf32
// MERGED-NOT: sharc.lse_merge_grad
// MERGED: sharc.attention_block_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[L]], %[[DO:[^ ]*]] {head_dim = 2 : i64, kv_shift = 1 : i64, position_axis = "cp"} : (tensor<4x2x16xf32, #sharc.place<cp = S(0)>>, tensor<4x2x8xf32, #sharc.place<cp = S(0)>>, tensor<4x2x8xf32, #sharc.place<cp = S(0)>>, tensor<4x2x16xf32, #sharc.place<cp = S(0)>>, tensor<2x8x4xf32, #sharc.place<cp = S(2)>>, tensor<4x2x16xf32, #sharc.place<cp = S(0)>>) ->
// MERGED-NOT: sharc.lse_merge_grad
// MERGED: sharc.attention_block_grad %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[L]], %[[DO]] {head_dim = 2 : i64, kv_shift = 0 : i64, position_axis = "cp"}
// MERGED-NOT: sharc.lse_merge_grad
