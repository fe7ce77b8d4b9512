#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on sharc-attention-bench's shapes.

Causal GQA attention, bf16, forward and forward+backward timed with CUDA
events over the same iterations, for each SDPA backend PyTorch has on the
card (cuDNN, FlashAttention-2). FLOPs as sharc-attention-bench counts them:
the forward 4*B*H*S^2*D over the causal half, the backward 2.5x that.

    python3 tests/gpu/attention-peer.py [--warmup 5] [--iters 20]
"""
import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

SHAPES = [(2048, 4, 8, 4, 96), (8192, 1, 8, 4, 96), (4096, 4, 32, 8, 128),
          (4096, 4, 16, 4, 128)]
BACKENDS = [("torch cuDNN", SDPBackend.CUDNN_ATTENTION),
            ("torch flash", SDPBackend.FLASH_ATTENTION)]


def time_ms(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / iters


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(7)
    for s, b, h, hkv, d in SHAPES:
        q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True)
        k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True)
        v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True)
        dout = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        fwd_flops = 2.0 * b * h * s * s * d
        for name, backend in BACKENDS:
            try:
                with sdpa_kernel([backend]):
                    def forward():
                        with torch.no_grad():
                            F.scaled_dot_product_attention(
                                q, k, v, is_causal=True, enable_gqa=True)

                    def both():
                        out = F.scaled_dot_product_attention(
                            q, k, v, is_causal=True, enable_gqa=True)
                        out.backward(dout)

                    fwd = time_ms(forward, args.warmup, args.iters)
                    total = time_ms(both, args.warmup, args.iters)
            except RuntimeError as error:
                print(f"S={s} B={b} H={h}/{hkv} D={d} {name}: not run "
                      f"({str(error).splitlines()[0]})")
                continue
            print(f"S={s:<5} B={b} H={h}/{hkv} D={d:<3} {name:<22} "
                  f"fwd {fwd:7.3f} ms {fwd_flops / fwd / 1e9:6.1f} TFLOP/s  "
                  f"bwd {total - fwd:7.3f} ms  fwd+bwd "
                  f"{3.5 * fwd_flops / total / 1e9:6.1f} TFLOP/s")


if __name__ == "__main__":
    main()
