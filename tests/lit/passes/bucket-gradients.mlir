// RUN: sharc-opt %S/Inputs/block.mlir --sharc-data-parallel=dp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-bucket-gradients=bucket-bytes=600 | FileCheck %s
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-data-parallel=dp=2 \
// RUN:   --sharc-spmdize --sharc-autodiff --sharc-bucket-gradients \
// RUN:   | FileCheck %s --check-prefix=ONE
// RUN: sharc-opt %s --split-input-file --sharc-bucket-gradients \
// RUN:   | FileCheck %s --check-prefix=CASE

// Gradients are bucketed in the order the backward makes them ready (the
// head first, the embedding last), at most 600 bytes a bucket: head (512),
// o + k (256 + 256), q + norm (256 + 32), embedding (512). Each bucket
// follows its last gradient, so it can run while the backward goes on.
// CHECK: %[[DHEAD:.*]] = sharc.matmul_wgrad
// CHECK-NEXT: sharc.all_reduce_coalesced %[[DHEAD]] {axis = "dp"} : (tensor<16x8xf32, #sharc.place<dp = P>>)
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

// -----

// A bucket becomes one slab that one collective call reduces, so each
// element type fills a bucket of its own; the f32 pair shares one although
// the bf16 gradient comes between them.
!pf = tensor<8xf32, #sharc.place<dp = P>>
!rf = tensor<8xf32, #sharc.place<dp = R>>
!pb = tensor<8xbf16, #sharc.place<dp = P>>
!rb = tensor<8xbf16, #sharc.place<dp = R>>

// CASE-LABEL: func.func @bucket_holds_one_element_type
// CASE: %[[GA:.*]] = sharc.scale
// CASE: %[[GB:.*]] = sharc.scale
// CASE-NEXT: %[[RB:.*]] = sharc.all_reduce_coalesced %[[GB]] {axis = "dp"} : (tensor<8xbf16
// CASE-NEXT: %[[GC:.*]] = sharc.scale
// CASE-NEXT: %[[RAC:.*]]:2 = sharc.all_reduce_coalesced %[[GA]], %[[GC]] {axis = "dp"} : (tensor<8xf32, {{.*}}>, tensor<8xf32
// CASE-NEXT: return %[[RAC]]#0, %[[RB]], %[[RAC]]#1
func.func @bucket_holds_one_element_type(%a: !pf, %b: !pb, %c: !pf)
    -> (!rf, !rb, !rf) {
  %ga = sharc.scale %a {factor = 2.0 : f64} : (!pf) -> !pf
  %ra = sharc.all_reduce %ga {axis = "dp"} : (!pf) -> !rf
  %gb = sharc.scale %b {factor = 2.0 : f64} : (!pb) -> !pb
  %rb = sharc.all_reduce %gb {axis = "dp"} : (!pb) -> !rb
  %gc = sharc.scale %c {factor = 2.0 : f64} : (!pf) -> !pf
  %rc = sharc.all_reduce %gc {axis = "dp"} : (!pf) -> !rf
  return %ra, %rb, %rc : !rf, !rb, !rf
}

// -----

// The planner reduces a bucket in place, so a gradient that something
// besides its all_reduce reads stays out of the bucket: that reader must
// see this rank's partial, not the sum.
!pf = tensor<8xf32, #sharc.place<dp = P>>
!rf = tensor<8xf32, #sharc.place<dp = R>>

// CASE-LABEL: func.func @gradient_read_twice_keeps_its_all_reduce
// CASE: %[[GA:.*]] = sharc.scale
// CASE-NEXT: %[[RA:.*]] = sharc.all_reduce %[[GA]] {axis = "dp"}
// CASE-NEXT: %[[TWICE:.*]] = sharc.scale %[[GA]]
// CASE-NEXT: %[[GB:.*]] = sharc.scale
// CASE-NEXT: sharc.all_reduce_coalesced %[[GB]] {axis = "dp"}
// CASE-NOT: sharc.all_reduce_coalesced
func.func @gradient_read_twice_keeps_its_all_reduce(%a: !pf, %b: !pf)
    -> (!rf, !pf, !rf) {
  %ga = sharc.scale %a {factor = 2.0 : f64} : (!pf) -> !pf
  %ra = sharc.all_reduce %ga {axis = "dp"} : (!pf) -> !rf
  %twice = sharc.scale %ga {factor = 2.0 : f64} : (!pf) -> !pf
  %gb = sharc.scale %b {factor = 2.0 : f64} : (!pf) -> !pf
  %rb = sharc.all_reduce %gb {axis = "dp"} : (!pf) -> !rf
  return %ra, %twice, %rb : !rf, !pf, !rf
}
