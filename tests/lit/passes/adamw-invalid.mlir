// RUN: sharc-opt %s --sharc-adamw --verify-diagnostics

// A gradient whose parameter does not exist is an error.
module {
  // expected-error @+1 {{gradient result 'grad:nope' names no parameter argument}}
  func.func @unknown_parameter(%g: tensor<4xf32>)
      -> (tensor<4xf32> {sharc.output = "grad:nope"}) {
    return %g : tensor<4xf32>
  }
}
