// RUN: sharc-opt %s --sharc-adamw | FileCheck %s

// bf16-mixed (master_weights): each bf16 parameter gains f32 moments and an
// f32 master after them; the update reads the master and returns it with
// the argument it overwrites.
// CHECK-LABEL: func.func @master_weights
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x2xbf16> {sharc.param = "w"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<4x2xf32> {sharc.state = "m:w"}
// CHECK-SAME: %[[V:[^:]*]]: tensor<4x2xf32> {sharc.state = "v:w"}
// CHECK-SAME: %[[MW:[^:]*]]: tensor<4x2xf32> {sharc.state = "master:w"}
// CHECK-SAME: tensor<4x2xf32> {sharc.output = "master:w", sharc.update_of = 5 : i64}
// CHECK: %[[P:.*]], %[[M2:.*]], %[[V2:.*]], %[[MW2:.*]] = sharc.adamw %[[W]], %{{[^,]*}}, %[[M]], %[[V]] master %[[MW]]
// CHECK: return %{{[^,]*}}, %[[P]], %[[M2]], %[[V2]], %[[MW2]]
module attributes {sharc.optimizer = {lr = 1.0e-3 : f64,
                                      master_weights}} {
  func.func @master_weights(
      %w: tensor<4x2xbf16> {sharc.param = "w"},
      %g: tensor<4x2xbf16>, %loss: tensor<f32>)
      -> (tensor<f32> {sharc.output = "loss"},
          tensor<4x2xbf16> {sharc.output = "grad:w"}) {
    return %loss, %g : tensor<f32>, tensor<4x2xbf16>
  }
}
