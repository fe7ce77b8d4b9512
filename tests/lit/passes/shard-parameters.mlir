// RUN: sharc-opt %s --split-input-file --sharc-adamw --sharc-shard-optimizer \
// RUN:   --sharc-shard-parameters | FileCheck %s
// RUN: sharc-opt %s --split-input-file --sharc-adamw --sharc-shard-optimizer \
// RUN:   --sharc-shard-parameters=bucket-bytes=16 | FileCheck %s --check-prefix=SMALL

// ZeRO-3: the block ZeRO-1 updates becomes the parameter itself. The 4x2
// weight's argument is its 2x2 block, the update writes it in place and the
// step returns it; its two readers (a forward and a backward GEMM) read
// gathers of it, here one for both (the group holds the whole model). The
// 3x4 weight, whose dim 0 dp does not divide, stays whole with its
// all_reduce.
// CHECK-LABEL: func.func @zero_three
// CHECK-SAME: %[[W:[^:]*]]: tensor<2x2xf32, #sharc.place<dp = S(0)>> {sharc.param = "w", sharc.placement = #sharc.place<dp = S(0)>}
// CHECK-SAME: %[[U:[^:]*]]: tensor<3x4xf32, #sharc.place<dp = R>> {sharc.param = "u"}
// CHECK: %[[G:.*]] = sharc.all_gather %[[W]] {axis = "dp", dim = 0 : i64} : (tensor<2x2xf32, #sharc.place<dp = S(0)>>) -> tensor<4x2xf32, #sharc.place<dp = R>>
// CHECK-NEXT: sharc.matmul %{{.*}}, %[[G]]
// CHECK: sharc.matmul_dgrad %{{.*}}, %[[G]]
// CHECK-NOT: slice_to_rank
// CHECK: %[[PW:[^,]*]], {{.*}} = sharc.adamw %[[W]], %{{.*}}
// CHECK-NOT: sharc.all_gather
// CHECK: return %{{[^,]*}}, %[[PW]],
// CHECK-SAME: tensor<2x2xf32, #sharc.place<dp = S(0)>>

// Groups of 16 bytes, under one parameter: the backward's gather is its own,
// and each is issued before the previous group's first reader (the first
// group's at its own reader).
// SMALL-LABEL: func.func @zero_three
// SMALL: %[[G1:.*]] = sharc.all_gather
// SMALL-NEXT: %[[G2:.*]] = sharc.all_gather
// SMALL-NEXT: sharc.matmul %{{.*}}, %[[G1]]
// SMALL: sharc.matmul_dgrad %{{.*}}, %[[G2]]
!p42 = tensor<4x2xf32, #sharc.place<dp = P>>
!r42 = tensor<4x2xf32, #sharc.place<dp = R>>
!p34 = tensor<3x4xf32, #sharc.place<dp = P>>
!r34 = tensor<3x4xf32, #sharc.place<dp = R>>
!x = tensor<3x2xf32, #sharc.place<dp = S(0)>>
!y = tensor<3x4xf32, #sharc.place<dp = S(0)>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2>,
                   sharc.optimizer = {lr = 1.0e-3 : f64}} {
  func.func @zero_three(%w: !r42 {sharc.param = "w"},
                        %u: !r34 {sharc.param = "u"},
                        %x: !x, %dy: !y, %xw: !p42, %xu: !p34,
                        %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          !r42 {sharc.output = "grad:w"}, !r34 {sharc.output = "grad:u"},
          !y {sharc.output = "y"}, !x {sharc.output = "dx"}) {
    %y = sharc.matmul %x, %w : (!x, !r42) -> !y
    %dx = sharc.matmul_dgrad %dy, %w : (!y, !r42) -> !x
    %dw = sharc.scale %xw {factor = 2.0 : f64} : (!p42) -> !p42
    %du = sharc.scale %xu {factor = 2.0 : f64} : (!p34) -> !p34
    %gw = sharc.all_reduce %dw {axis = "dp"} : (!p42) -> !r42
    %gu = sharc.all_reduce %du {axis = "dp"} : (!p34) -> !r34
    return %loss, %gw, %gu, %y, %dx : tensor<f32>, !r42, !r34, !y, !x
  }
}

// -----

// A fused weight is gathered member by member and concatenated again before
// its reader; the concat of the blocks goes.
// CHECK-LABEL: func.func @fused
// CHECK-SAME: %[[A:[^:]*]]: tensor<2x2xf32, #sharc.place<dp = S(0)>>
// CHECK-SAME: %[[B:[^:]*]]: tensor<2x2xf32, #sharc.place<dp = S(0)>>
// CHECK: %[[G:.*]]:2 = sharc.all_gather_coalesced %[[A]], %[[B]] {axis = "dp"}
// CHECK-NEXT: %[[AB:.*]] = sharc.concat %[[G]]#0, %[[G]]#1 {dim = 0 : i64}
// CHECK-NEXT: sharc.matmul %{{.*}}, %[[AB]]
// CHECK-NOT: sharc.concat
!p82 = tensor<8x2xf32, #sharc.place<dp = P>>
!r82 = tensor<8x2xf32, #sharc.place<dp = R>>
!rw = tensor<4x2xf32, #sharc.place<dp = R>>
!x = tensor<3x2xf32, #sharc.place<dp = S(0)>>
!y = tensor<3x8xf32, #sharc.place<dp = S(0)>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2>,
                   sharc.optimizer = {lr = 1.0e-3 : f64}} {
  func.func @fused(%a: !rw {sharc.param = "a"}, %b: !rw {sharc.param = "b"},
                   %x: !x, %dab: !p82, %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          !rw {sharc.output = "grad:a"}, !rw {sharc.output = "grad:b"},
          !y {sharc.output = "y"}) {
    %ab = sharc.concat %a, %b {dim = 0 : i64} : (!rw, !rw) -> !r82
    %y = sharc.matmul %x, %ab : (!x, !r82) -> !y
    %g = sharc.all_reduce %dab {axis = "dp"} : (!p82) -> !r82
    %ga, %gb = sharc.split %g {dim = 0 : i64} : (!r82) -> (!rw, !rw)
    return %loss, %ga, %gb, %y : tensor<f32>, !rw, !rw, !y
  }
}

// -----

// A fused weight one member of which keeps a whole update (3 rows, which
// dp does not divide) keeps the other whole too: the concat of parameters
// as it was, both updates whole, nothing gathered.
// CHECK-LABEL: func.func @fused_mixed
// CHECK-SAME: tensor<4x2xf32, #sharc.place<dp = R>> {sharc.param = "a"}
// CHECK-SAME: tensor<3x2xf32, #sharc.place<dp = R>> {sharc.param = "c"}
// CHECK-NEXT: sharc.concat %arg0, %arg1 {dim = 0 : i64}
// CHECK-NOT: sharc.all_gather
// CHECK-NOT: sharc.slice_to_rank
// CHECK: sharc.adamw %arg1
// CHECK: sharc.adamw %arg0
// CHECK-NOT: sharc.all_gather
// CHECK: return
!p72 = tensor<7x2xf32, #sharc.place<dp = P>>
!r72 = tensor<7x2xf32, #sharc.place<dp = R>>
!ra = tensor<4x2xf32, #sharc.place<dp = R>>
!rc = tensor<3x2xf32, #sharc.place<dp = R>>
!x = tensor<3x2xf32, #sharc.place<dp = S(0)>>
!y = tensor<3x7xf32, #sharc.place<dp = S(0)>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2>,
                   sharc.optimizer = {lr = 1.0e-3 : f64}} {
  func.func @fused_mixed(%a: !ra {sharc.param = "a"}, %c: !rc {sharc.param = "c"},
                         %x: !x, %dac: !p72, %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          !ra {sharc.output = "grad:a"}, !rc {sharc.output = "grad:c"},
          !y {sharc.output = "y"}) {
    %ac = sharc.concat %a, %c {dim = 0 : i64} : (!ra, !rc) -> !r72
    %y = sharc.matmul %x, %ac : (!x, !r72) -> !y
    %g = sharc.all_reduce %dac {axis = "dp"} : (!p72) -> !r72
    %ga, %gc = sharc.split %g {dim = 0 : i64} : (!r72) -> (!ra, !rc)
    return %loss, %ga, %gc, %y : tensor<f32>, !ra, !rc, !y
  }
}
