// RUN: sharc-opt %s --split-input-file --sharc-verify-placements --verify-diagnostics

// A replicated parameter whose partial gradient was never all-reduced.
func.func @unsynchronised_gradient(
    %w: tensor<8xf32, #sharc.place<tp = R>> {sharc.param = "layers.0.self_attn.q_norm.weight"},
    %g: tensor<8xf32, #sharc.place<tp = P>>)
    -> (tensor<8xf32, #sharc.place<tp = P>> {sharc.output = "grad:layers.0.self_attn.q_norm.weight"}) {
  // expected-error @+1 {{'grad:layers.0.self_attn.q_norm.weight' has placement P on tp but parameter 'layers.0.self_attn.q_norm.weight' is R}}
  return %g : tensor<8xf32, #sharc.place<tp = P>>
}
