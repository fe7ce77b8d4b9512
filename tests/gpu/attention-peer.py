#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on sharc-attention-bench's shapes.

Causal GQA attention, bf16, forward and forward+backward timed with CUDA
events over the same iterations, for each SDPA backend PyTorch has on the
card (cuDNN, FlashAttention-2). FLOPs as sharc-attention-bench counts them:
the forward 4*B*H*S^2*D over the causal half, the backward 2.5x that.

    python3 tests/gpu/attention-peer.py [--warmup 5] [--iters 20]
        [--cp N[,contiguous]]

--cp N times context parallelism's K/V all-gather attention per rank, as
sharc-attention-bench --cp does: the rank's S/N queries (the balanced
split's two chunks, or one contiguous block) against all S keys, in two
ways a PyTorch user would write it: the original system's (one SDPA call
with a boolean mask over global positions, PyTorch's dispatch choosing
the kernel) and one call per run of query positions over the prefix of
keys it sees with a bottom-right causal bias (causal_lower_right; the
autograd sums the runs' dk and dv).
"""
import argparse

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right
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


def query_runs(s, ranks, rank, balanced):
    """(first position, rows) of each run of the rank's queries."""
    if not balanced:
        rows = s // ranks
        return [(rank * rows, rows)]
    chunk = s // (2 * ranks)
    return [(rank * chunk, chunk), ((2 * ranks - 1 - rank) * chunk, chunk)]


def report(s, b, h, hkv, d, name, fwd, total, fwd_flops):
    print(f"S={s:<5} B={b} H={h}/{hkv} D={d:<3} {name:<22} "
          f"fwd {fwd:7.3f} ms {fwd_flops / fwd / 1e9:6.1f} TFLOP/s  "
          f"bwd {total - fwd:7.3f} ms  fwd+bwd "
          f"{3.5 * fwd_flops / total / 1e9:6.1f} TFLOP/s")


def measure_blocks(shape, ranks, balanced, warmup, iters):
    s, b, h, hkv, d = shape
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    for rank in range(ranks):
        runs = query_runs(s, ranks, rank, balanced)
        rows = sum(n for _, n in runs)
        positions = torch.cat([torch.arange(p, p + n, device="cuda")
                               for p, n in runs])
        q = torch.randn(b, h, rows, d, device="cuda", dtype=torch.bfloat16,
                        requires_grad=True)
        dout = torch.randn(b, h, rows, d, device="cuda", dtype=torch.bfloat16)
        pairs = float((positions + 1).sum())
        fwd_flops = 4.0 * b * h * pairs * d
        mask = positions[:, None] >= torch.arange(s, device="cuda")[None, :]

        def masked():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                  enable_gqa=True)

        def lower_right():
            outs, row = [], 0
            for first, n in runs:
                keys = first + n
                outs.append(F.scaled_dot_product_attention(
                    q[:, :, row:row + n], k[:, :, :keys], v[:, :, :keys],
                    attn_mask=causal_lower_right(n, keys), enable_gqa=True))
                row += n
            return torch.cat(outs, dim=2)

        for name, call in (("torch bool mask", masked),
                           ("torch lower-right", lower_right)):
            def forward():
                with torch.no_grad():
                    call()

            def both():
                call().backward(dout)

            try:
                fwd = time_ms(forward, warmup, iters)
                total = time_ms(both, warmup, iters)
            except RuntimeError as error:
                print(f"S={s} B={b} H={h}/{hkv} D={d} rank {rank}/{ranks} "
                      f"{name}: not run ({str(error).splitlines()[0]})")
                continue
            report(s, b, h, hkv, d, f"rank {rank}/{ranks} {name}", fwd, total,
                   fwd_flops)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--shape", action="append",
                        help="S,B,H,KV,D (replaces the default shapes)")
    parser.add_argument("--cp", help="N or N,contiguous")
    args = parser.parse_args()
    torch.manual_seed(7)
    shapes = ([tuple(int(x) for x in text.split(",")) for text in args.shape]
              if args.shape else SHAPES)
    if args.cp:
        ranks, _, split = args.cp.partition(",")
        for shape in shapes:
            measure_blocks(shape, int(ranks), split != "contiguous",
                           args.warmup, args.iters)
        return
    for s, b, h, hkv, d in shapes:
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
            report(s, b, h, hkv, d, name, fwd, total, fwd_flops)


if __name__ == "__main__":
    main()
