// RUN: sharc-opt %s --split-input-file --verify-diagnostics
// Each message of the ring attention ops' verifiers (SharcRingOps.td).

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @shift_by_two(%k: tensor<8x2x32xf32>) {
    // expected-error @+1 {{offset must be 1 or -1, got 2}}
    %y = sharc.ring_shift %k {axis = "cp", offset = 2 : i64, first = 0 : i64}
        : (tensor<8x2x32xf32>) -> tensor<8x2x32xf32>
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @chain_past_the_axis(%k: tensor<8x2x32xf32>) {
    // expected-error @+1 {{first 4 is not a rank of cp (4)}}
    %y = sharc.ring_shift %k {axis = "cp", offset = 1 : i64, first = 4 : i64}
        : (tensor<8x2x32xf32>) -> tensor<8x2x32xf32>
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @shift_over_missing_axis(%k: tensor<8x2x32xf32>) {
    // expected-error @+1 {{axis 'tp' is not an axis of the mesh}}
    %y = sharc.ring_shift %k {axis = "tp", offset = 1 : i64, first = 0 : i64}
        : (tensor<8x2x32xf32>) -> tensor<8x2x32xf32>
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @block_on_other_batch(%q: tensor<8x2x64xf32>,
                                  %k: tensor<8x1x32xf32>) {
    // expected-error @+1 {{q and k must share B}}
    %o, %l = sharc.attention_block %q, %k, %k
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = 0 : i64}
        : (tensor<8x2x64xf32>, tensor<8x1x32xf32>, tensor<8x1x32xf32>)
        -> (tensor<8x2x64xf32>, tensor<2x4x8xf32>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @block_without_axis(%q: tensor<8x2x64xf32>,
                                %k: tensor<8x2x32xf32>) {
    // expected-error @+1 {{position_axis 'sp' is not an axis of the mesh}}
    %o, %l = sharc.attention_block %q, %k, %k
        {head_dim = 16 : i64, position_axis = "sp", kv_shift = 0 : i64}
        : (tensor<8x2x64xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>)
        -> (tensor<8x2x64xf32>, tensor<2x4x8xf32>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @merge_wrong_lse(%o: tensor<8x2x64xf32>, %l: tensor<2x8x4xf32>) {
    // expected-error @+1 {{expects out [S, B, H * D] and lse [B, H, S]}}
    %m, %ml = sharc.lse_merge %o, %l, %o, %l
        : (tensor<8x2x64xf32>, tensor<2x8x4xf32>, tensor<8x2x64xf32>,
           tensor<2x8x4xf32>) -> (tensor<8x2x64xf32>, tensor<2x8x4xf32>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @block_shifted_back(%q: tensor<8x2x64xf32>,
                                %k: tensor<8x2x32xf32>) {
    // expected-error @+1 {{kv_shift must be non-negative, got -1}}
    %o, %l = sharc.attention_block %q, %k, %k
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = -1 : i64}
        : (tensor<8x2x64xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>)
        -> (tensor<8x2x64xf32>, tensor<2x4x8xf32>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @block_grad_short_dlse(%q: tensor<8x2x64xf32>,
                                   %k: tensor<8x2x32xf32>,
                                   %l: tensor<2x4x8xf32>,
                                   %dl: tensor<2x4x4xf32>) {
    // expected-error @+1 {{dlse type 'tensor<2x4x4xf32>' must have the shape of 'tensor<2x4x8xf32>'}}
    %dq, %dk, %dv = sharc.attention_block_grad %q, %k, %k, %q, %l, %q, %dl
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = 0 : i64}
        : (tensor<8x2x64xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>,
           tensor<8x2x64xf32>, tensor<2x4x8xf32>, tensor<8x2x64xf32>,
           tensor<2x4x4xf32>)
        -> (tensor<8x2x64xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @merge_grad_short_part(%o: tensor<8x2x64xf32>,
                                   %p: tensor<4x2x64xf32>,
                                   %l: tensor<2x4x8xf32>) {
    // expected-error @+1 {{part type 'tensor<4x2x64xf32>' must have the shape of 'tensor<8x2x64xf32>'}}
    %d, %dl = sharc.lse_merge_grad %p, %l, %o, %l, %o, %l
        : (tensor<4x2x64xf32>, tensor<2x4x8xf32>, tensor<8x2x64xf32>,
           tensor<2x4x8xf32>, tensor<8x2x64xf32>, tensor<2x4x8xf32>)
        -> (tensor<8x2x64xf32>, tensor<2x4x8xf32>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @wrap_from_rank_one(%k: tensor<8x2x32xf32>) {
    // expected-error @+1 {{wrap takes the whole ring, so first must be 0, got 1}}
    %y = sharc.ring_shift %k {axis = "cp", offset = 1 : i64, first = 1 : i64,
                              wrap} : (tensor<8x2x32xf32>) -> tensor<8x2x32xf32>
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @block_split_unknown(%q: tensor<8x2x64xf32>,
                                 %k: tensor<8x2x32xf32>) {
    // expected-error @+1 {{position_split must be "balanced", got "strided"}}
    %o, %l = sharc.attention_block %q, %k, %k
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = 0 : i64,
         position_split = "strided"}
        : (tensor<8x2x64xf32>, tensor<8x2x32xf32>, tensor<8x2x32xf32>)
        -> (tensor<8x2x64xf32>, tensor<2x4x8xf32>)
    return
  }
}

// -----

module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  func.func @balanced_block_of_odd_rows(%q: tensor<8x2x64xf32>,
                                        %k: tensor<7x2x32xf32>) {
    // expected-error @+1 {{the balanced split needs blocks of two chunks, got 'tensor<7x2x32xf32>'}}
    %o, %l = sharc.attention_block %q, %k, %k
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = 0 : i64,
         position_split = "balanced"}
        : (tensor<8x2x64xf32>, tensor<7x2x32xf32>, tensor<7x2x32xf32>)
        -> (tensor<8x2x64xf32>, tensor<2x4x8xf32>)
    return
  }
}
