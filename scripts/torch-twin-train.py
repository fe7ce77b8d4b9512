#!/usr/bin/env python3
"""Train Hugging Face's Qwen3 as sharc-run trains the same plan: a PyTorch
twin of a sharc training run, to compare loss curves and speed side by side.

usage: scripts/torch-twin-train.py [--init CKPT] --data TRAIN.tokens
           [--val-data VAL.tokens] --seq S --batch B --steps N [options]

It starts from the weights of a sharc checkpoint (`sharc-run PLAN --steps 0
--save CKPT` writes the step-0 weights; the names are Qwen3's,
docs/huggingface.md), or without --init from Hugging Face's own draws of
the same distribution (for models whose checkpoint is slow to move), reads the token files in the windows sharc-run reads
(docs/data.md: step s reads windows (s-1)B .. sB-1, window w at token
w*S mod count, wrapping; --shuffle reads window (w*a) mod N, a the integer
nearest 0.618 N coprime to N, as executor/DataLoader.cpp), and applies
AdamW with the run file's schedule (docs/plan-format.md: t/warmup, then
min + (1 - min)(1 + cos(pi p))/2) and clipping (clip_grad_norm_, the rule
sharc copies). The loss is mean cross-entropy of tokens[:, 1:] on
logits[:, :-1], as sharc's. --dtype bf16-mixed keeps fp32 weights and
moments and computes under torch.autocast(bfloat16), what a PyTorch user
does for sharc's bf16-mixed; bfloat16 trains pure bf16 weights.

The log is sharc-run --log's CSV (step, kind, loss, lr, grad_norm,
tokens_per_s, step_s, elapsed_s, val_loss, val_ppl), so
scripts/plot-training.py draws both runs on one chart. Needs torch,
transformers and safetensors (the GPU machine's python3 has them).
"""
import argparse
import csv
import math
import struct
import time

import numpy as np
import torch


def fail(message):
    raise SystemExit(f"torch-twin-train: error: {message}")


def read_tokens(path):
    """A token file's ids (docs/data.md), or an error naming the file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        fail(f"{path}: {error.strerror}")
    if data[:8] != b"SHARCTOK":  # the raw int32 format before the header
        if not data or len(data) % 4:
            fail(f"{path}: not a token file (no header, not int32 ids)")
        return np.frombuffer(data, dtype="<i4").astype(np.int64)
    if len(data) < 32:
        fail(f"{path}: the header is cut short")
    _, width, _, count = struct.unpack_from("<IIQQ", data, 8)
    if width not in (2, 4) or count == 0 or len(data) != 32 + width * count:
        fail(f"{path}: the header says {count} ids of {width} bytes, "
             f"the file holds {len(data) - 32} bytes after it")
    dtype = {2: "<u2", 4: "<u4"}[width]
    return np.frombuffer(data, dtype=dtype, offset=32,
                         count=count).astype(np.int64)


class Windows:
    """sharc-run's batches of a token file (executor/DataLoader.cpp)."""

    def __init__(self, tokens, seq, batch, shuffle):
        self.tokens, self.seq, self.batch = tokens, seq, batch
        self.count = max(len(tokens) // seq, 1)
        self.stride = 0
        if shuffle and self.count > 1:
            golden = int(0.6180339887498949 * self.count + 0.5)
            for delta in range(self.count):
                found = [c for c in (golden - delta, golden + delta)
                         if 1 <= c < self.count and math.gcd(c, self.count) == 1]
                if found:
                    self.stride = found[0]
                    break

    def batch_at(self, first_window):
        n = len(self.tokens)
        rows = []
        for b in range(self.batch):
            w = first_window + b
            if self.stride:
                w = (w % self.count) * self.stride % self.count
            start = (w % n) * (self.seq % n) % n
            rows.append(np.take(self.tokens, np.arange(start, start + self.seq) % n))
        return torch.from_numpy(np.stack(rows))


def lr_factor(t, warmup, total, min_factor, decay):
    if warmup > 0 and t <= warmup:
        return t / warmup
    if decay == "constant":
        return 1.0
    p = min(max((t - warmup) / (total - warmup), 0.0), 1.0)
    if decay == "linear":
        return 1.0 - (1.0 - min_factor) * p
    return min_factor + (1.0 - min_factor) * (1.0 + math.cos(math.pi * p)) / 2


def build_model(a, dev):
    from safetensors.torch import load_file
    from transformers import Qwen3Config, Qwen3ForCausalLM
    cfg = Qwen3Config(hidden_size=a.hidden, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                      head_dim=a.head_dim, intermediate_size=a.intermediate,
                      vocab_size=a.vocab, max_position_embeddings=max(a.seq, 32),
                      rope_theta=a.rope_theta, rms_norm_eps=1e-6,
                      tie_word_embeddings=False, attention_bias=False,
                      attn_implementation="sdpa", use_cache=False)
    if not a.init:
        # Hugging Face's own initialisation, on the GPU: normal(0, 0.02)
        # weights and norms at one, sharc's distribution but not its draws.
        with torch.device(dev):
            model = Qwen3ForCausalLM(cfg)
        return model.to(torch.bfloat16) if a.dtype == "bfloat16" else model
    try:
        weights = load_file(a.init)
    except (OSError, ValueError, RuntimeError) as error:
        fail(f"{a.init}: {error}")
    model = Qwen3ForCausalLM(cfg)
    state = {}
    for name, value in weights.items():
        if name.endswith((".exp_avg", ".exp_avg_sq", ".master")):
            continue  # optimizer state: the twin starts its own at step 1
        state[name if name.startswith("lm_head.") else "model." + name] = value
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        fail(f"{a.init}: missing {missing}, unexpected {unexpected}")
    model = model.to(dev)
    return model.to(torch.bfloat16) if a.dtype == "bfloat16" else model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--init", help="sharc's step-0 checkpoint (without it, "
                   "Hugging Face's own draws of the same distribution)")
    p.add_argument("--data", required=True)
    p.add_argument("--val-data")
    p.add_argument("--log", required=True)
    for name, val in [("seq", 512), ("batch", 16), ("steps", 600), ("warmup", 30),
                      ("total", 600), ("eval-every", 50), ("eval-batches", 16),
                      ("hidden", 768), ("layers", 8), ("heads", 8), ("kv-heads", 4),
                      ("head-dim", 96), ("intermediate", 2432), ("vocab", 6400)]:
        p.add_argument("--" + name, type=int, default=val)
    for name, val in [("lr", 1e-3), ("min-lr", 1e-4), ("beta1", 0.9), ("beta2", 0.999),
                      ("eps", 1e-8), ("weight-decay", 0.01), ("clip", 1.0),
                      ("rope-theta", 1e6)]:
        p.add_argument("--" + name, type=float, default=val)
    p.add_argument("--decay", choices=["constant", "linear", "cosine"], default="cosine")
    p.add_argument("--dtype", choices=["bf16-mixed", "bfloat16"], default="bf16-mixed")
    p.add_argument("--shuffle", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--checkpointing", action="store_true",
                   help="re-run each layer's forward in the backward "
                        "(gradient_checkpointing_enable): what a PyTorch user "
                        "does where the activations do not fit")
    a = p.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = build_model(a, dev)
    if a.checkpointing:
        model.gradient_checkpointing_enable()
    fwd = torch.compile(model) if a.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(a.beta1, a.beta2),
                            eps=a.eps, weight_decay=a.weight_decay, fused=True)
    train = Windows(read_tokens(a.data), a.seq, a.batch, a.shuffle)
    val = Windows(read_tokens(a.val_data), a.seq, a.batch, False) if a.val_data else None
    autocast = torch.autocast("cuda", dtype=torch.bfloat16,
                              enabled=a.dtype == "bf16-mixed")

    def loss_of(tokens):
        with autocast:
            return fwd(input_ids=tokens, labels=tokens).loss

    log = open(a.log, "w", newline="")
    out = csv.writer(log)
    out.writerow(["step", "kind", "loss", "lr", "grad_norm", "tokens_per_s",
                  "step_s", "elapsed_s", "val_loss", "val_ppl"])
    began = time.perf_counter()

    def evaluate(step):
        if not val:
            return
        with torch.no_grad():
            losses = [loss_of(val.batch_at(i * a.batch).to(dev)).item()
                      for i in range(a.eval_batches)]
        mean = sum(losses) / len(losses)
        out.writerow([step, "val", "", "", "", "", "", f"{time.perf_counter() - began:.6g}",
                      repr(mean), f"{math.exp(mean):.6g}"])
        log.flush()
        print(f"step {step} val loss {mean:.4f} ppl {math.exp(mean):.2f}", flush=True)

    evaluate(0)
    min_factor = a.min_lr / a.lr
    for t in range(1, a.steps + 1):
        tokens = train.batch_at((t - 1) * a.batch).to(dev, non_blocking=True)
        torch.cuda.synchronize()
        start = time.perf_counter()
        lr = a.lr * lr_factor(t, a.warmup, a.total, min_factor, a.decay)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss = loss_of(tokens)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(),
                                              a.clip if a.clip > 0 else float("inf"))
        opt.step()
        loss_value, norm_value = loss.item(), norm.item()  # both synchronize
        step_s = time.perf_counter() - start
        out.writerow([t, "train", repr(loss_value), repr(lr), repr(norm_value),
                      f"{a.batch * a.seq / step_s:.6g}", repr(step_s),
                      f"{time.perf_counter() - began:.6g}", "", ""])
        log.flush()
        if t % 50 == 0 or t == 1:
            print(f"step {t} loss {loss_value:.4f} lr {lr:.3g} grad_norm {norm_value:.3f} "
                  f"{a.batch * a.seq / step_s:,.0f} tok/s", flush=True)
        if a.eval_every and t % a.eval_every == 0 and t != a.steps:
            evaluate(t)
    evaluate(a.steps)
    print(f"peak memory {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB "
          f"(tensors)", flush=True)


if __name__ == "__main__":
    main()
