// RUN: sharc-opt %s --split-input-file --sharc-adamw --sharc-shard-optimizer \
// RUN:   | FileCheck %s
// RUN: sharc-opt %s --split-input-file \
// RUN:   --sharc-adamw=keep-gradients=true --sharc-shard-optimizer \
// RUN:   | FileCheck %s --check-prefix=KEEP

// ZeRO-1: each dp sync becomes a reduce_scatter along dim 0, placed where
// its gradient is ready (not at the end of the backward, where the sync
// was). The update follows it on the rank's block, with moments of that
// block, and an all_gather brings the updated blocks back into the
// parameter, which the result updates in place. Dim 0 of the 3x4 weight
// and of the 3-element norm weight does not split over dp: their
// all_reduces and whole updates stay.
// CHECK-LABEL: func.func @zero_one
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x2xf32, #sharc.place<dp = R>> {sharc.param = "w"}
// CHECK-SAME: %[[U:[^:]*]]: tensor<3x4xf32, #sharc.place<dp = R>> {sharc.param = "u"}
// CHECK-SAME: %[[N:[^:]*]]: tensor<3xf32, #sharc.place<dp = R>> {sharc.param = "n"}
// CHECK-SAME: tensor<2x2xf32, #sharc.place<dp = S(0)>> {sharc.state = "m:w"}
// CHECK-SAME: tensor<2x2xf32, #sharc.place<dp = S(0)>> {sharc.state = "v:w"}
// CHECK-SAME: tensor<3x4xf32, #sharc.place<dp = R>> {sharc.state = "m:u"}
// CHECK-SAME: tensor<3x4xf32, #sharc.place<dp = R>> {sharc.state = "v:u"}
// CHECK-SAME: tensor<3xf32, #sharc.place<dp = R>> {sharc.state = "m:n"}
// CHECK: %[[DW:.*]] = sharc.scale
// CHECK-NEXT: %[[GW:.*]] = sharc.reduce_scatter %[[DW]] {axis = "dp", dim = 0 : i64} : (tensor<4x2xf32, #sharc.place<dp = P>>) -> tensor<2x2xf32, #sharc.place<dp = S(0)>>
// CHECK-NEXT: %[[BW:.*]] = sharc.slice_to_rank %[[W]] {axis = "dp", dim = 0 : i64}
// CHECK-NEXT: %[[PW:[^,]*]], {{.*}} = sharc.adamw %[[BW]], %[[GW]]
// CHECK-NEXT: %[[AW:.*]] = sharc.all_gather %[[PW]] {axis = "dp", dim = 0 : i64} : (tensor<2x2xf32, #sharc.place<dp = S(0)>>) -> tensor<4x2xf32, #sharc.place<dp = R>>
// CHECK-NEXT: %[[DU:.*]] = sharc.scale
// CHECK-NEXT: %[[DN:.*]] = sharc.scale
// CHECK-NEXT: %[[GU:.*]] = sharc.all_reduce %[[DU]] {axis = "dp"}
// CHECK-NEXT: %[[PU:[^,]*]], {{.*}} = sharc.adamw %[[U]], %[[GU]]
// CHECK-NEXT: %[[GN:.*]] = sharc.all_reduce %[[DN]] {axis = "dp"}
// CHECK-NEXT: %[[PN:[^,]*]], {{.*}} = sharc.adamw %[[N]], %[[GN]]
// CHECK: return %{{[^,]*}}, %[[AW]], {{.*}}, %[[PU]], {{.*}}, %[[PN]]

// With the gradients returned whole, nothing is sharded.
// KEEP-LABEL: func.func @zero_one
// KEEP-NOT: reduce_scatter
// KEEP-NOT: slice_to_rank
!p42 = tensor<4x2xf32, #sharc.place<dp = P>>
!r42 = tensor<4x2xf32, #sharc.place<dp = R>>
!p34 = tensor<3x4xf32, #sharc.place<dp = P>>
!r34 = tensor<3x4xf32, #sharc.place<dp = R>>
!p3 = tensor<3xf32, #sharc.place<dp = P>>
!r3 = tensor<3xf32, #sharc.place<dp = R>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2>,
                   sharc.optimizer = {lr = 1.0e-3 : f64}} {
  func.func @zero_one(%w: !r42 {sharc.param = "w"},
                      %u: !r34 {sharc.param = "u"},
                      %n: !r3 {sharc.param = "n"},
                      %xw: !p42, %xu: !p34, %xn: !p3, %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          !r42 {sharc.output = "grad:w"}, !r34 {sharc.output = "grad:u"},
          !r3 {sharc.output = "grad:n"}) {
    %dw = sharc.scale %xw {factor = 2.0 : f64} : (!p42) -> !p42
    %du = sharc.scale %xu {factor = 2.0 : f64} : (!p34) -> !p34
    %dn = sharc.scale %xn {factor = 2.0 : f64} : (!p3) -> !p3
    %gw = sharc.all_reduce %dw {axis = "dp"} : (!p42) -> !r42
    %gu = sharc.all_reduce %du {axis = "dp"} : (!p34) -> !r34
    %gn = sharc.all_reduce %dn {axis = "dp"} : (!p3) -> !r3
    return %loss, %gw, %gu, %gn : tensor<f32>, !r42, !r34, !r3
  }
}

// -----

// A fused weight's gradient, synced whole and split into its parameters'
// (sharc-fuse-projections), is split before the sync instead, so that each
// block is cut from its own parameter's rows. The two dim-0 blocks share a
// bucket: one reduce_scatter_coalesced, and one all_gather_coalesced after
// the second update.
// CHECK-LABEL: func.func @fused
// CHECK: %[[PIECES:.*]]:2 = sharc.split %{{.*}} {dim = 0 : i64} : (tensor<8x2xf32, #sharc.place<dp = P>>) -> (tensor<4x2xf32, #sharc.place<dp = P>>, tensor<4x2xf32, #sharc.place<dp = P>>)
// CHECK-NEXT: %[[BLOCKS:.*]]:2 = sharc.reduce_scatter_coalesced %[[PIECES]]#0, %[[PIECES]]#1 {axis = "dp"} : {{.*}} -> (tensor<2x2xf32, #sharc.place<dp = S(0)>>, tensor<2x2xf32, #sharc.place<dp = S(0)>>)
// CHECK: %[[PB:[^,]*]], {{.*}} = sharc.adamw %{{.*}}, %[[BLOCKS]]#1
// CHECK: %[[PA:[^,]*]], {{.*}} = sharc.adamw %{{.*}}, %[[BLOCKS]]#0
// CHECK-NEXT: %[[WHOLE:.*]]:2 = sharc.all_gather_coalesced %[[PA]], %[[PB]] {axis = "dp"}
// CHECK-NOT: sharc.all_reduce
// CHECK: return %{{[^,]*}}, %[[WHOLE]]#0, {{.*}}, %[[WHOLE]]#1
!p82 = tensor<8x2xf32, #sharc.place<dp = P>>
!r82 = tensor<8x2xf32, #sharc.place<dp = R>>
!rw = tensor<4x2xf32, #sharc.place<dp = R>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2>,
                   sharc.optimizer = {lr = 1.0e-3 : f64}} {
  func.func @fused(%a: !rw {sharc.param = "a"}, %b: !rw {sharc.param = "b"},
                   %dab: !p82, %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          !rw {sharc.output = "grad:a"}, !rw {sharc.output = "grad:b"}) {
    %g = sharc.all_reduce %dab {axis = "dp"} : (!p82) -> !r82
    %ga, %gb = sharc.split %g {dim = 0 : i64} : (!r82) -> (!rw, !rw)
    return %loss, %ga, %gb : tensor<f32>, !rw, !rw
  }
}

// -----

// A sync over dp and cp together first sums over cp (all_reduce, the two
// gradients in one all_reduce_coalesced), then reduce-scatters over dp.
// CHECK-LABEL: func.func @dp_and_cp
// CHECK: %[[SUMS:.*]]:2 = sharc.all_reduce_coalesced %{{.*}}, %{{.*}} {axis = "cp"} : (tensor<4x2xf32, #sharc.place<cp = P, dp = P>>, tensor<4x2xf32, #sharc.place<cp = P, dp = P>>) -> (tensor<4x2xf32, #sharc.place<cp = R, dp = P>>, tensor<4x2xf32, #sharc.place<cp = R, dp = P>>)
// CHECK-NEXT: sharc.reduce_scatter_coalesced %[[SUMS]]#0, %[[SUMS]]#1 {axis = "dp"} : {{.*}} -> (tensor<2x2xf32, #sharc.place<cp = R, dp = S(0)>>, tensor<2x2xf32, #sharc.place<cp = R, dp = S(0)>>)
// CHECK-NOT: sharc.all_reduce %
// CHECK: return
!ppc = tensor<4x2xf32, #sharc.place<dp = P, cp = P>>
!rrc = tensor<4x2xf32, #sharc.place<dp = R, cp = R>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2>,
                   sharc.optimizer = {lr = 1.0e-3 : f64}} {
  func.func @dp_and_cp(%a: !rrc {sharc.param = "a"}, %b: !rrc {sharc.param = "b"},
                       %xa: !ppc, %xb: !ppc, %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          !rrc {sharc.output = "grad:a"}, !rrc {sharc.output = "grad:b"}) {
    %da = sharc.scale %xa {factor = 2.0 : f64} : (!ppc) -> !ppc
    %db = sharc.scale %xb {factor = 2.0 : f64} : (!ppc) -> !ppc
    %ga = sharc.all_reduce %da {axis = "dp,cp"} : (!ppc) -> !rrc
    %gb = sharc.all_reduce %db {axis = "dp,cp"} : (!ppc) -> !rrc
    return %loss, %ga, %gb : tensor<f32>, !rrc, !rrc
  }
}
