// RUN: sharc-opt %s --split-input-file --sharc-spmdize | FileCheck %s
// One case per op's sharding rule (ir/SharcShardingRules.cpp and the
// elementwise default), on meshes of up to three axes: the placements the
// op needs its operands in, and those of its results.

// Embedding: the rows follow the ids' batch split (dp); a table split over
// the hidden dimension (tp) gives a result split there; the table is R on
// dp (each rank uses it on its own batch).
// CHECK-LABEL: func.func @embedding_rule
// CHECK: sharc.embedding {{.*}} : (tensor<16x4xf32, #sharc.place<dp = R, tp = S(1)>>, tensor<8x1xi32, #sharc.place<dp = S(1)>>) -> tensor<8x1x4xf32, #sharc.place<dp = S(1), tp = S(2)>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  func.func @embedding_rule(
      %table: tensor<16x8xf32> {sharc.param = "t", sharc.role = "embedding",
          sharc.placement = #sharc.place<dp = R, tp = S(1)>},
      %ids: tensor<8x2xi32> {sharc.input = "tokens",
          sharc.placement = #sharc.place<dp = S(1)>})
      -> tensor<8x2x8xf32> {
    %h = sharc.embedding %table, %ids
        : (tensor<16x8xf32>, tensor<8x2xi32>) -> tensor<8x2x8xf32>
    return %h : tensor<8x2x8xf32>
  }
}

// -----

// Norm: q_norm's weight, R over tp, normalises each rank's own heads (a
// split of the last dimension passes through); a whole weight (I) on
// sequence-split rows gathers them first.
// CHECK-LABEL: func.func @rms_norm_rule
// CHECK: sharc.rms_norm %{{.*}}, %{{.*}} {{.*}} : (tensor<8x2x4xf32, #sharc.place<tp = S(2)>>, tensor<4xf32, #sharc.place<tp = R>>) -> tensor<8x2x4xf32, #sharc.place<tp = S(2)>>
// CHECK: %[[G:.*]] = sharc.all_gather %{{.*}} {axis = "cp", dim = 0 : i64}
// CHECK-NEXT: sharc.rms_norm %[[G]], {{.*}} -> tensor<8x2x4xf32, #sharc.place<tp = S(2)>>
module attributes {sharc.mesh = #sharc.mesh<cp = 2, tp = 2>} {
  func.func @rms_norm_rule(
      %q: tensor<8x2x8xf32> {sharc.param = "q", sharc.role = "norm",
          sharc.placement = #sharc.place<tp = S(2)>},
      %qn: tensor<4xf32> {sharc.param = "qn", sharc.role = "head_norm",
          sharc.placement = #sharc.place<tp = R>},
      %x: tensor<8x2x8xf32> {sharc.param = "x", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(0), tp = S(2)>},
      %w: tensor<4xf32> {sharc.param = "w", sharc.role = "norm",
          sharc.placement = #sharc.place<tp = R>})
      -> (tensor<8x2x8xf32>, tensor<8x2x8xf32>) {
    %y = sharc.rms_norm %q, %qn {eps = 1.0e-6 : f64}
        : (tensor<8x2x8xf32>, tensor<4xf32>) -> tensor<8x2x8xf32>
    %z = sharc.rms_norm %x, %w {eps = 1.0e-6 : f64}
        : (tensor<8x2x8xf32>, tensor<4xf32>) -> tensor<8x2x8xf32>
    return %y, %z : tensor<8x2x8xf32>, tensor<8x2x8xf32>
  }
}

// -----

// Matmul: a whole weight (the LM head without vocabulary parallelism)
// needs its input whole, so a sequence split (SP) is gathered to I; a
// weight each dp rank uses on its own batch (R) passes the split through.
// CHECK-LABEL: func.func @matmul_rule
// CHECK: %[[X:.*]] = sharc.all_gather %{{.*}} {axis = "tp", dim = 0 : i64} : (tensor<4x1x8xf32, #sharc.place<dp = S(1), tp = S(0)>>) -> tensor<8x1x8xf32, #sharc.place<dp = S(1)>>
// CHECK-NEXT: sharc.matmul %[[X]], {{.*}} -> tensor<8x1x16xf32, #sharc.place<dp = S(1)>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2, tp = 2>} {
  func.func @matmul_rule(
      %x: tensor<8x2x8xf32> {sharc.param = "x", sharc.role = "norm",
          sharc.placement = #sharc.place<dp = S(1), tp = S(0)>},
      %head: tensor<16x8xf32> {sharc.param = "head", sharc.role = "lm_head",
          sharc.placement = #sharc.place<dp = R>})
      -> tensor<8x2x16xf32> {
    %y = sharc.matmul %x, %head
        : (tensor<8x2x8xf32>, tensor<16x8xf32>) -> tensor<8x2x16xf32>
    return %y : tensor<8x2x16xf32>
  }
}

// -----

// Rope and attention on heads split over tp and the batch over dp: rope
// passes any split through (the elementwise default); attention keeps q's
// split and moves it to lse [B, Hq, S] (batch S(0), heads S(1)).
// CHECK-LABEL: func.func @rope_and_attention_rules
// CHECK: sharc.rope {{.*}} -> tensor<8x1x8xf32, #sharc.place<dp = S(1), tp = S(2)>>
// CHECK: sharc.attention {{.*}} -> (tensor<8x1x8xf32, #sharc.place<dp = S(1), tp = S(2)>>, tensor<1x2x8xf32, #sharc.place<dp = S(0), tp = S(1)>>)
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  func.func @rope_and_attention_rules(
      %q: tensor<8x2x16xf32> {sharc.param = "q", sharc.role = "norm",
          sharc.placement = #sharc.place<dp = S(1), tp = S(2)>})
      -> tensor<8x2x16xf32> {
    %r = sharc.rope %q {head_dim = 4 : i64, theta = 1.0e4 : f64}
        : (tensor<8x2x16xf32>) -> tensor<8x2x16xf32>
    %o, %lse = sharc.attention %r, %r, %r {head_dim = 4 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2x16xf32>, tensor<8x2x16xf32>)
        -> (tensor<8x2x16xf32>, tensor<2x4x8xf32>)
    return %o : tensor<8x2x16xf32>
  }
}

// -----

// Swiglu and add (the elementwise default): operands take the first's
// placement, and a partial sum is first brought to where activations live
// CHECK-LABEL: func.func @elementwise_rules
// CHECK: sharc.swiglu {{.*}} -> tensor<8x2x4xf32, #sharc.place<tp = S(2)>>
// (here the sequence split SP asks for), once for both uses.
// CHECK: %[[A:.*]] = sharc.reduce_scatter %{{.*}} {axis = "tp", dim = 0 : i64} : (tensor<8x2x8xf32, #sharc.place<tp = P>>)
// CHECK-NEXT: sharc.add %[[A]], %[[A]] : {{.*}} -> tensor<4x2x8xf32, #sharc.place<tp = S(0)>>
module attributes {sharc.mesh = #sharc.mesh<tp = 2>, sharc.sequence_parallel = "tp"} {
  func.func @elementwise_rules(
      %g: tensor<8x2x8xf32> {sharc.param = "g", sharc.role = "norm",
          sharc.placement = #sharc.place<tp = S(2)>},
      %u: tensor<8x2x8xf32> {sharc.param = "u", sharc.role = "norm",
          sharc.placement = #sharc.place<tp = S(2)>},
      %p: tensor<8x2x8xf32> {sharc.param = "p", sharc.role = "norm",
          sharc.placement = #sharc.place<tp = P>})
      -> (tensor<8x2x8xf32>, tensor<8x2x8xf32>) {
    %s = sharc.swiglu %g, %u
        : (tensor<8x2x8xf32>, tensor<8x2x8xf32>) -> tensor<8x2x8xf32>
    %a = sharc.add %p, %p
        : (tensor<8x2x8xf32>, tensor<8x2x8xf32>) -> tensor<8x2x8xf32>
    return %s, %a : tensor<8x2x8xf32>, tensor<8x2x8xf32>
  }
}

// -----

// Cross entropy: whole logits give the loss whole; logits and labels split
// over the batch (dp) give each rank's mean weighted by its count of valid
// labels over the all-reduced count, a partial summed at the return.
// CHECK-LABEL: func.func @cross_entropy_rule
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<8x1xi32, #sharc.place<dp = S(1)>> {sharc.input = "labels"
// CHECK: %[[L:.*]] = sharc.cross_entropy {{.*}} -> tensor<f32, #sharc.place<dp = P>>
// CHECK-NEXT: %[[N:.*]] = sharc.valid_count %[[LABELS]] {valid_vocab = 16 : i64} {{.*}} -> tensor<f32, #sharc.place<dp = P>>
// CHECK-NEXT: %[[T:.*]] = sharc.all_reduce %[[N]] {axis = "dp"} {{.*}} -> tensor<f32>
// CHECK-NEXT: %[[S:.*]] = sharc.count_scale %[[L]], %[[LABELS]], %[[T]] {valid_vocab = 16 : i64} {{.*}} -> tensor<f32, #sharc.place<dp = P>>
// CHECK-NEXT: %[[R:.*]] = sharc.all_reduce %[[S]] {axis = "dp"} {{.*}} -> tensor<f32>
// CHECK-NEXT: return %[[R]]
module attributes {sharc.mesh = #sharc.mesh<dp = 2, tp = 2>} {
  func.func @cross_entropy_rule(
      %logits: tensor<8x2x16xf32> {sharc.param = "l", sharc.role = "norm",
          sharc.placement = #sharc.place<dp = S(1)>},
      %labels: tensor<8x2xi32> {sharc.input = "labels",
          sharc.placement = #sharc.place<dp = S(1)>})
      -> (tensor<f32> {sharc.output = "loss"}) {
    %loss = sharc.cross_entropy %logits, %labels {valid_vocab = 16 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Labels split over two axes (the batch over dp, the sequence over cp):
// the count is summed over both by one all_reduce, and so is the loss.
// CHECK-LABEL: func.func @cross_entropy_over_two_axes
// CHECK: %[[N:.*]] = sharc.valid_count {{.*}} -> tensor<f32, #sharc.place<cp = P, dp = P>>
// CHECK-NEXT: %[[T:.*]] = sharc.all_reduce %[[N]] {axis = "dp,cp"} {{.*}} -> tensor<f32>
// CHECK-NEXT: %[[S:.*]] = sharc.count_scale {{.*}}, %[[T]]
// CHECK-NEXT: sharc.all_reduce %[[S]] {axis = "dp,cp"} {{.*}} -> tensor<f32>
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  func.func @cross_entropy_over_two_axes(
      %logits: tensor<8x2x16xf32> {sharc.param = "l", sharc.role = "norm",
          sharc.placement = #sharc.place<dp = S(1), cp = S(0)>},
      %labels: tensor<8x2xi32> {sharc.input = "labels",
          sharc.placement = #sharc.place<dp = S(1), cp = S(0)>})
      -> (tensor<f32> {sharc.output = "loss"}) {
    %loss = sharc.cross_entropy %logits, %labels {valid_vocab = 16 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
