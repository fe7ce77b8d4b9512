// RUN: sharc-opt %s --split-input-file --sharc-adamw --verify-diagnostics

// A gradient whose parameter does not exist is an error.
module {
  // expected-error @+1 {{gradient result 'grad:nope' names no parameter argument}}
  func.func @unknown_parameter(%g: tensor<4xf32>)
      -> (tensor<4xf32> {sharc.output = "grad:nope"}) {
    return %g : tensor<4xf32>
  }
}

// -----

// A step that already has its optimizer (sharc-adamw run before, with the
// gradient kept) is refused: a second update per step would be silent.
module {
  // expected-error @+1 {{already has its optimizer: argument 2 is state 'm:w'; run sharc-adamw once}}
  func.func @optimizer_added_twice(%w: tensor<4xf32> {sharc.param = "w"},
      %g: tensor<4xf32>, %m: tensor<4xf32> {sharc.state = "m:w"})
      -> (tensor<4xf32> {sharc.output = "grad:w"}) {
    return %g : tensor<4xf32>
  }
}

// -----

// Clipping needs final gradients: one still partial over an axis would be
// counted as the rank's part, not the sum.
module attributes {sharc.mesh = #sharc.mesh<dp = 2>,
                   sharc.optimizer = {grad_clip = 1.0 : f64}} {
  func.func @partial_gradient_clipped(
      %w: tensor<4xf32, #sharc.place<dp = R>> {sharc.param = "w"},
      // expected-error @+1 {{a gradient partial on dp cannot enter the global norm; it must be summed first}}
      %g: tensor<4xf32, #sharc.place<dp = P>>)
      -> (tensor<4xf32, #sharc.place<dp = P>> {sharc.output = "grad:w"}) {
    return %g : tensor<4xf32, #sharc.place<dp = P>>
  }
}
