//===- SharcDecodeOps.td - generation with a key/value cache -*- tablegen -*-===//
//
// `sharc compile --decode`: the forward program of one new position per
// sample, each layer's keys and values kept in a cache of seq_len
// positions (function arguments marked sharc.cache, in the plan's cache
// region) that decode_attention writes in place. The math is in
// kernels/DecodeAttention.h.
//
//===----------------------------------------------------------------------===//

#ifndef SHARC_DECODE_OPS_TD
#define SHARC_DECODE_OPS_TD

def Sharc_DecodeAttentionOp
    : Sharc_ComputeOp<"decode_attention", [], ["getFlops"]> {
  let summary = "one new position's attention over a key/value cache";
  let description = [{
    `q` is `[1, B, Hq * D]`, `k` and `v` are `[1, B, Hkv * D]` with
    `Hq % Hkv == 0`, the caches `[C, B, Hkv * D]` and `positions` `[1, B]`
    i32 (each sample's position, below C). Rotates q and k by rope at each
    sample's position (`theta`), stores the rotated key and the value at
    that position of the caches, and attends over the cache's positions
    up to it. Returns the output `[1, B, Hq * D]` and the updated caches
    (the planner writes them in place: the results must be returned as
    updates of the cache arguments).
    ```mlir
    %o, %kc2, %vc2 = sharc.decode_attention %q, %k, %v, %kc, %vc, %pos
        {head_dim = 16 : i64, theta = 1.0e+06 : f64}
        : (tensor<1x2x64xf32>, tensor<1x2x32xf32>, tensor<1x2x32xf32>,
           tensor<128x2x32xf32>, tensor<128x2x32xf32>, tensor<1x2xi32>)
        -> (tensor<1x2x64xf32>, tensor<128x2x32xf32>, tensor<128x2x32xf32>)
    ```
  }];
  let arguments = (ins Sharc_FloatTensor:$q, Sharc_FloatTensor:$k,
                       Sharc_FloatTensor:$v, Sharc_FloatTensor:$k_cache,
                       Sharc_FloatTensor:$v_cache, Sharc_IdTensor:$positions,
                       I64Attr:$head_dim, F64Attr:$theta);
  let results = (outs Sharc_FloatTensor:$out, Sharc_FloatTensor:$new_k_cache,
                      Sharc_FloatTensor:$new_v_cache);
}

#endif // SHARC_DECODE_OPS_TD
