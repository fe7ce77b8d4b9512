// RUN: sharc-opt %s --split-input-file --sharc-autodiff | FileCheck %s

// The backward starts from d loss = 1 and runs the VJPs newest first; a
// value used twice receives the sum of both cotangents.
// CHECK-LABEL: func.func @linear_softmax_regression
// CHECK-SAME: -> (tensor<f32> {sharc.output = "loss"}, tensor<16x8xf32> {sharc.output = "grad:embed"}, tensor<16x8xf32> {sharc.output = "grad:head"})
// CHECK: %[[H:.*]] = sharc.embedding %[[TABLE:[^,]*]], %[[IDS:[^ ]*]]
// CHECK: %[[R:.*]] = sharc.add %[[H]], %[[H]]
// CHECK: %[[LOGITS:.*]] = sharc.matmul %[[R]], %[[W:[^ ]*]]
// CHECK: %[[LOSS:.*]] = sharc.cross_entropy %[[LOGITS]], %[[LABELS:[^ ]*]]
// CHECK: %[[SEED:.*]] = sharc.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK: %[[DLOGITS:.*]] = sharc.cross_entropy_grad %[[LOGITS]], %[[LABELS]], %[[SEED]]
// CHECK: %[[DR:.*]] = sharc.matmul_dgrad %[[DLOGITS]], %[[W]]
// CHECK: %[[DW:.*]] = sharc.matmul_wgrad %[[DLOGITS]], %[[R]]
// CHECK: %[[DH:.*]] = sharc.add %[[DR]], %[[DR]]
// CHECK: %[[DTABLE:.*]] = sharc.embedding_grad %[[DH]], %[[IDS]]
// CHECK: return %[[LOSS]], %[[DTABLE]], %[[DW]]
func.func @linear_softmax_regression(
    %table: tensor<16x8xf32> {sharc.param = "embed"},
    %w: tensor<16x8xf32> {sharc.param = "head"},
    %ids: tensor<4x2xi32> {sharc.input = "tokens"},
    %labels: tensor<4x2xi32> {sharc.input = "labels"})
    -> (tensor<f32> {sharc.output = "loss"}) {
  %h = sharc.embedding %table, %ids
      : (tensor<16x8xf32>, tensor<4x2xi32>) -> tensor<4x2x8xf32>
  %r = sharc.add %h, %h
      : (tensor<4x2x8xf32>, tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  %logits = sharc.matmul %r, %w
      : (tensor<4x2x8xf32>, tensor<16x8xf32>) -> tensor<4x2x16xf32>
  %loss = sharc.cross_entropy %logits, %labels {valid_vocab = 16 : i64}
      : (tensor<4x2x16xf32>, tensor<4x2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A tied table used by the lookup and the head gets one gradient: the sum.
// CHECK-LABEL: func.func @tied_embedding_sums_both_uses
// CHECK: %[[FROM_HEAD:.*]] = sharc.matmul_wgrad
// CHECK: %[[FROM_LOOKUP:.*]] = sharc.embedding_grad
// CHECK: %[[SUM:.*]] = sharc.add %[[FROM_HEAD]], %[[FROM_LOOKUP]]
// CHECK: return %{{.*}}, %[[SUM]]
func.func @tied_embedding_sums_both_uses(
    %table: tensor<16x8xf32> {sharc.param = "embed"},
    %ids: tensor<4x2xi32> {sharc.input = "tokens"},
    %labels: tensor<4x2xi32> {sharc.input = "labels"})
    -> (tensor<f32> {sharc.output = "loss"}) {
  %h = sharc.embedding %table, %ids
      : (tensor<16x8xf32>, tensor<4x2xi32>) -> tensor<4x2x8xf32>
  %logits = sharc.matmul %h, %table
      : (tensor<4x2x8xf32>, tensor<16x8xf32>) -> tensor<4x2x16xf32>
  %loss = sharc.cross_entropy %logits, %labels {valid_vocab = 16 : i64}
      : (tensor<4x2x16xf32>, tensor<4x2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Attention's lse result only feeds the backward; q, k and v get
// their cotangents from one attention_grad, then through rope and rms_norm.
// CHECK-LABEL: func.func @attention_block
// CHECK: %[[O:.*]], %[[LSE:.*]] = sharc.attention %[[Q:[^,]*]], %[[K:[^,]*]], %[[V:[^ ]*]]
// CHECK: sharc.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %{{.*}} {head_dim = 4 : i64}
// CHECK: sharc.rope_grad
// CHECK: sharc.rms_norm_grad
func.func @attention_block(%x: tensor<4x1x8xf32> {sharc.param = "x"},
                           %n: tensor<4xf32> {sharc.param = "n"},
                           %head: tensor<5x8xf32> {sharc.param = "head"},
                           %labels: tensor<4x1xi32> {sharc.input = "labels"})
    -> (tensor<f32> {sharc.output = "loss"}) {
  %xn = sharc.rms_norm %x, %n {eps = 1.0e-6 : f64}
      : (tensor<4x1x8xf32>, tensor<4xf32>) -> tensor<4x1x8xf32>
  %q = sharc.rope %xn {head_dim = 4 : i64, theta = 1.0e6 : f64}
      : (tensor<4x1x8xf32>) -> tensor<4x1x8xf32>
  %o, %lse = sharc.attention %q, %x, %x {head_dim = 4 : i64}
      : (tensor<4x1x8xf32>, tensor<4x1x8xf32>, tensor<4x1x8xf32>)
      -> (tensor<4x1x8xf32>, tensor<1x2x4xf32>)
  %logits = sharc.matmul %o, %head
      : (tensor<4x1x8xf32>, tensor<5x8xf32>) -> tensor<4x1x5xf32>
  %loss = sharc.cross_entropy %logits, %labels {valid_vocab = 5 : i64}
      : (tensor<4x1x5xf32>, tensor<4x1xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A function without a loss result is left alone.
// CHECK-LABEL: func.func @no_loss_no_backward
// CHECK-NOT: sharc.fill
// CHECK: return
func.func @no_loss_no_backward(%a: tensor<4xf32> {sharc.param = "a"})
    -> (tensor<4xf32>) {
  return %a : tensor<4xf32>
}
