// RUN: sharc-opt %S/Inputs/block.mlir --sharc-data-parallel=dp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-verify-placements \
// RUN:   | FileCheck %s

// The batch is split over dp; each rank's mean loss is scaled by 1/dp and
// summed; every parameter's gradient comes back partial over dp and is
// all-reduced after the backward.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8x1xi32, #sharc.place<dp = S(1)>> {sharc.input = "tokens", sharc.placement = #sharc.place<dp = S(1)>}
// CHECK: %[[L:.*]] = sharc.cross_entropy
// CHECK-NEXT: %[[LS:.*]] = sharc.scale %[[L]] {factor = 5.000000e-01 : f64}
// CHECK-NEXT: sharc.all_reduce %[[LS]] {axis = "dp"} {{.*}} -> tensor<f32>
// CHECK: sharc.fill
// CHECK-NEXT: sharc.scale
// CHECK-COUNT-5: sharc.all_reduce {{.*}} {axis = "dp"} {{.*}} #sharc.place<dp = R>>
// CHECK: return
