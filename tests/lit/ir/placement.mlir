// RUN: sharc-opt %s --split-input-file | sharc-opt --split-input-file | FileCheck %s
// Meshes of any axes and placements over them print and parse back; I
// entries are dropped and the rest sorted, so equal placements are equal.

// CHECK: module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>}
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @three_axes
  // CHECK-SAME: tensor<4x1x8xf32, #sharc.place<cp = S(0), dp = S(1), tp = S(0)>>
  // CHECK-SAME: tensor<16xf32, #sharc.place<cp = R, dp = R, tp = R>>
  // CHECK-SAME: tensor<4x1xf32, #sharc.place<tp = P(max)>>
  // CHECK-SAME: tensor<4x1xf32, #sharc.place<tp = P>>
  func.func @three_axes(
      %x: tensor<4x1x8xf32, #sharc.place<tp = S(0), dp = S(1), cp = S(0)>>,
      %w: tensor<16xf32, #sharc.place<dp = R, pp = I, cp = R, tp = R>>,
      %m: tensor<4x1xf32, #sharc.place<tp = P(max)>>,
      %s: tensor<4x1xf32, #sharc.place<tp = P(sum)>>) {
    return
  }
}

// -----

// A mesh of one axis with a name sharc gives no meaning to.
// CHECK: sharc.mesh = #sharc.mesh<ep = 4>
module attributes {sharc.mesh = #sharc.mesh<ep = 4>} {
  // CHECK-LABEL: func.func @any_axis_name
  // CHECK: sharc.all_gather {{.*}} {axis = "ep", dim = 0 : i64} : (tensor<2x8xf32, #sharc.place<ep = S(0)>>) -> tensor<8x8xf32, #sharc.place<ep = R>>
  func.func @any_axis_name(%x: tensor<2x8xf32, #sharc.place<ep = S(0)>>) {
    %y = sharc.all_gather %x {axis = "ep", dim = 0 : i64}
        : (tensor<2x8xf32, #sharc.place<ep = S(0)>>)
        -> tensor<8x8xf32, #sharc.place<ep = R>>
    return
  }
}

// -----

// The sequence split over cp (outer) and tp (inner): the inner axis is
// gathered first, then the outer one.
// CHECK-LABEL: func.func @gather_inner_then_outer
module attributes {sharc.mesh = #sharc.mesh<cp = 2, tp = 2>} {
  func.func @gather_inner_then_outer(
      %x: tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>) {
    // CHECK: sharc.all_gather {{.*}} {axis = "tp", dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
    %c = sharc.all_gather %x {axis = "tp", dim = 0 : i64}
        : (tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>)
        -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
    // CHECK: sharc.all_gather {{.*}} {axis = "cp", dim = 0 : i64} {{.*}} -> tensor<8x2x8xf32>
    %y = sharc.all_gather %c {axis = "cp", dim = 0 : i64}
        : (tensor<4x2x8xf32, #sharc.place<cp = S(0)>>) -> tensor<8x2x8xf32>
    return
  }
}

// -----

// CHECK-LABEL: func.func @all_to_all_round_trip
// CHECK: sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 0 : i64, split_dim = 2 : i64} : (tensor<4x2x8xf32, #sharc.place<cp = S(0)>>) -> tensor<8x2x4xf32, #sharc.place<cp = S(2)>>
module attributes {sharc.mesh = #sharc.mesh<cp = 2>} {
  func.func @all_to_all_round_trip(
      %x: tensor<4x2x8xf32, #sharc.place<cp = S(0)>>) {
    %y = sharc.all_to_all %x {axis = "cp", split_dim = 2 : i64,
                              concat_dim = 0 : i64}
        : (tensor<4x2x8xf32, #sharc.place<cp = S(0)>>)
        -> tensor<8x2x4xf32, #sharc.place<cp = S(2)>>
    return
  }
}

// -----

// CHECK-LABEL: func.func @all_reduce_over_two_axes
// CHECK: sharc.all_reduce %{{.*}} {axis = "dp,tp"} : (tensor<8xf32, #sharc.place<dp = P, tp = P>>) -> tensor<8xf32, #sharc.place<dp = R, tp = R>>
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  func.func @all_reduce_over_two_axes(
      %g: tensor<8xf32, #sharc.place<dp = P, tp = P>>) {
    %y = sharc.all_reduce %g {axis = "dp,tp"}
        : (tensor<8xf32, #sharc.place<dp = P, tp = P>>)
        -> tensor<8xf32, #sharc.place<dp = R, tp = R>>
    return
  }
}

// -----

// A stated split order: heads split by tp, each tp block split again by cp
// (tp outer, against the mesh's nesting). An order the mesh's nesting
// gives is dropped, so it prints as no order. cp, innermost on the heads,
// exchanges them with the sequence within each tp group.
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  // CHECK-LABEL: func.func @stated_split_order
  // CHECK-SAME: tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>
  // CHECK-SAME: tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2)>>
  // CHECK-SAME: tensor<2x1x4xf32, #sharc.place<cp = S(0), dp = S(1), tp = S(0), order = [tp, cp]>>
  func.func @stated_split_order(
      %x: tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>,
      %y: tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [cp, tp]>>,
      %z: tensor<2x1x4xf32, #sharc.place<order = [tp, cp], dp = S(1), tp = S(0), cp = S(0)>>) {
    // CHECK: sharc.all_to_all %{{.*}} {axis = "cp", concat_dim = 2 : i64, split_dim = 0 : i64} {{.*}} -> tensor<4x2x8xf32, #sharc.place<cp = S(0), tp = S(2)>>
    %s = sharc.all_to_all %x {axis = "cp", concat_dim = 2 : i64, split_dim = 0 : i64}
        : (tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>)
        -> tensor<4x2x8xf32, #sharc.place<cp = S(0), tp = S(2)>>
    // CHECK: sharc.all_gather %{{.*}} {axis = "tp", dim = 2 : i64} {{.*}} -> tensor<8x2x8xf32, #sharc.place<cp = S(2)>>
    %g = sharc.all_gather %y {axis = "tp", dim = 2 : i64}
        : (tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2)>>)
        -> tensor<8x2x8xf32, #sharc.place<cp = S(2)>>
    return
  }
}
