// RUN: sharc-opt %s --sharc-adamw | FileCheck %s --check-prefix=EACH
// RUN: sharc-opt %s --sharc-adamw="group-bytes=32" | FileCheck %s --check-prefix=GROUP
// RUN: sharc-opt %s --sharc-adamw="group-bytes=100000" | FileCheck %s --check-prefix=EIGHTH

// Without group-bytes each update follows the op that makes its gradient
// final. With it, the updates gather (in block order) until their
// gradients reach that many bytes, or an eighth of all the gradients'
// (1136 here: 142) if less, and move down to the last of the run. At 32
// bytes: a (16) and b (16) make a run, then c (64), e (1024) and d (16)
// one each. At 100000 the eighth bounds it: a, b, c and e (1120) run
// together after e's gradient, then d.
// EACH-LABEL: func.func @gather_updates
// EACH: %[[GA:.*]] = sharc.add %arg5, %arg5
// EACH-NEXT: sharc.adamw %arg0, %[[GA]]
// EACH-NEXT: %[[GB:.*]] = sharc.add %arg6, %arg6
// EACH-NEXT: sharc.adamw %arg1, %[[GB]]
// EACH-NEXT: %[[GC:.*]] = sharc.add %arg7, %arg7
// EACH-NEXT: sharc.adamw %arg2, %[[GC]]
// EACH-NEXT: %[[GE:.*]] = sharc.add %arg9, %arg9
// EACH-NEXT: sharc.adamw %arg4, %[[GE]]
// EACH-NEXT: %[[GD:.*]] = sharc.add %arg8, %arg8
// EACH-NEXT: sharc.adamw %arg3, %[[GD]]
// GROUP-LABEL: func.func @gather_updates
// GROUP: %[[GA:.*]] = sharc.add %arg5, %arg5
// GROUP-NEXT: %[[GB:.*]] = sharc.add %arg6, %arg6
// GROUP-NEXT: sharc.adamw %arg0, %[[GA]]
// GROUP-NEXT: sharc.adamw %arg1, %[[GB]]
// GROUP-NEXT: %[[GC:.*]] = sharc.add %arg7, %arg7
// GROUP-NEXT: sharc.adamw %arg2, %[[GC]]
// GROUP-NEXT: %[[GE:.*]] = sharc.add %arg9, %arg9
// GROUP-NEXT: sharc.adamw %arg4, %[[GE]]
// GROUP-NEXT: %[[GD:.*]] = sharc.add %arg8, %arg8
// GROUP-NEXT: sharc.adamw %arg3, %[[GD]]
// EIGHTH-LABEL: func.func @gather_updates
// EIGHTH: %[[GE:.*]] = sharc.add %arg9, %arg9
// EIGHTH-NEXT: sharc.adamw %arg0,
// EIGHTH-NEXT: sharc.adamw %arg1,
// EIGHTH-NEXT: sharc.adamw %arg2,
// EIGHTH-NEXT: sharc.adamw %arg4, %[[GE]]
// EIGHTH-NEXT: %[[GD:.*]] = sharc.add %arg8, %arg8
// EIGHTH-NEXT: sharc.adamw %arg3, %[[GD]]
// EIGHTH-NEXT: return
func.func @gather_updates(
    %a: tensor<4xf32> {sharc.param = "a"},
    %b: tensor<4xf32> {sharc.param = "b"},
    %c: tensor<16xf32> {sharc.param = "c"},
    %d: tensor<4xf32> {sharc.param = "d"},
    %e: tensor<256xf32> {sharc.param = "e"},
    %xa: tensor<4xf32>, %xb: tensor<4xf32>, %xc: tensor<16xf32>,
    %xd: tensor<4xf32>, %xe: tensor<256xf32>, %loss: tensor<f32>)
    -> (tensor<f32> {sharc.output = "loss"},
        tensor<4xf32> {sharc.output = "grad:a"},
        tensor<4xf32> {sharc.output = "grad:b"},
        tensor<16xf32> {sharc.output = "grad:c"},
        tensor<4xf32> {sharc.output = "grad:d"},
        tensor<256xf32> {sharc.output = "grad:e"}) {
  %ga = sharc.add %xa, %xa : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gb = sharc.add %xb, %xb : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gc = sharc.add %xc, %xc : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %ge = sharc.add %xe, %xe
      : (tensor<256xf32>, tensor<256xf32>) -> tensor<256xf32>
  %gd = sharc.add %xd, %xd : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %loss, %ga, %gb, %gc, %gd, %ge
      : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<16xf32>,
        tensor<4xf32>, tensor<256xf32>
}
