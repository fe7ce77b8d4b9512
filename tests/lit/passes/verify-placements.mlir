// RUN: sharc-opt %s --split-input-file --sharc-verify-placements --verify-diagnostics

// A replicated parameter whose partial gradient was never all-reduced.
func.func @unsynchronised_gradient(
    %w: tensor<8xf32, #sharc.place<dp = I, tp = R>> {sharc.param = "layers.0.self_attn.q_norm.weight"},
    %g: tensor<8xf32, #sharc.place<dp = I, tp = P>>)
    -> (tensor<8xf32, #sharc.place<dp = I, tp = P>> {sharc.output = "grad:layers.0.self_attn.q_norm.weight"}) {
  // expected-error @+1 {{'grad:layers.0.self_attn.q_norm.weight' has placement P on tp but parameter 'layers.0.self_attn.q_norm.weight' is R}}
  return %g : tensor<8xf32, #sharc.place<dp = I, tp = P>>
}

// -----

// A column-parallel matmul fed an invariant input (Megatron's f missing).
func.func @column_without_f(
    %x: tensor<8x2x8xf32>,
    %w: tensor<4x8xf32, #sharc.place<dp = I, tp = S(0)>>) {
  // expected-error @+1 {{has no placement rule for input I and weight S(0) on tp}}
  %y = sharc.matmul %x, %w
      : (tensor<8x2x8xf32>, tensor<4x8xf32, #sharc.place<dp = I, tp = S(0)>>)
      -> tensor<8x2x4xf32, #sharc.place<dp = I, tp = S(2)>>
  return
}

// -----

// A row-parallel matmul whose partial result is labelled as invariant.
func.func @row_result_not_partial(
    %x: tensor<8x2x4xf32, #sharc.place<dp = I, tp = S(2)>>,
    %w: tensor<8x4xf32, #sharc.place<dp = I, tp = S(1)>>) {
  // expected-error @+1 {{result placement on tp must be P, got I}}
  %y = sharc.matmul %x, %w
      : (tensor<8x2x4xf32, #sharc.place<dp = I, tp = S(2)>>,
         tensor<8x4xf32, #sharc.place<dp = I, tp = S(1)>>)
      -> tensor<8x2x8xf32>
  return
}
