// RUN: sharc-opt %s --split-input-file --sharc-verify-placements --verify-diagnostics

// A replicated parameter whose partial gradient was never all-reduced.
func.func @unsynchronised_gradient(
    %w: tensor<8xf32, #sharc.place<tp = R>> {sharc.param = "layers.0.self_attn.q_norm.weight"},
    %g: tensor<8xf32, #sharc.place<tp = P>>)
    -> (tensor<8xf32, #sharc.place<tp = P>> {sharc.output = "grad:layers.0.self_attn.q_norm.weight"}) {
  // expected-error @+1 {{'grad:layers.0.self_attn.q_norm.weight' has placement P on tp but parameter 'layers.0.self_attn.q_norm.weight' is R}}
  return %g : tensor<8xf32, #sharc.place<tp = P>>
}

// -----

// A value placed over an axis the mesh does not have.
module attributes {sharc.mesh = #sharc.mesh<dp = 2, tp = 2>} {
  func.func @axis_not_in_mesh() {
    // expected-error @+1 {{'sharc.fill' op result 0 is placed over axis 'cp', which the mesh lacks}}
    %y = sharc.fill {value = 1.0 : f64} : tensor<8xf32, #sharc.place<cp = R>>
    return
  }
}

// -----

// expected-error @+1 {{argument 0 is placed over axis 'pp', which the mesh lacks}}
func.func @argument_axis_not_in_mesh(%x: tensor<8xf32, #sharc.place<pp = R>>) {
  return
}
