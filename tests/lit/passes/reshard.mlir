// RUN: sharc-opt %s --split-input-file --sharc-spmdize | FileCheck %s
// RUN: sharc-opt %s --split-input-file --sharc-spmdize --sharc-autodiff \
// RUN:   --sharc-verify-placements | FileCheck %s --check-prefix=GRAD
// The generic reshard on meshes of two and three axes: one collective per
// changed axis, a split dimension gathered innermost axis first and split
// outermost axis first, a split moved between dimensions by all_to_all,
// and each collective's transpose in the backward.

// The sequence split over cp and, inside it, tp (dp2 x cp2 x tp2): a norm
// with a whole weight needs its input whole, so tp is gathered, then cp;
// a whole addend of the split value is sliced over cp, then tp.
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @gather_and_slice_two_axes
  func.func @gather_and_slice_two_axes(
      %x: tensor<8x2x8xf32> {sharc.param = "x", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(0), tp = S(0)>},
      %z: tensor<8x2x8xf32> {sharc.param = "z", sharc.role = "norm"},
      %w: tensor<8xf32> {sharc.param = "w", sharc.role = "norm"})
      -> (tensor<8x2x8xf32>, tensor<8x2x8xf32>) {
    // CHECK: %[[T:.*]] = sharc.all_gather %{{.*}} {axis = "tp", dim = 0 : i64} : (tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>) -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
    // CHECK-NEXT: %[[C:.*]] = sharc.all_gather %[[T]] {axis = "cp", dim = 0 : i64} {{.*}} -> tensor<8x2x8xf32>
    // CHECK-NEXT: sharc.rms_norm %[[C]]
    %n = sharc.rms_norm %x, %w {eps = 1.0e-6 : f64}
        : (tensor<8x2x8xf32>, tensor<8xf32>) -> tensor<8x2x8xf32>
    // CHECK: %[[SC:.*]] = sharc.slice_to_rank %{{.*}} {axis = "cp", dim = 0 : i64} : (tensor<8x2x8xf32>) -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
    // CHECK-NEXT: %[[ST:.*]] = sharc.slice_to_rank %[[SC]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>
    // CHECK-NEXT: sharc.add %{{.*}}, %[[ST]]
    %s = sharc.add %x, %z
        : (tensor<8x2x8xf32>, tensor<8x2x8xf32>) -> tensor<8x2x8xf32>
    return %n, %s : tensor<8x2x8xf32>, tensor<8x2x8xf32>
  }
}

// -----

// Sequence-split and head-split addends (Ulysses's two layouts on cp):
// the second is exchanged into the first's split by one all_to_all, whose
// transpose in the backward is the inverse exchange.
module attributes {sharc.mesh = #sharc.mesh<cp = 2>} {
  // CHECK-LABEL: func.func @split_moves_by_all_to_all
  // GRAD-LABEL: func.func @split_moves_by_all_to_all
  func.func @split_moves_by_all_to_all(
      %x: tensor<8x2x16xf32> {sharc.param = "x", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(0)>},
      %y: tensor<8x2x16xf32> {sharc.param = "y", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(2)>},
      %labels: tensor<8x2xi32> {sharc.input = "labels"})
      -> (tensor<f32> {sharc.output = "loss"}) {
    // CHECK: %[[E:.*]] = sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 2 : i64, split_dim = 0 : i64} : (tensor<8x2x8xf32, #sharc.place<cp = S(2)>>) -> tensor<4x2x16xf32, #sharc.place<cp = S(0)>>
    // CHECK-NEXT: sharc.add %{{.*}}, %[[E]]
    // GRAD: %[[DY:.*]] = sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} : (tensor<4x2x16xf32, #sharc.place<cp = S(0)>>) -> tensor<8x2x8xf32, #sharc.place<cp = S(2)>>
    // GRAD: return {{.*}}, %[[DY]]
    %s = sharc.add %x, %y
        : (tensor<8x2x16xf32>, tensor<8x2x16xf32>) -> tensor<8x2x16xf32>
    %loss = sharc.cross_entropy %s, %labels {valid_vocab = 16 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The sequence split over cp and, inside it, tp against one split over tp
// alone: moving the outer axis's split needs the inner axis out of the way
// first (gathered, then sliced again), whichever way the change goes.
module attributes {sharc.mesh = #sharc.mesh<cp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @outer_split_under_inner
  func.func @outer_split_under_inner(
      %both: tensor<8x2x8xf32> {sharc.param = "both", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(0), tp = S(0)>},
      %inner: tensor<8x2x8xf32> {sharc.param = "inner", sharc.role = "norm",
          sharc.placement = #sharc.place<tp = S(0)>})
      -> (tensor<8x2x8xf32>, tensor<8x2x8xf32>) {
    // CHECK: %[[T:.*]] = sharc.all_gather %[[BOTH:[^ ]*]] {axis = "tp", dim = 0 : i64} : (tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>) -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
    // CHECK-NEXT: %[[C:.*]] = sharc.all_gather %[[T]] {axis = "cp", dim = 0 : i64} {{.*}} -> tensor<8x2x8xf32>
    // CHECK-NEXT: %[[S:.*]] = sharc.slice_to_rank %[[C]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<tp = S(0)>>
    // CHECK-NEXT: sharc.add %{{.*}}, %[[S]]
    %a = sharc.add %inner, %both
        : (tensor<8x2x8xf32>, tensor<8x2x8xf32>) -> tensor<8x2x8xf32>
    // CHECK: %[[U:.*]] = sharc.all_gather %{{.*}} {axis = "tp", dim = 0 : i64} : (tensor<4x2x8xf32, #sharc.place<tp = S(0)>>) -> tensor<8x2x8xf32>
    // CHECK-NEXT: %[[SC:.*]] = sharc.slice_to_rank %[[U]] {axis = "cp", dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
    // CHECK-NEXT: %[[ST:.*]] = sharc.slice_to_rank %[[SC]] {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>
    // CHECK-NEXT: sharc.add %{{.*}}, %[[ST]]
    %b = sharc.add %both, %inner
        : (tensor<8x2x8xf32>, tensor<8x2x8xf32>) -> tensor<8x2x8xf32>
    return %a, %b : tensor<8x2x8xf32>, tensor<8x2x8xf32>
  }
}

// -----

// A sum over dp and tp, needed whole: one all_reduce over both axes (a
// group spanning dp x tp), not one per axis.
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @sum_over_two_axes
  func.func @sum_over_two_axes(
      %p: tensor<8x2x8xf32> {sharc.param = "p", sharc.role = "norm",
          sharc.placement = #sharc.place<dp = P, tp = P>},
      %w: tensor<8xf32> {sharc.param = "w", sharc.role = "norm"})
      -> tensor<8x2x8xf32> {
    // CHECK: %[[R:.*]] = sharc.all_reduce %{{.*}} {axis = "dp,tp"} : (tensor<8x2x8xf32, #sharc.place<dp = P, tp = P>>) -> tensor<8x2x8xf32>
    // CHECK-NOT: sharc.all_reduce
    // CHECK: sharc.rms_norm %[[R]]
    %n = sharc.rms_norm %p, %w {eps = 1.0e-6 : f64}
        : (tensor<8x2x8xf32>, tensor<8xf32>) -> tensor<8x2x8xf32>
    return %n : tensor<8x2x8xf32>
  }
}

// -----

// Heads split by tp and, inside each tp block, by cp (a stated order,
// against the mesh's nesting) against the sequence split over cp with the
// heads over tp (dp2 x cp2 x tp2): cp is innermost on the heads, so one
// all_to_all over cp moves it to the sequence, within each tp group, and
// its transpose in the backward is the inverse exchange. tp never moves.
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @heads_to_sequence_within_tp
  // GRAD-LABEL: func.func @heads_to_sequence_within_tp
  func.func @heads_to_sequence_within_tp(
      %seq: tensor<8x2x16xf32> {sharc.param = "seq", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(0), tp = S(2)>},
      %heads: tensor<8x2x16xf32> {sharc.param = "heads", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>},
      %labels: tensor<8x2xi32> {sharc.input = "labels"})
      -> (tensor<f32> {sharc.output = "loss"}) {
    // CHECK-NOT: sharc.all_gather
    // CHECK: %[[E:.*]] = sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 2 : i64, split_dim = 0 : i64} : (tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>) -> tensor<4x2x8xf32, #sharc.place<cp = S(0), tp = S(2)>>
    // CHECK-NEXT: sharc.add %{{.*}}, %[[E]]
    // GRAD-NOT: sharc.all_gather {{.*}}axis = "tp"
    // GRAD: %[[DH:.*]] = sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} : (tensor<4x2x8xf32, #sharc.place<cp = S(0), tp = S(2)>>) -> tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>
    // GRAD-NOT: sharc.all_gather {{.*}}axis = "tp"
    // GRAD: return {{.*}}, %[[DH]]
    %s = sharc.add %seq, %heads
        : (tensor<8x2x16xf32>, tensor<8x2x16xf32>) -> tensor<8x2x16xf32>
    %loss = sharc.cross_entropy %s, %labels {valid_vocab = 16 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The other way (Ulysses's forward exchange under tp): a value split along
// the sequence over cp, with the heads over tp, brought to the heads split
// of an addend that states tp outside cp: one all_to_all over cp. The
// addend split in the mesh's nesting (cp outside tp) instead needs tp
// gathered, then cp, and both sliced again in the stated order.
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @sequence_to_heads_within_tp
  func.func @sequence_to_heads_within_tp(
      %heads: tensor<8x2x16xf32> {sharc.param = "heads", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>},
      %seq: tensor<8x2x16xf32> {sharc.param = "seq", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(0), tp = S(2)>},
      %nested: tensor<8x2x16xf32> {sharc.param = "nested", sharc.role = "norm",
          sharc.placement = #sharc.place<cp = S(2), tp = S(2)>})
      -> (tensor<8x2x16xf32>, tensor<8x2x16xf32>) {
    // CHECK-NOT: sharc.all_gather
    // CHECK: %[[E:.*]] = sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} : (tensor<4x2x8xf32, #sharc.place<cp = S(0), tp = S(2)>>) -> tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>
    // CHECK-NEXT: sharc.add %{{.*}}, %[[E]]
    %a = sharc.add %heads, %seq
        : (tensor<8x2x16xf32>, tensor<8x2x16xf32>) -> tensor<8x2x16xf32>
    // CHECK: %[[T:.*]] = sharc.all_gather %{{.*}} {axis = "tp", dim = 2 : i64} : (tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2)>>) -> tensor<8x2x8xf32, #sharc.place<cp = S(2)>>
    // CHECK-NEXT: %[[C:.*]] = sharc.all_gather %[[T]] {axis = "cp", dim = 2 : i64} {{.*}} -> tensor<8x2x16xf32>
    // CHECK-NEXT: %[[ST:.*]] = sharc.slice_to_rank %[[C]] {axis = "tp", dim = 2 : i64} {{.*}} -> tensor<8x2x8xf32, #sharc.place<tp = S(2)>>
    // CHECK-NEXT: %[[SC:.*]] = sharc.slice_to_rank %[[ST]] {axis = "cp", dim = 2 : i64} {{.*}} -> tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>
    // CHECK-NEXT: sharc.add %{{.*}}, %[[SC]]
    %b = sharc.add %heads, %nested
        : (tensor<8x2x16xf32>, tensor<8x2x16xf32>) -> tensor<8x2x16xf32>
    return %a, %b : tensor<8x2x16xf32>, tensor<8x2x16xf32>
  }
}
