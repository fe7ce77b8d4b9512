// RUN: sharc-opt %s --split-input-file --sharc-fuse-norm-rope | FileCheck %s
// A per-head rms_norm whose result feeds a rope alone becomes one
// rms_norm_rope in the norm's place, and rope_grad feeding rms_norm_grad
// alone one rms_norm_rope_grad in the norm backward's place; a norm read
// twice, a layer norm (w wider than a head) and a rotated gradient read
// twice stay apart.

// CHECK-LABEL: func.func @forward_and_backward
func.func @forward_and_backward(%x: tensor<4x2x16xf32>, %w: tensor<8xf32>,
                                %dy: tensor<4x2x16xf32>)
    -> (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<8xf32>) {
  // CHECK-NEXT: %[[Y:.*]] = sharc.rms_norm_rope %arg0, %arg1 {eps = {{.*}} : f64, head_dim = 8 : i64, position_offset = 3 : i64, theta = 1.000000e+04 : f64}
  // CHECK-NEXT: %[[DX:.*]], %[[DW:.*]] = sharc.rms_norm_rope_grad %arg0, %arg1, %arg2 {eps = {{.*}} : f64, head_dim = 8 : i64, position_offset = 3 : i64, theta = 1.000000e+04 : f64}
  // CHECK-NEXT: return %[[Y]], %[[DX]], %[[DW]]
  %n = sharc.rms_norm %x, %w {eps = 1.0e-6 : f64} : (tensor<4x2x16xf32>, tensor<8xf32>) -> tensor<4x2x16xf32>
  %y = sharc.rope %n {head_dim = 8 : i64, theta = 1.0e4 : f64, position_offset = 3 : i64} : (tensor<4x2x16xf32>) -> tensor<4x2x16xf32>
  %g = sharc.rope_grad %dy {head_dim = 8 : i64, theta = 1.0e4 : f64, position_offset = 3 : i64} : (tensor<4x2x16xf32>) -> tensor<4x2x16xf32>
  %dx, %dw = sharc.rms_norm_grad %x, %w, %g {eps = 1.0e-6 : f64} : (tensor<4x2x16xf32>, tensor<8xf32>, tensor<4x2x16xf32>) -> (tensor<4x2x16xf32>, tensor<8xf32>)
  return %y, %dx, %dw : tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<8xf32>
}

// -----

// CHECK-LABEL: func.func @stay_apart
func.func @stay_apart(%x: tensor<4x2x16xf32>, %w: tensor<8xf32>,
                      %wide: tensor<16xf32>, %dy: tensor<4x2x16xf32>)
    -> (tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>,
        tensor<4x2x16xf32>, tensor<4x2x16xf32>) {
  // CHECK-NOT: rms_norm_rope
  // CHECK: sharc.rms_norm %arg0, %arg1
  // CHECK: sharc.rope
  // CHECK: sharc.rms_norm %arg0, %arg2
  // CHECK: sharc.rope
  // CHECK: sharc.rope_grad
  // CHECK: sharc.rms_norm_grad
  %n = sharc.rms_norm %x, %w {eps = 1.0e-6 : f64} : (tensor<4x2x16xf32>, tensor<8xf32>) -> tensor<4x2x16xf32>
  %y = sharc.rope %n {head_dim = 8 : i64, theta = 1.0e4 : f64} : (tensor<4x2x16xf32>) -> tensor<4x2x16xf32>
  %l = sharc.rms_norm %x, %wide {eps = 1.0e-6 : f64} : (tensor<4x2x16xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  %z = sharc.rope %l {head_dim = 8 : i64, theta = 1.0e4 : f64} : (tensor<4x2x16xf32>) -> tensor<4x2x16xf32>
  %g = sharc.rope_grad %dy {head_dim = 8 : i64, theta = 1.0e4 : f64} : (tensor<4x2x16xf32>) -> tensor<4x2x16xf32>
  %dx, %dw = sharc.rms_norm_grad %x, %w, %g {eps = 1.0e-6 : f64} : (tensor<4x2x16xf32>, tensor<8xf32>, tensor<4x2x16xf32>) -> (tensor<4x2x16xf32>, tensor<8xf32>)
  return %y, %n, %z, %dx, %g : tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>, tensor<4x2x16xf32>
}
