// RUN: sharc-opt %s --sharc-adamw | FileCheck %s

// Each gradient result becomes an adamw update with two new moment
// arguments; the updated tensors are returned with the argument they
// overwrite, and the gradient results are gone. Hyperparameters come from
// the module's sharc.optimizer dictionary.
// CHECK-LABEL: func.func @update_every_parameter
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x2xbf16> {sharc.param = "w"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<4x2xbf16> {sharc.state = "m:w"}
// CHECK-SAME: %[[V:[^:]*]]: tensor<4x2xbf16> {sharc.state = "v:w"}
// CHECK-SAME: -> (tensor<f32> {sharc.output = "loss"}, tensor<4x2xbf16> {sharc.output = "param:w", sharc.update_of = 0 : i64}, tensor<4x2xbf16> {sharc.output = "m:w", sharc.update_of = 3 : i64}, tensor<4x2xbf16> {sharc.output = "v:w", sharc.update_of = 4 : i64})
// CHECK: %[[P:.*]], %[[M2:.*]], %[[V2:.*]] = sharc.adamw %[[W]], %[[G:[^,]*]], %[[M]], %[[V]]
// CHECK-SAME: lr = 1.000000e-03
// CHECK-SAME: weight_decay = 1.000000e-01
// CHECK: return %{{[^,]*}}, %[[P]], %[[M2]], %[[V2]]
module attributes {sharc.optimizer = {lr = 1.0e-3 : f64,
                                      weight_decay = 0.1 : f64}} {
  func.func @update_every_parameter(
      %w: tensor<4x2xbf16> {sharc.param = "w"},
      %g: tensor<4x2xbf16>, %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          tensor<4x2xbf16> {sharc.output = "grad:w"}) {
    return %loss, %g : tensor<f32>, tensor<4x2xbf16>
  }
}

