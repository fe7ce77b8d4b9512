// RUN: sharc-opt %s --sharc-adamw | FileCheck %s --check-prefix=EACH
// RUN: sharc-opt %s --sharc-adamw="group-bytes=32" | FileCheck %s --check-prefix=GROUP
// RUN: sharc-opt %s --sharc-adamw="group-bytes=1000" | FileCheck %s --check-prefix=ONE

// Without group-bytes each update follows the op that makes its gradient
// final. With it, the updates gather (in block order) until their
// gradients reach that many bytes, and move down to the last of the run:
// at 32 bytes a (16) and b (16) make one run, c (64) another, d (16) the
// last; at 1000 all four run together after d's gradient.
// EACH-LABEL: func.func @gather_updates
// EACH: %[[GA:.*]] = sharc.add %arg4, %arg4
// EACH-NEXT: sharc.adamw %arg0, %[[GA]]
// EACH-NEXT: %[[GB:.*]] = sharc.add %arg5, %arg5
// EACH-NEXT: sharc.adamw %arg1, %[[GB]]
// EACH-NEXT: %[[GC:.*]] = sharc.add %arg6, %arg6
// EACH-NEXT: sharc.adamw %arg2, %[[GC]]
// EACH-NEXT: %[[GD:.*]] = sharc.add %arg7, %arg7
// EACH-NEXT: sharc.adamw %arg3, %[[GD]]
// GROUP-LABEL: func.func @gather_updates
// GROUP: %[[GA:.*]] = sharc.add %arg4, %arg4
// GROUP-NEXT: %[[GB:.*]] = sharc.add %arg5, %arg5
// GROUP-NEXT: sharc.adamw %arg0, %[[GA]]
// GROUP-NEXT: sharc.adamw %arg1, %[[GB]]
// GROUP-NEXT: %[[GC:.*]] = sharc.add %arg6, %arg6
// GROUP-NEXT: sharc.adamw %arg2, %[[GC]]
// GROUP-NEXT: %[[GD:.*]] = sharc.add %arg7, %arg7
// GROUP-NEXT: sharc.adamw %arg3, %[[GD]]
// ONE-LABEL: func.func @gather_updates
// ONE: %[[GD:.*]] = sharc.add %arg7, %arg7
// ONE-NEXT: sharc.adamw %arg0,
// ONE-NEXT: sharc.adamw %arg1,
// ONE-NEXT: sharc.adamw %arg2,
// ONE-NEXT: sharc.adamw %arg3, %[[GD]]
// ONE-NEXT: return
func.func @gather_updates(
    %a: tensor<4xf32> {sharc.param = "a"},
    %b: tensor<4xf32> {sharc.param = "b"},
    %c: tensor<16xf32> {sharc.param = "c"},
    %d: tensor<4xf32> {sharc.param = "d"},
    %xa: tensor<4xf32>, %xb: tensor<4xf32>, %xc: tensor<16xf32>,
    %xd: tensor<4xf32>, %loss: tensor<f32>)
    -> (tensor<f32> {sharc.output = "loss"},
        tensor<4xf32> {sharc.output = "grad:a"},
        tensor<4xf32> {sharc.output = "grad:b"},
        tensor<16xf32> {sharc.output = "grad:c"},
        tensor<4xf32> {sharc.output = "grad:d"}) {
  %ga = sharc.add %xa, %xa : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gb = sharc.add %xb, %xb : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gc = sharc.add %xc, %xc : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %gd = sharc.add %xd, %xd : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %loss, %ga, %gb, %gc, %gd
      : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<16xf32>, tensor<4xf32>
}
