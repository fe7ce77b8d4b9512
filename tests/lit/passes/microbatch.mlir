// RUN: sed 's/module attributes {sharc.model = {/module attributes {sharc.model = {num_microbatches = 2 : i64, /' \
// RUN:   %S/Inputs/block.mlir \
// RUN:   | sharc-opt --sharc-data-parallel=dp=2 --sharc-spmdize --sharc-autodiff \
// RUN:     --sharc-microbatch --sharc-verify-placements | FileCheck %s
// RUN: sed 's/module attributes {sharc.model = {/module attributes {sharc.model = {num_microbatches = 2 : i64, /' \
// RUN:   %S/Inputs/block.mlir \
// RUN:   | sharc-opt --sharc-autodiff --sharc-microbatch \
// RUN:   | FileCheck %s --check-prefix=DENSE
// RUN: sharc-opt %S/Inputs/block.mlir --sharc-autodiff --sharc-microbatch \
// RUN:   | FileCheck %s --check-prefix=ONE

// Two microbatches under dp=2: the program was built for one, so the token
// inputs take both side by side and are split; the forward and backward run
// once per piece, in order; gradients are summed and each dp sync runs
// once, on the sum. The valid labels are counted once, over the whole
// step's labels and all dp ranks; each piece's mean loss, and the seed of
// its backward, is weighted by the piece's count over that total, so the
// summed loss is the mean over the step's valid labels, summed over dp
// once.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[TOKENS:[^:]*]]: tensor<8x2xi32, #sharc.place<dp = S(1)>> {sharc.input = "tokens", sharc.placement = #sharc.place<dp = S(1)>}
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<8x2xi32, #sharc.place<dp = S(1)>> {sharc.input = "labels"
// CHECK: %[[N:.*]] = sharc.valid_count %[[LABELS]] {valid_vocab = 16 : i64} : (tensor<8x2xi32, #sharc.place<dp = S(1)>>) -> tensor<f32, #sharc.place<dp = P>>
// CHECK-NEXT: %[[TOTAL:.*]] = sharc.all_reduce %[[N]] {axis = "dp"} {{.*}} -> tensor<f32>
// CHECK-NEXT: %[[SEED:.*]] = sharc.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK: %[[T:.*]]:2 = sharc.split %[[TOKENS]] {dim = 1 : i64} : (tensor<8x2xi32, #sharc.place<dp = S(1)>>) -> (tensor<8x1xi32, #sharc.place<dp = S(1)>>, tensor<8x1xi32, #sharc.place<dp = S(1)>>)
// CHECK: %[[Y:.*]]:2 = sharc.split %[[LABELS]]
// CHECK: sharc.embedding %{{.*}}, %[[T]]#0
// CHECK: %[[L0:.*]] = sharc.cross_entropy %{{.*}}, %[[Y]]#0
// CHECK-NEXT: %[[S0:.*]] = sharc.count_scale %[[L0]], %[[Y]]#0, %[[TOTAL]]
// CHECK-NEXT: sharc.count_scale %[[SEED]], %[[Y]]#0, %[[TOTAL]]
// CHECK-NOT: sharc.all_reduce
// CHECK: sharc.embedding_grad
// CHECK-NOT: sharc.all_reduce
// CHECK: sharc.embedding %{{.*}}, %[[T]]#1
// Each sum is taken as soon as the second piece is final.
// CHECK: %[[L1:.*]] = sharc.cross_entropy %{{.*}}, %[[Y]]#1
// CHECK-NEXT: %[[S1:.*]] = sharc.count_scale %[[L1]], %[[Y]]#1, %[[TOTAL]]
// CHECK-NEXT: %[[LSUM:.*]] = sharc.add %[[S0]], %[[S1]] : (tensor<f32, #sharc.place<dp = P>>
// CHECK-NEXT: sharc.count_scale %[[SEED]], %[[Y]]#1, %[[TOTAL]]
// CHECK-NOT: sharc.all_reduce
// CHECK: %[[DE1:.*]] = sharc.embedding_grad
// CHECK-NEXT: sharc.add %{{.*}}, %[[DE1]] : (tensor<16x8xf32, #sharc.place<dp = P>>
// CHECK-NEXT: %[[LOSS:.*]] = sharc.all_reduce %[[LSUM]] {axis = "dp"}
// CHECK-COUNT-6: sharc.all_reduce {{.*}} {axis = "dp"}
// CHECK-NOT: sharc.all_reduce
// CHECK-NOT: sharc.scale
// CHECK: return %[[LOSS]]

// Two microbatches of the dense program: no rule weighed the loss, so the
// pass does, with the count of the whole step's labels.
// DENSE-LABEL: func.func @train_step
// DENSE-SAME: %[[LABELS:[^:]*]]: tensor<8x4xi32> {sharc.input = "labels"}
// DENSE: %[[TOTAL:.*]] = sharc.valid_count %[[LABELS]] {valid_vocab = 16 : i64}
// DENSE-NEXT: %[[SEED:.*]] = sharc.fill {value = 1.000000e+00 : f64}
// DENSE: %[[Y:.*]]:2 = sharc.split %[[LABELS]]
// DENSE: %[[L0:.*]] = sharc.cross_entropy %{{.*}}, %[[Y]]#0
// DENSE-NEXT: %[[S0:.*]] = sharc.count_scale %[[L0]], %[[Y]]#0, %[[TOTAL]]
// DENSE-NEXT: sharc.count_scale %[[SEED]], %[[Y]]#0, %[[TOTAL]]
// DENSE: %[[L1:.*]] = sharc.cross_entropy %{{.*}}, %[[Y]]#1
// DENSE-NEXT: %[[S1:.*]] = sharc.count_scale %[[L1]], %[[Y]]#1, %[[TOTAL]]
// DENSE-NEXT: %[[LOSS:.*]] = sharc.add %[[S0]], %[[S1]]
// DENSE-NOT: sharc.scale
// DENSE: return %[[LOSS]]

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
