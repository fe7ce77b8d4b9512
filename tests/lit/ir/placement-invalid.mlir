// RUN: sharc-opt %s --split-input-file --verify-diagnostics
// One case per message of the mesh, the placements and their use by the
// collectives; each names the axis at fault.

// expected-error @+1 {{mesh axis 'tp' given twice}}
module attributes {sharc.mesh = #sharc.mesh<tp = 2, tp = 2>} {}

// -----

// expected-error @+1 {{mesh axis 'cp' must have size at least 1, got 0}}
module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 0>} {}

// -----

// expected-error @+1 {{mesh axis 'dp' given twice}}
func.func @placement_axis_twice(%x: tensor<8xf32, #sharc.place<dp = R, dp = S(0)>>) {
  return
}

// -----

// expected-error @+1 {{expected P(sum) or P(max), got P(min)}}
func.func @partial_kind(%x: tensor<8xf32, #sharc.place<tp = P(min)>>) {
  return
}

// -----

// expected-error @+1 {{expected I, R, P, P(max) or S(dim), got Q}}
func.func @unknown_kind(%x: tensor<8xf32, #sharc.place<tp = Q>>) {
  return
}

// -----

module attributes {sharc.mesh = #sharc.mesh<dp = 2, tp = 2>} {
  func.func @axis_not_in_mesh(%x: tensor<8xf32, #sharc.place<cp = P>>) {
    // expected-error @+1 {{axis 'cp' is not an axis of the mesh (dp, tp)}}
    %y = sharc.all_reduce %x {axis = "cp"}
        : (tensor<8xf32, #sharc.place<cp = P>>) -> tensor<8xf32>
    return
  }
}

// -----

// The sequence is split over cp and, inside each cp block, over tp: the
// outer axis cannot be gathered while the inner one still splits it.
module attributes {sharc.mesh = #sharc.mesh<cp = 2, tp = 2>} {
  func.func @gather_outer_first(
      %x: tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>) {
    // expected-error @+1 {{dim 0 is split over cp and, inside it, over tp; only the innermost axis can move}}
    %y = sharc.all_gather %x {axis = "cp", dim = 0 : i64}
        : (tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>)
        -> tensor<4x2x8xf32, #sharc.place<tp = S(0)>>
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 2, tp = 2>} {
  func.func @scatter_outside_inner(
      %x: tensor<4x2x8xf32, #sharc.place<cp = P, tp = S(0)>>) {
    // expected-error @+1 {{dim 0 is split over cp and, inside it, over tp; only the innermost axis can move}}
    %y = sharc.reduce_scatter %x {axis = "cp", dim = 0 : i64}
        : (tensor<4x2x8xf32, #sharc.place<cp = P, tp = S(0)>>)
        -> tensor<2x2x8xf32, #sharc.place<cp = S(0), tp = S(0)>>
    return
  }
}

// -----

// The row max of the vocab-parallel loss is a partial maximum: an
// all_reduce sum of it is refused.
func.func @max_summed(%m: tensor<8x2xf32, #sharc.place<tp = P(max)>>) {
  // expected-error @+1 {{expects P -> I or R on tp, got P(max) -> I}}
  %y = sharc.all_reduce %m {axis = "tp", reduce = "sum"}
      : (tensor<8x2xf32, #sharc.place<tp = P(max)>>) -> tensor<8x2xf32>
  return
}

// -----

func.func @sum_maxed(%s: tensor<8x2xf32, #sharc.place<tp = P>>) {
  // expected-error @+1 {{expects P(max) -> I or R on tp, got P -> I}}
  %y = sharc.all_reduce %s {axis = "tp", reduce = "max"}
      : (tensor<8x2xf32, #sharc.place<tp = P>>) -> tensor<8x2xf32>
  return
}

// -----

module attributes {sharc.mesh = #sharc.mesh<dp = 2, cp = 2, tp = 2>} {
  func.func @other_axis_changed(
      %x: tensor<8x2xf32, #sharc.place<cp = S(0), tp = P>>) {
    // expected-error @+1 {{must keep the placement on cp, got S(0) -> I}}
    %y = sharc.all_reduce %x {axis = "tp"}
        : (tensor<8x2xf32, #sharc.place<cp = S(0), tp = P>>) -> tensor<8x2xf32>
    return
  }
}

// -----

// expected-error @+1 {{an invariant placement is written as no encoding}}
func.func @invariant_encoding(%x: tensor<8xf32, #sharc.place<dp = I, tp = I>>) {
  return
}

// -----

// expected-error @+1 {{placement splits dimension 2 over tp but the tensor has rank 2}}
func.func @split_beyond_rank(%x: tensor<8x2xf32, #sharc.place<tp = S(2)>>) {
  return
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 2>} {
  func.func @all_to_all_same_dim(%x: tensor<4x2x8xf32, #sharc.place<cp = S(0)>>) {
    // expected-error @+1 {{split_dim 0 and concat_dim 0 must be two dimensions of a rank-3 tensor}}
    %y = sharc.all_to_all %x {axis = "cp", split_dim = 0 : i64, concat_dim = 0 : i64}
        : (tensor<4x2x8xf32, #sharc.place<cp = S(0)>>)
        -> tensor<4x2x8xf32, #sharc.place<cp = S(0)>>
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 2>} {
  func.func @all_to_all_shape(%x: tensor<4x2x8xf32, #sharc.place<cp = S(0)>>) {
    // expected-error @+1 {{result shape must be the input's with dim 0 times and dim 2 divided by cp (2), got 'tensor<8x2x8xf32, #sharc.place<cp = S(2)>>'}}
    %y = sharc.all_to_all %x {axis = "cp", split_dim = 2 : i64, concat_dim = 0 : i64}
        : (tensor<4x2x8xf32, #sharc.place<cp = S(0)>>)
        -> tensor<8x2x8xf32, #sharc.place<cp = S(2)>>
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 2>} {
  func.func @all_to_all_placement(%x: tensor<4x2x8xf32, #sharc.place<cp = S(0)>>) {
    // expected-error @+1 {{expects S(0) -> S(2) on cp, got S(0) -> S(1)}}
    %y = sharc.all_to_all %x {axis = "cp", split_dim = 2 : i64, concat_dim = 0 : i64}
        : (tensor<4x2x8xf32, #sharc.place<cp = S(0)>>)
        -> tensor<8x2x4xf32, #sharc.place<cp = S(1)>>
    return
  }
}

// -----

// A reduction over several axes names them in the mesh's order.
module attributes {sharc.mesh = #sharc.mesh<dp = 2, tp = 2>} {
  func.func @axes_out_of_order(%g: tensor<8xf32, #sharc.place<dp = P, tp = P>>) {
    // expected-error @+1 {{axes 'tp,dp' must be distinct and in the mesh's order}}
    %y = sharc.all_reduce %g {axis = "tp,dp"}
        : (tensor<8xf32, #sharc.place<dp = P, tp = P>>)
        -> tensor<8xf32, #sharc.place<dp = R, tp = R>>
    return
  }
}

// -----

// Only a reduction may span several axes.
module attributes {sharc.mesh = #sharc.mesh<dp = 2, tp = 2>} {
  func.func @gather_over_two_axes(%x: tensor<2xf32, #sharc.place<dp = S(0), tp = S(0)>>) {
    // expected-error @+1 {{axis must name one mesh axis, got 'dp,tp'}}
    %y = sharc.all_gather %x {axis = "dp,tp", dim = 0 : i64}
        : (tensor<2xf32, #sharc.place<dp = S(0), tp = S(0)>>) -> tensor<8xf32>
    return
  }
}

// -----

// expected-error @+1 {{order names 'dp', which splits no dimension}}
func.func @order_names_no_split(%x: tensor<8xf32, #sharc.place<dp = R, tp = S(0), cp = S(0), order = [dp, tp, cp]>>) {
  return
}

// -----

// expected-error @+1 {{order must list every axis splitting dimension 0 (3, at least 2), got 2}}
func.func @order_incomplete(%x: tensor<8xf32, #sharc.place<dp = S(0), tp = S(0), cp = S(0), order = [tp, cp]>>) {
  return
}

// -----

// expected-error @+1 {{order names 'tp' twice}}
func.func @order_twice(%x: tensor<8xf32, #sharc.place<tp = S(0), cp = S(0), order = [tp, cp, tp]>>) {
  return
}

// -----

// Under the stated order tp is outer on the heads: cp alone can move.
module attributes {sharc.mesh = #sharc.mesh<cp = 2, tp = 2>} {
  func.func @outer_axis_of_stated_order(
      %x: tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>) {
    // expected-error @+1 {{dim 2 is split over tp and, inside it, over cp; only the innermost axis can move}}
    %y = sharc.all_gather %x {axis = "tp", dim = 2 : i64}
        : (tensor<8x2x4xf32, #sharc.place<cp = S(2), tp = S(2), order = [tp, cp]>>)
        -> tensor<8x2x8xf32, #sharc.place<cp = S(2)>>
    return
  }
}

// -----

// ZeRO-1's buckets: each member is the single op's pair along dim 0.
module attributes {sharc.mesh = #sharc.mesh<dp = 2>} {
  func.func @scatter_bucket_shape(
      %a: tensor<4x2xf32, #sharc.place<dp = P>>,
      %b: tensor<6x2xf32, #sharc.place<dp = P>>) {
    // expected-error @+1 {{dim 0 out of range}}
    %x, %y = sharc.reduce_scatter_coalesced %a, %b {axis = "dp"}
        : (tensor<4x2xf32, #sharc.place<dp = P>>,
           tensor<6x2xf32, #sharc.place<dp = P>>)
        -> (tensor<2x2xf32, #sharc.place<dp = S(0)>>,
            tensor<3xf32, #sharc.place<dp = S(0)>>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<dp = 2>} {
  func.func @scatter_bucket_placement(
      %a: tensor<4x2xf32, #sharc.place<dp = R>>) {
    // expected-error @+1 {{expects P -> S(0) on dp, got R -> S(0)}}
    %x = sharc.reduce_scatter_coalesced %a {axis = "dp"}
        : (tensor<4x2xf32, #sharc.place<dp = R>>)
        -> tensor<2x2xf32, #sharc.place<dp = S(0)>>
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<dp = 2>} {
  func.func @gather_bucket_counts(
      %a: tensor<2x2xf32, #sharc.place<dp = S(0)>>) {
    // expected-error @+1 {{needs as many results as operands, at least one}}
    %x, %y = sharc.all_gather_coalesced %a {axis = "dp"}
        : (tensor<2x2xf32, #sharc.place<dp = S(0)>>)
        -> (tensor<4x2xf32, #sharc.place<dp = R>>,
            tensor<4x2xf32, #sharc.place<dp = R>>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<dp = 2>} {
  func.func @gather_bucket_placement(
      %a: tensor<2x2xf32, #sharc.place<dp = S(0)>>) {
    // expected-error @+1 {{expects S(0) -> I or R on dp, got S(0) -> P}}
    %x = sharc.all_gather_coalesced %a {axis = "dp"}
        : (tensor<2x2xf32, #sharc.place<dp = S(0)>>)
        -> tensor<4x2xf32, #sharc.place<dp = P>>
    return
  }
}
