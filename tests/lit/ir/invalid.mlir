// RUN: sharc-opt %s --split-input-file --verify-diagnostics
// One case per verifier message of the sharc ops.

func.func @embedding_result_shape(%t: tensor<128x64xf32>, %ids: tensor<16x2xi32>) {
  // expected-error @+1 {{result must be [S, B, H] of the table's element type}}
  %h = sharc.embedding %t, %ids
      : (tensor<128x64xf32>, tensor<16x2xi32>) -> tensor<16x2x32xf32>
  return
}

// -----

func.func @rms_norm_group(%x: tensor<16x2x64xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{last dimension 64 is not a multiple of the weight size 24}}
  %y = sharc.rms_norm %x, %w {eps = 1.0e-6 : f64}
      : (tensor<16x2x64xf32>, tensor<24xf32>) -> tensor<16x2x64xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<16x2x64xf32>, %w: tensor<64xf32>) {
  // expected-error @+1 {{eps must be positive}}
  %y = sharc.rms_norm %x, %w {eps = 0.0 : f64}
      : (tensor<16x2x64xf32>, tensor<64xf32>) -> tensor<16x2x64xf32>
  return
}

// -----

func.func @matmul_contraction(%x: tensor<16x2x64xf32>, %w: tensor<32x48xf32>) {
  // expected-error @+1 {{contraction mismatch: x has 64 columns, weight [out, in] has 48 inputs}}
  %y = sharc.matmul %x, %w
      : (tensor<16x2x64xf32>, tensor<32x48xf32>) -> tensor<16x2x32xf32>
  return
}

// -----

func.func @matmul_result(%x: tensor<16x2x64xf32>, %w: tensor<32x64xf32>) {
  // expected-error @+1 {{result shape must be [..., 32]}}
  %y = sharc.matmul %x, %w
      : (tensor<16x2x64xf32>, tensor<32x64xf32>) -> tensor<16x2x64xf32>
  return
}

// -----

func.func @rope_odd_head_dim(%x: tensor<16x2x63xf32>) {
  // expected-error @+1 {{head_dim must be even, got 7}}
  %y = sharc.rope %x {head_dim = 7 : i64, theta = 1.0e6 : f64}
      : (tensor<16x2x63xf32>) -> tensor<16x2x63xf32>
  return
}

// -----

func.func @rope_head_multiple(%x: tensor<16x2x60xf32>) {
  // expected-error @+1 {{x width 60 is not a multiple of head_dim 16}}
  %y = sharc.rope %x {head_dim = 16 : i64, theta = 1.0e6 : f64}
      : (tensor<16x2x60xf32>) -> tensor<16x2x60xf32>
  return
}

// -----

func.func @attention_gqa(%q: tensor<16x2x48xf32>, %k: tensor<16x2x32xf32>) {
  // expected-error @+1 {{query heads (3) must be a multiple of KV heads (2)}}
  %o, %lse = sharc.attention %q, %k, %k {head_dim = 16 : i64}
      : (tensor<16x2x48xf32>, tensor<16x2x32xf32>, tensor<16x2x32xf32>)
      -> (tensor<16x2x48xf32>, tensor<2x3x16xf32>)
  return
}

// -----

func.func @attention_lse(%q: tensor<16x2x64xf32>, %k: tensor<16x2x32xf32>) {
  // expected-error @+1 {{lse must be [B, Hq, S] = [2, 4, 16]}}
  %o, %lse = sharc.attention %q, %k, %k {head_dim = 16 : i64}
      : (tensor<16x2x64xf32>, tensor<16x2x32xf32>, tensor<16x2x32xf32>)
      -> (tensor<16x2x64xf32>, tensor<2x16x4xf32>)
  return
}

// -----

func.func @attention_sequence(%q: tensor<16x2x64xf32>, %k: tensor<8x2x32xf32>) {
  // expected-error @+1 {{q and k must share [S, B]}}
  %o, %lse = sharc.attention %q, %k, %k {head_dim = 16 : i64}
      : (tensor<16x2x64xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>)
      -> (tensor<16x2x64xf32>, tensor<2x4x16xf32>)
  return
}

// -----

func.func @add_types(%a: tensor<4x2x8xf32>, %b: tensor<4x2x8xbf16>) {
  // expected-error @+1 {{failed to verify that all of {a, b, y} have same type}}
  %y = sharc.add %a, %b
      : (tensor<4x2x8xf32>, tensor<4x2x8xbf16>) -> tensor<4x2x8xf32>
  return
}

// -----

func.func @swiglu_types(%g: tensor<4x2x8xf32>, %u: tensor<4x2x9xf32>) {
  // expected-error @+1 {{failed to verify that all of {gate, up, y} have same type}}
  %y = sharc.swiglu %g, %u
      : (tensor<4x2x8xf32>, tensor<4x2x9xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<16x2x128xf32>, %ids: tensor<16x4xi32>) {
  // expected-error @+1 {{expects logits [S, B, V] and labels [S, B]}}
  %loss = sharc.cross_entropy %l, %ids {valid_vocab = 128 : i64}
      : (tensor<16x2x128xf32>, tensor<16x4xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_valid_vocab(%l: tensor<16x2x128xf32>, %ids: tensor<16x2xi32>) {
  // expected-error @+1 {{valid_vocab 129 must be in [1, 128]}}
  %loss = sharc.cross_entropy %l, %ids {valid_vocab = 129 : i64}
      : (tensor<16x2x128xf32>, tensor<16x2xi32>) -> tensor<f32>
  return
}

// -----

func.func @matmul_dgrad_shapes(%dy: tensor<4x2x8xf32>, %w: tensor<8x6xf32>) {
  // expected-error @+1 {{expects dy [..., N], w [N, K] and dx [..., K]}}
  %dx = sharc.matmul_dgrad %dy, %w
      : (tensor<4x2x8xf32>, tensor<8x6xf32>) -> tensor<4x2x8xf32>
  return
}

// -----

func.func @matmul_wgrad_shapes(%dy: tensor<4x2x8xf32>, %x: tensor<4x2x6xf32>) {
  // expected-error @+1 {{expects dy [..., N], x [..., K] and dw [N, K]}}
  %dw = sharc.matmul_wgrad %dy, %x
      : (tensor<4x2x8xf32>, tensor<4x2x6xf32>) -> tensor<6x8xf32>
  return
}

// -----

func.func @adamw_betas(%p: tensor<8xf32>) {
  // expected-error @+1 {{betas must be in [0, 1), got 1.000000e+00 and 9.990000e-01}}
  %a, %b, %c = sharc.adamw %p, %p, %p, %p
      {lr = 1.0e-3 : f64, beta1 = 1.0 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
      -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adamw_norm_without_max_norm(%p: tensor<8xf32>, %n: tensor<f32>) {
  // expected-error @+1 {{grad_norm_sq and max_norm come together}}
  %a, %b, %c = sharc.adamw %p, %p, %p, %p, %n
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>,
         tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adamw_max_norm_zero(%p: tensor<8xf32>, %n: tensor<f32>) {
  // expected-error @+1 {{max_norm must be positive, got 0.000000e+00}}
  %a, %b, %c = sharc.adamw %p, %p, %p, %p, %n
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64, max_norm = 0.0 : f64}
      : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>,
         tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @sum_squares_replicas_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{needs one replicas entry per operand, got 2 for 1}}
  %s = sharc.sum_squares %x {replicas = array<i64: 1, 2>}
      : (tensor<8xf32>) -> tensor<f32>
  return
}

// -----

func.func @sum_squares_replicas_zero(%x: tensor<8xf32>) {
  // expected-error @+1 {{replicas must be >= 1, got 0}}
  %s = sharc.sum_squares %x {replicas = array<i64: 0>}
      : (tensor<8xf32>) -> tensor<f32>
  return
}

// -----

func.func @sum_squares_nothing() {
  // expected-error @+1 {{needs at least one operand}}
  %s = sharc.sum_squares {replicas = array<i64>} : () -> tensor<f32>
  return
}

// -----

func.func @adamw_moments(%p: tensor<8xf32>, %m: tensor<4xf32>) {
  // expected-error @+1 {{moments must match the parameter's shape and each other}}
  %a, %b, %c = sharc.adamw %p, %p, %m, %m
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : (tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>)
      -> (tensor<8xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// Placement rules are part of type inference: a column-parallel matmul fed
// an invariant input (Megatron's f missing) has no result type.
func.func @column_without_f(
    %x: tensor<8x2x8xf32>,
    %w: tensor<4x8xf32, #sharc.place<tp = S(0)>>) {
  // expected-error @+2 {{no placement rule for input I and weight S(0) on tp}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sharc.matmul %x, %w
      : (tensor<8x2x8xf32>, tensor<4x8xf32, #sharc.place<tp = S(0)>>)
      -> tensor<8x2x4xf32, #sharc.place<tp = S(2)>>
  return
}

// -----

// A row-parallel matmul whose partial result is labelled as invariant.
func.func @row_result_not_partial(
    %x: tensor<8x2x4xf32, #sharc.place<tp = S(2)>>,
    %w: tensor<8x4xf32, #sharc.place<tp = S(1)>>) {
  // expected-error @+2 {{inferred type(s) 'tensor<8x2x8xf32, #sharc.place<tp = P>>' are incompatible with return type(s) of operation 'tensor<8x2x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = sharc.matmul %x, %w
      : (tensor<8x2x4xf32, #sharc.place<tp = S(2)>>,
         tensor<8x4xf32, #sharc.place<tp = S(1)>>)
      -> tensor<8x2x8xf32>
  return
}

// -----

func.func @concat_dim(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 2 out of range for rank 2}}
  %w = sharc.concat %a, %a {dim = 2 : i64}
      : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @concat_piece(%a: tensor<4x8xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{piece 1 type 'tensor<4x4xf32>' must match 'tensor<8x8xf32>' but in dim 0}}
  %w = sharc.concat %a, %b {dim = 0 : i64}
      : (tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @split_extent(%y: tensor<2x12xf32>) {
  // expected-error @+1 {{pieces sum to 8 along dim 1, the whole has 12}}
  %a, %b = sharc.split %y {dim = 1 : i64}
      : (tensor<2x12xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @adamw_master_without_new_master(%p: tensor<8xbf16>,
                                           %m: tensor<8xf32>) {
  // expected-error @+1 {{a master operand and a new_master result come together}}
  %a, %b, %c = sharc.adamw %p, %p, %m, %m master %m
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>,
         tensor<8xf32>) -> (tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adamw_master_bf16(%p: tensor<8xbf16>, %m: tensor<8xf32>) {
  // expected-error @+1 {{master must be f32 of the parameter's shape, got 'tensor<8xbf16>'}}
  %a, %b, %c, %d = sharc.adamw %p, %p, %m, %m master %p
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>,
         tensor<8xbf16>)
      -> (tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>)
  return
}

// -----

func.func @adamw_master_bf16_moments(%p: tensor<8xbf16>, %w: tensor<8xf32>) {
  // expected-error @+1 {{moments must be f32 with a master, got 'tensor<8xbf16>'}}
  %a, %b, %c, %d = sharc.adamw %p, %p, %p, %p master %w
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>,
         tensor<8xf32>)
      -> (tensor<8xbf16>, tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>)
  return
}

// -----

func.func @adamw_new_master_type(%p: tensor<8xbf16>, %w: tensor<8xf32>) {
  // expected-error @+1 {{the updated master must keep the master's type}}
  %a, %b, %c, %d = sharc.adamw %p, %p, %w, %w master %w
      {lr = 1.0e-3 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64,
       eps = 1.0e-8 : f64, weight_decay = 0.01 : f64}
      : (tensor<8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>,
         tensor<8xf32>)
      -> (tensor<8xbf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>)
  return
}

// -----

func.func @norm_grad_addend_type(%x: tensor<4x2x8xf32>, %w: tensor<8xf32>,
                                 %r: tensor<4x2x8xbf16>) {
  // expected-error @+1 {{expects the addend to have dx's type}}
  %dx, %dw = sharc.rms_norm_grad_add %x, %w, %x, %r {eps = 1.0e-6 : f64}
      : (tensor<4x2x8xf32>, tensor<8xf32>, tensor<4x2x8xf32>,
         tensor<4x2x8xbf16>) -> (tensor<4x2x8xf32>, tensor<8xf32>)
  return
}
