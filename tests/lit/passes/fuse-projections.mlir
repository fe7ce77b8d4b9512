// RUN: sharc-opt %S/Inputs/block.mlir --sharc-autodiff \
// RUN:   --sharc-fuse-projections | FileCheck %s
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-data-parallel=dp=2 \
// RUN:   --sharc-tensor-parallel=tp=2 --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-fuse-projections | FileCheck %s --check-prefix=SHARDED
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-autodiff \
// RUN:   --sharc-fuse-projections --sharc-adamw | FileCheck %s --check-prefix=ADAMW

// q and k read one normed input and feed swiglu as its gate and up: one
// GEMM over both weights' rows, whose output swiglu_packed reads in place (no split by columns); its
// gradient comes out packed the same way and feeds one input-gradient GEMM
// (autodiff's add is gone) and one weight-gradient GEMM whose rows are the
// two gradients.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[WQ:[^:]*]]: tensor<8x8xf32> {sharc.param = "q"
// CHECK-SAME: %[[WK:[^:]*]]: tensor<8x8xf32> {sharc.param = "k"
// CHECK: %[[X:.*]] = sharc.rms_norm
// CHECK-NEXT: %[[W:.*]] = sharc.concat %[[WQ]], %[[WK]] {dim = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[Y:.*]] = sharc.matmul %[[X]], %[[W]] : (tensor<8x2x8xf32>, tensor<16x8xf32>) -> tensor<8x2x16xf32>
// CHECK-NOT: sharc.split %[[Y]]
// CHECK-NEXT: sharc.swiglu_packed %[[Y]] : (tensor<8x2x16xf32>) -> tensor<8x2x8xf32>
// CHECK-NOT: sharc.concat {{.*}} {dim = 2 : i64}
// CHECK: %[[DY:.*]] = sharc.swiglu_packed_grad %[[Y]], %{{.*}} : (tensor<8x2x16xf32>, tensor<8x2x8xf32>) -> tensor<8x2x16xf32>
// CHECK-NEXT: %[[DX:.*]] = sharc.matmul_dgrad %[[DY]], %[[W]] : (tensor<8x2x16xf32>, tensor<16x8xf32>) -> tensor<8x2x8xf32>
// CHECK-NEXT: %[[DW:.*]] = sharc.matmul_wgrad %[[DY]], %[[X]] : (tensor<8x2x16xf32>, tensor<8x2x8xf32>) -> tensor<16x8xf32>
// CHECK-NEXT: %[[G:.*]]:2 = sharc.split %[[DW]] {dim = 0 : i64}
// CHECK-NEXT: sharc.rms_norm_grad %{{.*}}, %{{.*}}, %[[DX]]
// CHECK-NOT: sharc.matmul_dgrad %{{.*}}, %[[WQ]]
// CHECK: return {{.*}}%[[G]]#0, %[[G]]#1

// Each rank joins its own column shards; the data-parallel sum of the two
// gradients becomes one all_reduce of the fused gradient, before the split.
// SHARDED: %[[W:.*]] = sharc.concat %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<4x8xf32, #sharc.place<dp = R, tp = S(0)>>, tensor<4x8xf32, #sharc.place<dp = R, tp = S(0)>>) -> tensor<8x8xf32, #sharc.place<dp = R, tp = S(0)>>
// SHARDED: %[[DW:.*]] = sharc.matmul_wgrad {{.*}} -> tensor<8x8xf32, #sharc.place<dp = P, tp = S(0)>>
// SHARDED-NEXT: %[[R:.*]] = sharc.all_reduce %[[DW]] {axis = "dp"}
// SHARDED-NEXT: %{{.*}}:2 = sharc.split %[[R]] {dim = 0 : i64}

// The update of q and k waits for the input-gradient GEMM that reads the
// fused weight their updates write.
// ADAMW: sharc.matmul_dgrad %{{.*}}, %[[W:.*]] :
// ADAMW: sharc.adamw
// ADAMW-NOT: sharc.matmul_dgrad %{{.*}}, %[[W]]
