// RUN: sharc-opt %s | sharc-opt | FileCheck %s
// Every op of the dialect prints and parses back to itself.

// CHECK-LABEL: func.func @forward_ops
func.func @forward_ops(%table: tensor<128x64xf32>, %ids: tensor<16x2xi32>,
                       %w: tensor<64xf32>, %wq: tensor<64x64xf32>,
                       %wk: tensor<32x64xf32>, %qn: tensor<16xf32>)
    -> tensor<f32> {
  // CHECK: sharc.embedding %{{.*}}, %{{.*}} : (tensor<128x64xf32>, tensor<16x2xi32>) -> tensor<16x2x64xf32>
  %h = sharc.embedding %table, %ids
      : (tensor<128x64xf32>, tensor<16x2xi32>) -> tensor<16x2x64xf32>
  // CHECK: sharc.rms_norm {{.*}} {eps = 9.9999999999999995E-7 : f64}
  %x = sharc.rms_norm %h, %w {eps = 1.0e-6 : f64}
      : (tensor<16x2x64xf32>, tensor<64xf32>) -> tensor<16x2x64xf32>
  // CHECK: sharc.matmul
  %q = sharc.matmul %x, %wq
      : (tensor<16x2x64xf32>, tensor<64x64xf32>) -> tensor<16x2x64xf32>
  %k = sharc.matmul %x, %wk
      : (tensor<16x2x64xf32>, tensor<32x64xf32>) -> tensor<16x2x32xf32>
  // CHECK: sharc.rms_norm {{.*}} : (tensor<16x2x64xf32>, tensor<16xf32>)
  %qq = sharc.rms_norm %q, %qn {eps = 1.0e-6 : f64}
      : (tensor<16x2x64xf32>, tensor<16xf32>) -> tensor<16x2x64xf32>
  // CHECK: sharc.rope {{.*}} {head_dim = 16 : i64, theta = 1.000000e+06 : f64}
  %qr = sharc.rope %qq {head_dim = 16 : i64, theta = 1.0e6 : f64}
      : (tensor<16x2x64xf32>) -> tensor<16x2x64xf32>
  // CHECK: sharc.attention {{.*}} -> (tensor<16x2x64xf32>, tensor<2x4x16xf32>)
  %o, %lse = sharc.attention %qr, %k, %k {head_dim = 16 : i64}
      : (tensor<16x2x64xf32>, tensor<16x2x32xf32>, tensor<16x2x32xf32>)
      -> (tensor<16x2x64xf32>, tensor<2x4x16xf32>)
  // CHECK: sharc.swiglu
  %s = sharc.swiglu %o, %x
      : (tensor<16x2x64xf32>, tensor<16x2x64xf32>) -> tensor<16x2x64xf32>
  // CHECK: sharc.add
  %r = sharc.add %h, %s
      : (tensor<16x2x64xf32>, tensor<16x2x64xf32>) -> tensor<16x2x64xf32>
  %logits = sharc.matmul %r, %table
      : (tensor<16x2x64xf32>, tensor<128x64xf32>) -> tensor<16x2x128xf32>
  // CHECK: sharc.cross_entropy {{.*}} {valid_vocab = 128 : i64}
  %loss = sharc.cross_entropy %logits, %ids {valid_vocab = 128 : i64}
      : (tensor<16x2x128xf32>, tensor<16x2xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @loss_over_valid_labels
func.func @loss_over_valid_labels(%mean: tensor<f32>, %ids: tensor<16x2xi32>)
    -> tensor<f32> {
  // CHECK: %[[N:.*]] = sharc.valid_count %{{.*}} {valid_vocab = 128 : i64}
  %n = sharc.valid_count %ids {valid_vocab = 128 : i64}
      : (tensor<16x2xi32>) -> tensor<f32>
  // CHECK: sharc.count_scale %{{.*}}, %{{.*}}, %[[N]] {valid_vocab = 128 : i64}
  %share = sharc.count_scale %mean, %ids, %n {valid_vocab = 128 : i64}
      : (tensor<f32>, tensor<16x2xi32>, tensor<f32>) -> tensor<f32>
  return %share : tensor<f32>
}

// CHECK-LABEL: func.func @gradient_ops
func.func @gradient_ops(%x: tensor<16x2x64xf32>, %w: tensor<64xf32>,
                        %wq: tensor<64x64xbf16>, %xb: tensor<16x2x64xbf16>,
                        %ids: tensor<16x2xi32>, %lse: tensor<2x4x16xf32>,
                        %m: tensor<64x64xbf16>, %mf: tensor<64x64xf32>) {
  // CHECK: sharc.fill {value = 1.000000e+00 : f64} : tensor<f32>
  %one = sharc.fill {value = 1.0 : f64} : tensor<f32>
  // CHECK: sharc.embedding_grad
  %dt = sharc.embedding_grad %x, %ids
      : (tensor<16x2x64xf32>, tensor<16x2xi32>) -> tensor<128x64xf32>
  // CHECK: sharc.rms_norm_grad
  %dx, %dw = sharc.rms_norm_grad %x, %w, %x {eps = 1.0e-6 : f64}
      : (tensor<16x2x64xf32>, tensor<64xf32>, tensor<16x2x64xf32>)
      -> (tensor<16x2x64xf32>, tensor<64xf32>)
  // CHECK: sharc.rms_norm_grad_add
  %dxa, %dwa = sharc.rms_norm_grad_add %x, %w, %x, %dx {eps = 1.0e-6 : f64}
      : (tensor<16x2x64xf32>, tensor<64xf32>, tensor<16x2x64xf32>,
         tensor<16x2x64xf32>) -> (tensor<16x2x64xf32>, tensor<64xf32>)
  // CHECK: sharc.matmul_dgrad
  %dxb = sharc.matmul_dgrad %xb, %wq
      : (tensor<16x2x64xbf16>, tensor<64x64xbf16>) -> tensor<16x2x64xbf16>
  // CHECK: sharc.matmul_wgrad
  %dwq = sharc.matmul_wgrad %xb, %xb
      : (tensor<16x2x64xbf16>, tensor<16x2x64xbf16>) -> tensor<64x64xbf16>
  // CHECK: sharc.rope_grad
  %dr = sharc.rope_grad %x {head_dim = 16 : i64, theta = 1.0e6 : f64}
      : (tensor<16x2x64xf32>) -> tensor<16x2x64xf32>
  // CHECK: sharc.attention_grad
  %dq, %dk, %dv = sharc.attention_grad %x, %x, %x, %x, %lse, %x
      {head_dim = 16 : i64}
      : (tensor<16x2x64xf32>, tensor<16x2x64xf32>, tensor<16x2x64xf32>,
         tensor<16x2x64xf32>, tensor<2x4x16xf32>, tensor<16x2x64xf32>)
      -> (tensor<16x2x64xf32>, tensor<16x2x64xf32>, tensor<16x2x64xf32>)
  // CHECK: sharc.swiglu_grad
  %dg, %du = sharc.swiglu_grad %x, %x, %x
      : (tensor<16x2x64xf32>, tensor<16x2x64xf32>, tensor<16x2x64xf32>)
      -> (tensor<16x2x64xf32>, tensor<16x2x64xf32>)
  // CHECK: sharc.cross_entropy_grad
  %dl = sharc.cross_entropy_grad %x, %ids, %one {valid_vocab = 64 : i64}
      : (tensor<16x2x64xf32>, tensor<16x2xi32>, tensor<f32>)
      -> tensor<16x2x64xf32>
  // CHECK: sharc.adamw
  %p, %m1, %v1 = sharc.adamw %wq, %dwq, %m, %m
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>,
         tensor<64x64xbf16>)
      -> (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>)
  // CHECK: %[[S:.*]] = sharc.sum_squares %{{.*}}, %{{.*}} {replicas = array<i64: 1, 2>}
  %s = sharc.sum_squares %wq, %dwq {replicas = array<i64: 1, 2>}
      : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<f32>
  // CHECK: sharc.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[S]]
  // CHECK-SAME: max_norm = 1.000000e+00
  %p2, %m2, %v2 = sharc.adamw %wq, %dwq, %m, %m, %s
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64, max_norm = 1.0 : f64}
      : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>,
         tensor<64x64xbf16>, tensor<f32>)
      -> (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xbf16>)
  // CHECK: sharc.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} master %{{.*}}, %[[S]]
  %p3, %m3, %v3, %w3 = sharc.adamw %wq, %dwq, %mf, %mf master %mf, %s
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64, max_norm = 1.0 : f64}
      : (tensor<64x64xbf16>, tensor<64x64xbf16>, tensor<64x64xf32>,
         tensor<64x64xf32>, tensor<64x64xf32>, tensor<f32>)
      -> (tensor<64x64xbf16>, tensor<64x64xf32>, tensor<64x64xf32>,
          tensor<64x64xf32>)
  return
}

// CHECK-LABEL: func.func @concatenation_ops
func.func @concatenation_ops(%wq: tensor<64x64xf32>, %wk: tensor<32x64xf32>,
                             %y: tensor<16x2x96xf32>) {
  // CHECK: sharc.concat %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<96x64xf32>
  %w = sharc.concat %wq, %wk {dim = 0 : i64}
      : (tensor<64x64xf32>, tensor<32x64xf32>) -> tensor<96x64xf32>
  // CHECK: sharc.split %{{.*}} {dim = 2 : i64} : (tensor<16x2x96xf32>) -> (tensor<16x2x64xf32>, tensor<16x2x32xf32>)
  %q, %k = sharc.split %y {dim = 2 : i64}
      : (tensor<16x2x96xf32>) -> (tensor<16x2x64xf32>, tensor<16x2x32xf32>)
  return
}
