// RUN: sharc-opt %s --split-input-file --sharc-adamw | FileCheck %s

// With grad_clip every update waits for the squared global norm of all
// the gradients, reads it, and carries max_norm; the norm is returned as
// the output grad_norm_sq. On one rank nothing is replicated and no
// collective is needed.
// CHECK-LABEL: func.func @clip_on_one_rank
// CHECK-SAME: tensor<f32> {sharc.output = "grad_norm_sq"}
// CHECK: %[[S:.*]] = sharc.sum_squares %[[GW:[^,]*]], %[[GN:[^ ]*]] {replicas = array<i64: 1, 1>}
// CHECK-NOT: sharc.all_reduce
// CHECK: sharc.adamw %{{[^,]*}}, %[[GW]], %{{[^,]*}}, %{{[^,]*}}, %[[S]]
// CHECK-SAME: max_norm = 1.000000e+00
// CHECK: sharc.adamw %{{[^,]*}}, %[[GN]], %{{[^,]*}}, %{{[^,]*}}, %[[S]]
// CHECK: return {{.*}}, %[[S]] :
module attributes {sharc.optimizer = {grad_clip = 1.0 : f64}} {
  func.func @clip_on_one_rank(
      %w: tensor<4x2xf32> {sharc.param = "w"},
      %n: tensor<2xf32> {sharc.param = "n"},
      %gw: tensor<4x2xf32>, %gn: tensor<2xf32>)
      -> (tensor<4x2xf32> {sharc.output = "grad:w"},
          tensor<2xf32> {sharc.output = "grad:n"}) {
    return %gw, %gn : tensor<4x2xf32>, tensor<2xf32>
  }
}

// -----

// On dp = 2 x tp = 2 a weight sharded over tp is held alike by the two dp
// ranks (counts 1/2), a norm weight replicated over both by all four
// (1/4); one all_reduce over dp and tp adds the ranks' shares.
// CHECK-LABEL: func.func @clip_on_dp_and_tp
// CHECK: %[[S:.*]] = sharc.sum_squares %{{[^,]*}}, %{{[^ ]*}} {replicas = array<i64: 2, 4>}
// CHECK-SAME: -> tensor<f32, #sharc.place<dp = P, tp = P>>
// CHECK: %[[N:.*]] = sharc.all_reduce %[[S]] {axis = "dp,tp"}
// CHECK-SAME: -> tensor<f32>
// CHECK: sharc.adamw %{{[^,]*}}, %arg2, %{{[^,]*}}, %{{[^,]*}}, %[[N]]
// CHECK: sharc.adamw %{{[^,]*}}, %arg3, %{{[^,]*}}, %{{[^,]*}}, %[[N]]
module attributes {sharc.mesh = #sharc.mesh<dp = 2, tp = 2>,
                   sharc.optimizer = {grad_clip = 0.5 : f64}} {
  func.func @clip_on_dp_and_tp(
      %w: tensor<2x2xf32, #sharc.place<dp = R, tp = S(0)>> {sharc.param = "w"},
      %n: tensor<2xf32, #sharc.place<dp = R, tp = R>> {sharc.param = "n"},
      %gw: tensor<2x2xf32, #sharc.place<dp = R, tp = S(0)>>,
      %gn: tensor<2xf32, #sharc.place<dp = R, tp = R>>)
      -> (tensor<2x2xf32, #sharc.place<dp = R, tp = S(0)>>
              {sharc.output = "grad:w"},
          tensor<2xf32, #sharc.place<dp = R, tp = R>>
              {sharc.output = "grad:n"}) {
    return %gw, %gn : tensor<2x2xf32, #sharc.place<dp = R, tp = S(0)>>,
                      tensor<2xf32, #sharc.place<dp = R, tp = R>>
  }
}
