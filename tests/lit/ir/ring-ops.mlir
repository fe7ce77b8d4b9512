// RUN: sharc-opt %s | sharc-opt | FileCheck %s
// Ring attention's ops (--cp-comm ring) print and parse back to themselves.

// CHECK: module attributes {sharc.mesh = #sharc.mesh<cp = 4>}
module attributes {sharc.mesh = #sharc.mesh<cp = 4>} {
  // CHECK-LABEL: func.func @ring_ops
  func.func @ring_ops(%q: tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
                      %k: tensor<8x2x32xf32, #sharc.place<cp = S(0)>>) {
    // CHECK: sharc.ring_shift %{{.*}} {axis = "cp", first = 1 : i64, offset = 1 : i64} : (tensor<8x2x32xf32, #sharc.place<cp = S(0)>>) -> tensor<8x2x32xf32, #sharc.place<cp = S(0)>>
    %k1 = sharc.ring_shift %k {axis = "cp", offset = 1 : i64, first = 1 : i64}
        : (tensor<8x2x32xf32, #sharc.place<cp = S(0)>>)
        -> tensor<8x2x32xf32, #sharc.place<cp = S(0)>>
    // CHECK: sharc.attention_block %{{.*}}, %{{.*}}, %{{.*}} {head_dim = 16 : i64, kv_shift = 0 : i64, position_axis = "cp"}
    // CHECK-SAME: -> (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>, tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
    %o0, %l0 = sharc.attention_block %q, %k, %k
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = 0 : i64}
        : (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x32xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x32xf32, #sharc.place<cp = S(0)>>)
        -> (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
            tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
    %o1, %l1 = sharc.attention_block %q, %k1, %k1
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = 1 : i64}
        : (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x32xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x32xf32, #sharc.place<cp = S(0)>>)
        -> (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
            tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
    // CHECK: sharc.lse_merge
    %o, %l = sharc.lse_merge %o0, %l0, %o1, %l1
        : (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<2x4x8xf32, #sharc.place<cp = S(2)>>,
           tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
        -> (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
            tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
    // CHECK: sharc.lse_merge_grad
    %d, %dl = sharc.lse_merge_grad %o1, %l1, %o, %l, %o, %l
        : (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<2x4x8xf32, #sharc.place<cp = S(2)>>,
           tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<2x4x8xf32, #sharc.place<cp = S(2)>>,
           tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
        -> (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
            tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
    // The balanced split's ring: the whole ring, blocks of two chunks.
    // CHECK: sharc.ring_shift %{{.*}} {axis = "cp", first = 0 : i64, offset = 1 : i64, wrap}
    %kw = sharc.ring_shift %k {axis = "cp", offset = 1 : i64, first = 0 : i64,
                               wrap}
        : (tensor<8x2x32xf32, #sharc.place<cp = S(0)>>)
        -> tensor<8x2x32xf32, #sharc.place<cp = S(0)>>
    // CHECK: sharc.attention_block {{.*}} {head_dim = 16 : i64, kv_shift = 1 : i64, position_axis = "cp", position_split = "balanced"}
    %ob, %lb = sharc.attention_block %q, %kw, %kw
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = 1 : i64,
         position_split = "balanced"}
        : (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x32xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x32xf32, #sharc.place<cp = S(0)>>)
        -> (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
            tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
    // CHECK: sharc.attention_block_grad {{.*}} {head_dim = 16 : i64, kv_shift = 1 : i64, position_axis = "cp"}
    %dq, %dk, %dv = sharc.attention_block_grad %q, %k1, %k1, %o1, %l1, %d, %dl
        {head_dim = 16 : i64, position_axis = "cp", kv_shift = 1 : i64}
        : (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x32xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x32xf32, #sharc.place<cp = S(0)>>,
           tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<2x4x8xf32, #sharc.place<cp = S(2)>>,
           tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
           tensor<2x4x8xf32, #sharc.place<cp = S(2)>>)
        -> (tensor<8x2x64xf32, #sharc.place<cp = S(0)>>,
            tensor<8x2x32xf32, #sharc.place<cp = S(0)>>,
            tensor<8x2x32xf32, #sharc.place<cp = S(0)>>)
    return
  }
}
