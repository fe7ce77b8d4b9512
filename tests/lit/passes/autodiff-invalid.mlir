// RUN: sharc-opt %s --sharc-autodiff --verify-diagnostics

// A step that already returns gradients is refused: differentiating it
// again would return every gradient twice, the second set of the backward.
module {
  // expected-error @+1 {{is already differentiated: result 1 is 'grad:w'; run sharc-autodiff once}}
  func.func @differentiated_twice(%w: tensor<4xf32> {sharc.param = "w"},
      %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          tensor<4xf32> {sharc.output = "grad:w"}) {
    return %loss, %w : tensor<f32>, tensor<4xf32>
  }
}
