// A one-block dense program with attention: embedding, a norm, q/k/v
// projections, rope on q and k, causal GQA attention (8 query heads, 4 KV
// heads, head_dim 2), the row-parallel o projection, the residual add, the
// head and the loss.
module attributes {sharc.model = {seq_len = 8 : i64, batch = 2 : i64,
    vocab_size = 16 : i64, hidden_size = 16 : i64,
    num_attention_heads = 8 : i64, num_key_value_heads = 4 : i64,
    head_dim = 2 : i64, intermediate_size = 16 : i64}} {
  func.func @train_step(
      %embed: tensor<16x16xf32> {sharc.param = "embed", sharc.role = "embedding"},
      %tokens: tensor<8x2xi32> {sharc.input = "tokens"},
      %labels: tensor<8x2xi32> {sharc.input = "labels"},
      %norm: tensor<16xf32> {sharc.param = "norm", sharc.role = "norm"},
      %wq: tensor<16x16xf32> {sharc.param = "q", sharc.role = "column"},
      %wk: tensor<8x16xf32> {sharc.param = "k", sharc.role = "column"},
      %wv: tensor<8x16xf32> {sharc.param = "v", sharc.role = "column"},
      %wo: tensor<16x16xf32> {sharc.param = "o", sharc.role = "row"},
      %head: tensor<16x16xf32> {sharc.param = "head", sharc.role = "lm_head"})
      -> (tensor<f32> {sharc.output = "loss"}) {
    %h = sharc.embedding %embed, %tokens
        : (tensor<16x16xf32>, tensor<8x2xi32>) -> tensor<8x2x16xf32>
    %x = sharc.rms_norm %h, %norm {eps = 1.0e-6 : f64}
        : (tensor<8x2x16xf32>, tensor<16xf32>) -> tensor<8x2x16xf32>
    %q = sharc.matmul %x, %wq
        : (tensor<8x2x16xf32>, tensor<16x16xf32>) -> tensor<8x2x16xf32>
    %k = sharc.matmul %x, %wk
        : (tensor<8x2x16xf32>, tensor<8x16xf32>) -> tensor<8x2x8xf32>
    %v = sharc.matmul %x, %wv
        : (tensor<8x2x16xf32>, tensor<8x16xf32>) -> tensor<8x2x8xf32>
    %qr = sharc.rope %q {head_dim = 2 : i64, theta = 1.0e4 : f64}
        : (tensor<8x2x16xf32>) -> tensor<8x2x16xf32>
    %kr = sharc.rope %k {head_dim = 2 : i64, theta = 1.0e4 : f64}
        : (tensor<8x2x8xf32>) -> tensor<8x2x8xf32>
    %a, %lse = sharc.attention %qr, %kr, %v {head_dim = 2 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2x8xf32>, tensor<8x2x8xf32>)
        -> (tensor<8x2x16xf32>, tensor<2x8x8xf32>)
    %o = sharc.matmul %a, %wo
        : (tensor<8x2x16xf32>, tensor<16x16xf32>) -> tensor<8x2x16xf32>
    %r = sharc.add %h, %o
        : (tensor<8x2x16xf32>, tensor<8x2x16xf32>) -> tensor<8x2x16xf32>
    %logits = sharc.matmul %r, %head
        : (tensor<8x2x16xf32>, tensor<16x16xf32>) -> tensor<8x2x16xf32>
    %loss = sharc.cross_entropy %logits, %labels {valid_vocab = 16 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
