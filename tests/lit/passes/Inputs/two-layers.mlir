// A two-layer dense program for the pipeline passes: embedding, two
// residual blocks (a norm and one projection each), the head and the loss.
module attributes {sharc.model = {seq_len = 8 : i64, batch = 2 : i64,
    vocab_size = 16 : i64, hidden_size = 8 : i64, num_hidden_layers = 2 : i64,
    num_attention_heads = 2 : i64, num_key_value_heads = 2 : i64,
    head_dim = 4 : i64, intermediate_size = 8 : i64}} {
  func.func @train_step(
      %embed: tensor<16x8xf32> {sharc.param = "embed_tokens.weight", sharc.role = "embedding"},
      %tokens: tensor<8x2xi32> {sharc.input = "tokens"},
      %labels: tensor<8x2xi32> {sharc.input = "labels"},
      %n0: tensor<8xf32> {sharc.param = "layers.0.norm", sharc.role = "norm"},
      %w0: tensor<8x8xf32> {sharc.param = "layers.0.w", sharc.role = "row"},
      %n1: tensor<8xf32> {sharc.param = "layers.1.norm", sharc.role = "norm"},
      %w1: tensor<8x8xf32> {sharc.param = "layers.1.w", sharc.role = "row"},
      %head: tensor<16x8xf32> {sharc.param = "lm_head", sharc.role = "lm_head"})
      -> (tensor<f32> {sharc.output = "loss"}) {
    %h = sharc.embedding %embed, %tokens
        : (tensor<16x8xf32>, tensor<8x2xi32>) -> tensor<8x2x8xf32>
    %x0 = sharc.rms_norm %h, %n0 {eps = 1.0e-6 : f64}
        : (tensor<8x2x8xf32>, tensor<8xf32>) -> tensor<8x2x8xf32>
    %y0 = sharc.matmul %x0, %w0
        : (tensor<8x2x8xf32>, tensor<8x8xf32>) -> tensor<8x2x8xf32>
    %h0 = sharc.add %h, %y0
        : (tensor<8x2x8xf32>, tensor<8x2x8xf32>) -> tensor<8x2x8xf32>
    %x1 = sharc.rms_norm %h0, %n1 {eps = 1.0e-6 : f64}
        : (tensor<8x2x8xf32>, tensor<8xf32>) -> tensor<8x2x8xf32>
    %y1 = sharc.matmul %x1, %w1
        : (tensor<8x2x8xf32>, tensor<8x8xf32>) -> tensor<8x2x8xf32>
    %h1 = sharc.add %h0, %y1
        : (tensor<8x2x8xf32>, tensor<8x2x8xf32>) -> tensor<8x2x8xf32>
    %logits = sharc.matmul %h1, %head
        : (tensor<8x2x8xf32>, tensor<16x8xf32>) -> tensor<8x2x16xf32>
    %loss = sharc.cross_entropy %logits, %labels {valid_vocab = 16 : i64}
        : (tensor<8x2x16xf32>, tensor<8x2xi32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}
