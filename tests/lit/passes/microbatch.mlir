// RUN: sed 's/module attributes {sharc.model = {/module attributes {sharc.model = {num_microbatches = 2 : i64, /' \
// RUN:   %S/Inputs/block.mlir \
// RUN:   | sharc-opt --sharc-data-parallel=dp=2 --sharc-spmdize --sharc-autodiff \
// RUN:     --sharc-microbatch --sharc-verify-placements | FileCheck %s
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-autodiff --sharc-microbatch \
// RUN:   | FileCheck %s --check-prefix=ONE

// Two microbatches under dp=2: the program was built for one, so the token
// inputs take both side by side and are split; the forward and backward run
// once per piece, in order; each backward is seeded with 1/2; gradients are
// summed and each dp sync runs once, on the sum; the loss is the pieces'
// mean, summed over dp once.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[TOKENS:[^:]*]]: tensor<8x2xi32, #sharc.place<dp = S(1)>> {sharc.input = "tokens", sharc.placement = #sharc.place<dp = S(1)>}
// CHECK: %[[SEED:.*]] = sharc.fill {value = 5.000000e-01 : f64} : tensor<f32>
// CHECK: %[[T:.*]]:2 = sharc.split %[[TOKENS]] {dim = 1 : i64} : (tensor<8x2xi32, #sharc.place<dp = S(1)>>) -> (tensor<8x1xi32, #sharc.place<dp = S(1)>>, tensor<8x1xi32, #sharc.place<dp = S(1)>>)
// CHECK: sharc.embedding %{{.*}}, %[[T]]#0
// CHECK: %[[L0:.*]] = sharc.cross_entropy
// CHECK-NOT: sharc.all_reduce
// CHECK: sharc.embedding_grad
// CHECK-NOT: sharc.all_reduce
// CHECK: sharc.embedding %{{.*}}, %[[T]]#1
// Each sum is taken as soon as the second piece is final.
// CHECK: %[[L1:.*]] = sharc.cross_entropy
// CHECK-NEXT: %[[S1:.*]] = sharc.scale %[[L1]]
// CHECK-NEXT: %[[LSUM:.*]] = sharc.add %{{.*}}, %[[S1]] : (tensor<f32, #sharc.place<dp = P>>
// CHECK-NOT: sharc.all_reduce
// CHECK: %[[DE1:.*]] = sharc.embedding_grad
// CHECK-NEXT: sharc.add %{{.*}}, %[[DE1]] : (tensor<16x8xf32, #sharc.place<dp = P>>
// CHECK-NEXT: %[[MEAN:.*]] = sharc.scale %[[LSUM]] {factor = 5.000000e-01 : f64} : (tensor<f32, #sharc.place<dp = P>>)
// CHECK-NEXT: %[[LOSS:.*]] = sharc.all_reduce %[[MEAN]] {axis = "dp"}
// CHECK-COUNT-6: sharc.all_reduce {{.*}} {axis = "dp"}
// CHECK-NOT: sharc.all_reduce
// CHECK: return %[[LOSS]]

// One microbatch (no num_microbatches in the model sizes): nothing changes.
// ONE-LABEL: func.func @train_step
// ONE: sharc.fill {value = 1.000000e+00 : f64}
// ONE-NOT: sharc.split
// ONE-COUNT-1: sharc.cross_entropy

// RUN: sharc-opt %s --split-input-file --verify-diagnostics --sharc-microbatch
// A step that returns more than the loss and gradients (the logits of a
// validation plan) cannot be accumulated; the error points at where
// num_microbatches was written (here, the module).
// expected-error @+1 {{num_microbatches (2) > 1 returns only the loss and gradients, not 'logits'}}
module attributes {sharc.model = {num_microbatches = 2 : i64}} {
  func.func @logits_returned(
      %x: tensor<8x2x16xf32> {sharc.param = "x"},
      %labels: tensor<8x2xi32> {sharc.input = "labels"})
      -> (tensor<f32> {sharc.output = "loss"},
          tensor<8x2x16xf32> {sharc.output = "logits"}) {
    %loss = sharc.cross_entropy %x, %labels {valid_vocab = 16 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2xi32>) -> tensor<f32>
    return %loss, %x : tensor<f32>, tensor<8x2x16xf32>
  }
}
