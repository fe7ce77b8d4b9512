// RUN: sharc-opt %S/Inputs/block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   | FileCheck %s --check-prefix=ANNOTATE
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-spmdize | FileCheck %s --check-prefix=FORWARD
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-tensor-parallel=tp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-verify-placements \
// RUN:   | FileCheck %s --check-prefix=BACKWARD

// The pass requests placements by parameter role: column S(0), row S(1),
// norms, embedding and head whole.
// ANNOTATE: module attributes {sharc.mesh = #sharc.mesh<dp = 1, tp = 2>
// ANNOTATE: sharc.param = "norm", sharc.placement = #sharc.place<>
// ANNOTATE-SAME: sharc.param = "q", sharc.placement = #sharc.place<tp = S(0)>
// ANNOTATE-SAME: sharc.param = "o", sharc.placement = #sharc.place<tp = S(1)>

// Forward: Megatron's f (replicate) once before q and k, local shapes, and
// an all_reduce after the row-parallel o.
// FORWARD-LABEL: func.func @train_step
// FORWARD-SAME: tensor<4x8xf32, #sharc.place<tp = S(0)>> {{.*}}sharc.param = "q"
// FORWARD-SAME: tensor<8x4xf32, #sharc.place<tp = S(1)>> {{.*}}sharc.param = "o"
// FORWARD: %[[X:.*]] = sharc.rms_norm
// FORWARD-NEXT: %[[F:.*]] = sharc.replicate %[[X]] {axis = "tp"} {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = R>>
// FORWARD-NEXT: sharc.matmul %[[F]], {{.*}} -> tensor<8x2x4xf32, #sharc.place<tp = S(2)>>
// FORWARD-NEXT: sharc.matmul %[[F]], {{.*}} -> tensor<8x2x4xf32, #sharc.place<tp = S(2)>>
// FORWARD-NOT: sharc.replicate
// FORWARD: %[[O:.*]] = sharc.matmul {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = P>>
// FORWARD-NEXT: sharc.all_reduce %[[O]] {axis = "tp"} {{.*}} -> tensor<8x2x8xf32>
// FORWARD-NOT: sharc.all_gather
// FORWARD-NOT: sharc.reduce_scatter

// Backward: f's transpose all-reduces the summed input gradient of q and k
// (its wgrads see the replicated input); the row's all_reduce transposes
// to the identity. Norm weights stay whole: no gradient all_reduce.
// BACKWARD: sharc.fill
// BACKWARD-NOT: sharc.all_reduce
// BACKWARD: %[[DQ:.*]] = sharc.matmul_dgrad {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = P>>
// BACKWARD: %[[DK:.*]] = sharc.matmul_dgrad {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = P>>
// BACKWARD: %[[SUM:.*]] = sharc.add
// BACKWARD-NEXT: sharc.all_reduce %[[SUM]] {axis = "tp"} {{.*}} -> tensor<8x2x8xf32>
// BACKWARD-NEXT: sharc.rms_norm_grad
// BACKWARD-NOT: sharc.all_reduce
// BACKWARD: return
