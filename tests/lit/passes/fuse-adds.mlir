// RUN: sharc-opt %s --split-input-file --sharc-fuse-adds | FileCheck %s
// An add of a GEMM's product, or of a norm backward's dx, that nothing else
// reads becomes that op with the other operand as its addend, in the op's
// place; an addend made after the op, a product read twice, a norm's dw,
// or an add of two others stay.

// CHECK-LABEL: func.func @residual
func.func @residual(%x: tensor<4x2x8xf32>, %w: tensor<8x8xf32>,
                    %r: tensor<4x2x8xf32>) -> tensor<4x2x8xf32> {
  // CHECK-NEXT: %[[Y:.*]] = sharc.matmul_add %arg0, %arg1, %arg2 : (tensor<4x2x8xf32>, tensor<8x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  // CHECK-NEXT: return %[[Y]]
  %p = sharc.matmul %x, %w : (tensor<4x2x8xf32>, tensor<8x8xf32>) -> tensor<4x2x8xf32>
  %y = sharc.add %r, %p : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  return %y : tensor<4x2x8xf32>
}

// -----

// The sum of three input gradients: each later GEMM takes the sum so far,
// and stays before the AdamW step that updates its weight in place.
// CHECK-LABEL: func.func @gradient_sum
func.func @gradient_sum(%dq: tensor<4x2x8xf32>, %dk: tensor<4x2x4xf32>,
                        %dv: tensor<4x2x4xf32>, %wq: tensor<8x8xf32>,
                        %wk: tensor<4x8xf32>, %wv: tensor<4x8xf32>,
                        %g: tensor<4x8xf32>, %m: tensor<4x8xf32>,
                        %v: tensor<4x8xf32>)
    -> (tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[Q:.*]] = sharc.matmul_dgrad %arg0, %arg3
  // CHECK-NEXT: %[[K:.*]] = sharc.matmul_dgrad_add %arg1, %arg4, %[[Q]]
  // CHECK-NEXT: sharc.adamw %arg4
  // CHECK-NEXT: %[[V:.*]] = sharc.matmul_dgrad_add %arg2, %arg5, %[[K]]
  // CHECK-NEXT: return %[[V]]
  %a = sharc.matmul_dgrad %dq, %wq : (tensor<4x2x8xf32>, tensor<8x8xf32>) -> tensor<4x2x8xf32>
  %b = sharc.matmul_dgrad %dk, %wk : (tensor<4x2x4xf32>, tensor<4x8xf32>) -> tensor<4x2x8xf32>
  %p, %pm, %pv = sharc.adamw %wk, %g, %m, %v {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, lr = 1.0e-3 : f64, weight_decay = 0.0 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  %s = sharc.add %a, %b : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  %c = sharc.matmul_dgrad %dv, %wv : (tensor<4x2x4xf32>, tensor<4x8xf32>) -> tensor<4x2x8xf32>
  %t = sharc.add %s, %c : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  return %t, %p, %pm, %pv : tensor<4x2x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @left_alone
func.func @left_alone(%x: tensor<4x2x8xf32>, %w: tensor<8x8xf32>)
    -> (tensor<4x2x8xf32>, tensor<4x2x8xf32>, tensor<4x2x8xf32>) {
  // The product is read twice: no fusion.
  // CHECK: sharc.matmul %arg0, %arg1
  // CHECK: sharc.add
  %p = sharc.matmul %x, %w : (tensor<4x2x8xf32>, tensor<8x8xf32>) -> tensor<4x2x8xf32>
  %y = sharc.add %p, %x : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  // The addend comes after the GEMM: the GEMM would have to move.
  // CHECK: sharc.matmul %arg0, %arg1
  // CHECK: sharc.matmul_add %[[Q:[^,]*]]
  %q = sharc.matmul %x, %w : (tensor<4x2x8xf32>, tensor<8x8xf32>) -> tensor<4x2x8xf32>
  %later = sharc.matmul %y, %w : (tensor<4x2x8xf32>, tensor<8x8xf32>) -> tensor<4x2x8xf32>
  %z = sharc.add %q, %later : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  // CHECK: sharc.add %arg0, %arg0
  %n = sharc.add %x, %x : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  return %p, %z, %n : tensor<4x2x8xf32>, tensor<4x2x8xf32>, tensor<4x2x8xf32>
}

// -----

// The residual stream's gradient at a norm: dx plus the gradient that
// bypassed the block; dw keeps its readers.
// CHECK-LABEL: func.func @norm_gradient
func.func @norm_gradient(%x: tensor<4x2x8xf32>, %w: tensor<8xf32>,
                         %dy: tensor<4x2x8xf32>, %r: tensor<4x2x8xf32>)
    -> (tensor<4x2x8xf32>, tensor<8xf32>) {
  // CHECK-NEXT: %[[DX:[^,]*]], %[[DW:[^ ]*]] = sharc.rms_norm_grad_add %arg0, %arg1, %arg2, %arg3 {eps =
  // CHECK-NEXT: return %[[DX]], %[[DW]]
  %dx, %dw = sharc.rms_norm_grad %x, %w, %dy {eps = 1.0e-6 : f64} : (tensor<4x2x8xf32>, tensor<8xf32>, tensor<4x2x8xf32>) -> (tensor<4x2x8xf32>, tensor<8xf32>)
  %s = sharc.add %r, %dx : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  return %s, %dw : tensor<4x2x8xf32>, tensor<8xf32>
}

// -----

// dx read twice, or an add of dw: no fusion.
// CHECK-LABEL: func.func @norm_gradient_left_alone
func.func @norm_gradient_left_alone(%x: tensor<4x2x8xf32>, %w: tensor<8xf32>,
                                    %dy: tensor<4x2x8xf32>, %r: tensor<4x2x8xf32>)
    -> (tensor<4x2x8xf32>, tensor<4x2x8xf32>, tensor<8xf32>) {
  // CHECK: sharc.rms_norm_grad %arg0
  // CHECK: sharc.add
  // CHECK: sharc.add
  // CHECK-NOT: rms_norm_grad_add
  %dx, %dw = sharc.rms_norm_grad %x, %w, %dy {eps = 1.0e-6 : f64} : (tensor<4x2x8xf32>, tensor<8xf32>, tensor<4x2x8xf32>) -> (tensor<4x2x8xf32>, tensor<8xf32>)
  %s = sharc.add %r, %dx : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  %t = sharc.add %dw, %w : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %s, %dx, %t : tensor<4x2x8xf32>, tensor<4x2x8xf32>, tensor<8xf32>
}
