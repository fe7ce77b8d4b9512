// RUN: sharc-opt %S/Inputs/block.mlir --sharc-data-parallel=dp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-verify-placements \
// RUN:   | FileCheck %s

// The batch is split over dp; each rank's mean loss is weighted by its
// count of valid labels over the count of all ranks' and summed; every
// parameter's gradient comes back partial over dp and is all-reduced after
// the backward.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8x1xi32, #sharc.place<dp = S(1)>> {sharc.input = "tokens", sharc.placement = #sharc.place<dp = S(1)>}
// CHECK: %[[L:.*]] = sharc.cross_entropy
// CHECK-NEXT: %[[N:.*]] = sharc.valid_count
// CHECK-NEXT: %[[T:.*]] = sharc.all_reduce %[[N]] {axis = "dp"} {{.*}} -> tensor<f32>
// CHECK-NEXT: %[[LS:.*]] = sharc.count_scale %[[L]], %{{.*}}, %[[T]]
// CHECK-NEXT: sharc.all_reduce %[[LS]] {axis = "dp"} {{.*}} -> tensor<f32>
// CHECK: %[[SEED:.*]] = sharc.fill
// CHECK-NEXT: sharc.count_scale %[[SEED]], %{{.*}}, %[[T]]
// CHECK-COUNT-5: sharc.all_reduce {{.*}} {axis = "dp"} {{.*}} #sharc.place<dp = R>>
// CHECK: return
