// RUN: sharc-opt %S/Inputs/attention-block.mlir \
// RUN:   "--sharc-context-parallel=cp=4 comm=ring split=balanced" --sharc-spmdize \
// RUN:   --sharc-autodiff --sharc-verify-placements | FileCheck %s
// RUN: sharc-opt %S/Inputs/attention-block.mlir \
// RUN:   "--sharc-context-parallel=cp=4 comm=ring split=balanced" --sharc-spmdize \
// RUN:   --sharc-autodiff --sharc-merged-block-grads --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=MERGED

// Ring attention at cp 4 under the balanced split (eight chunks of one
// position; rank r holds chunks r and 7 - r): every block is needed by
// every rank, so each of the three steps shifts k and v round the whole
// ring (first 0 and the wrap-around link, where the contiguous split's
// chain starts at step - 1), and every block attends by the two chunks'
// global positions (position_split).
// CHECK-LABEL: module attributes {sharc.balanced_axis = "cp", sharc.context_parallel = "ring"
// CHECK: %[[Q:.*]] = sharc.rope {{.*}}position_axis = "cp", position_split = "balanced"
// CHECK-NEXT: %[[K:.*]] = sharc.rope {{.*}}position_axis = "cp", position_split = "balanced"
// CHECK-NEXT: %[[O0:.*]], %[[L0:.*]] = sharc.attention_block %[[Q]], %[[K]], %[[V:.*]] {head_dim = 2 : i64, kv_shift = 0 : i64, position_axis = "cp", position_split = "balanced"} {{.*}} -> (tensor<2x2x16xf32, #sharc.place<cp = S(0)>>, tensor<2x8x2xf32, #sharc.place<cp = S(2)>>)
// CHECK-NEXT: %[[K1:.*]] = sharc.ring_shift %[[K]] {axis = "cp", first = 0 : i64, offset = 1 : i64, wrap}
// CHECK-NEXT: %[[V1:.*]] = sharc.ring_shift %[[V]] {axis = "cp", first = 0 : i64, offset = 1 : i64, wrap}
// CHECK-NEXT: %[[O1:.*]], %[[L1:.*]] = sharc.attention_block %[[Q]], %[[K1]], %[[V1]] {head_dim = 2 : i64, kv_shift = 1 : i64, position_axis = "cp", position_split = "balanced"}
// CHECK-NEXT: sharc.lse_merge %[[O0]], %[[L0]], %[[O1]], %[[L1]]
// CHECK-NEXT: %[[K2:.*]] = sharc.ring_shift %[[K1]] {axis = "cp", first = 0 : i64, offset = 1 : i64, wrap}
// CHECK-NEXT: %[[V2:.*]] = sharc.ring_shift %[[V1]] {axis = "cp", first = 0 : i64, offset = 1 : i64, wrap}
// CHECK-NEXT: sharc.attention_block %[[Q]], %[[K2]], %[[V2]] {head_dim = 2 : i64, kv_shift = 2 : i64, position_axis = "cp", position_split = "balanced"}
// CHECK-NEXT: sharc.lse_merge
// CHECK-NEXT: %[[K3:.*]] = sharc.ring_shift %[[K2]] {axis = "cp", first = 0 : i64, offset = 1 : i64, wrap}
// CHECK-NEXT: %[[V3:.*]] = sharc.ring_shift %[[V2]] {axis = "cp", first = 0 : i64, offset = 1 : i64, wrap}
// CHECK-NEXT: sharc.attention_block %[[Q]], %[[K3]], %[[V3]] {head_dim = 2 : i64, kv_shift = 3 : i64, position_axis = "cp", position_split = "balanced"}
// CHECK-NEXT: sharc.lse_merge
// CHECK-NOT: sharc.permute_blocks
// CHECK-NOT: sharc.all_gather
// CHECK-NOT: sharc.all_to_all
// Backward: the gradient blocks keep the split, and the K/V cotangents go
// back round the same ring (offset -1, wrap), three times each.
// CHECK: sharc.attention_block_grad {{.*}} {head_dim = 2 : i64, kv_shift = 3 : i64, position_axis = "cp", position_split = "balanced"}
// CHECK-COUNT-6: sharc.ring_shift {{.*}} {axis = "cp", first = 0 : i64, offset = -1 : i64, wrap}
// CHECK-NOT: sharc.ring_shift
// CHECK-NOT: sharc.all_gather
// CHECK-NOT: sharc.all_to_all

// sharc-merged-block-grads collapses the chain of three merges: each of
// the four block gradients reads the last merge's output and lse and its
// output's cotangent, without dlse, and no merge gradient is left.
// MERGED: sharc.lse_merge
// MERGED: sharc.lse_merge
// MERGED: %[[O:.*]], %[[L:.*]] = sharc.lse_merge
// MERGED-NOT: sharc.lse_merge_grad
// MERGED-COUNT-4: sharc.attention_block_grad {{.*}}, %[[O]], %[[L]], %{{[^ ,]*}} {head_dim = 2 : i64
// MERGED-NOT: sharc.lse_merge_grad
// MERGED-NOT: sharc.attention_block_grad
