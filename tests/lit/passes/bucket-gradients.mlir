// RUN: sharc-opt %S/Inputs/block.mlir --sharc-data-parallel=dp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-bucket-gradients=bucket-bytes=600 | FileCheck %s
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-data-parallel=dp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-bucket-gradients \
// RUN:   | FileCheck %s --check-prefix=ONE

// Gradients are bucketed in the order the backward makes them ready (the
// head first, the embedding last), at most 600 bytes a bucket: head (512),
// o + k (256 + 256), q + norm (256 + 32), embedding (512). Each bucket
// follows its last gradient, so it can run while the backward goes on.
// CHECK: %[[DHEAD:.*]] = sharc.matmul_wgrad
// CHECK-NEXT: sharc.all_reduce_coalesced %[[DHEAD]] {axis = "dp"} : (tensor<16x8xf32, #sharc.place<dp = P, tp = I>>)
// CHECK: %[[DO:.*]] = sharc.matmul_wgrad
// CHECK: %[[DK:.*]] = sharc.matmul_wgrad
// CHECK-NEXT: sharc.all_reduce_coalesced %[[DO]], %[[DK]] {axis = "dp"}
// CHECK: %[[DQ:.*]] = sharc.matmul_wgrad
// CHECK: %{{.*}}, %[[DNORM:.*]] = sharc.rms_norm_grad
// CHECK-NEXT: sharc.all_reduce_coalesced %[[DQ]], %[[DNORM]] {axis = "dp"}
// CHECK: %[[DEMBED:.*]] = sharc.embedding_grad
// CHECK-NEXT: sharc.all_reduce_coalesced %[[DEMBED]] {axis = "dp"}
// CHECK-NOT: sharc.all_reduce {{.*}}axis = "dp"
// CHECK: return

// With DDP's 25 MiB, this small model is one bucket.
// ONE-COUNT-1: sharc.all_reduce_coalesced
// ONE-NOT: sharc.all_reduce_coalesced
