// RUN: sharc-opt %S/Inputs/block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-sequence-parallel --sharc-spmdize \
// RUN:   | FileCheck %s --check-prefix=FORWARD
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-sequence-parallel --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-verify-placements | FileCheck %s --check-prefix=BACKWARD

// Forward: the residual stream is split over the sequence; one all_gather
// feeds q and k, a reduce_scatter ends the row-parallel o, and the whole
// LM head gets the gathered (invariant) hidden states.
// FORWARD-LABEL: func.func @train_step
// FORWARD-SAME: tensor<8xf32, #sharc.place<tp = R>> {{.*}}sharc.param = "norm"
// FORWARD: %[[H:.*]] = sharc.embedding
// FORWARD-NEXT: %[[HS:.*]] = sharc.slice_to_rank %[[H]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<tp = S(0)>>
// FORWARD-NEXT: %[[X:.*]] = sharc.rms_norm %[[HS]]
// FORWARD-NEXT: %[[G:.*]] = sharc.all_gather %[[X]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = R>>
// FORWARD-NEXT: sharc.matmul %[[G]]
// FORWARD-NEXT: sharc.matmul %[[G]]
// FORWARD-NOT: sharc.all_gather %[[X]]
// FORWARD: %[[O:.*]] = sharc.matmul {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = P>>
// FORWARD-NEXT: %[[OS:.*]] = sharc.reduce_scatter %[[O]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<tp = S(0)>>
// FORWARD-NEXT: %[[R:.*]] = sharc.add %[[HS]], %[[OS]]
// FORWARD-NEXT: %[[RG:.*]] = sharc.all_gather %[[R]] {{.*}} -> tensor<8x2x8xf32>
// FORWARD-NEXT: sharc.matmul %[[RG]]
// FORWARD-NOT: sharc.all_reduce

// Backward: the transposes. The head's gather (to I) becomes a slice, the
// reduce_scatter an all_gather, the q/k all_gather (to R) a
// reduce_scatter, the embedding's slice an all_gather; the norm weight,
// used on sequence shards, gets its gradient all-reduced.
// BACKWARD: sharc.fill
// BACKWARD: sharc.slice_to_rank {{.*}} {axis = "tp", dim = 0 : i64}
// BACKWARD: sharc.all_gather {{.*}} {axis = "tp", dim = 0 : i64}
// BACKWARD: sharc.matmul_dgrad
// BACKWARD: %[[DX:.*]] = sharc.add
// BACKWARD-NEXT: sharc.reduce_scatter %[[DX]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<tp = S(0)>>
// BACKWARD: %{{.*}}, %[[DW:.*]] = sharc.rms_norm_grad
// BACKWARD: sharc.all_gather {{.*}} -> tensor<8x2x8xf32>
// BACKWARD-NEXT: sharc.embedding_grad
// BACKWARD: sharc.all_reduce %[[DW]] {axis = "tp"} {{.*}} -> tensor<8xf32, #sharc.place<tp = R>>
