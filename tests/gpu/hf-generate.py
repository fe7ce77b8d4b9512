#!/usr/bin/env python3
"""Greedy generation by Hugging Face's Qwen3 from a sharc checkpoint, against
sharc-run --generate's.

    python3 tests/gpu/hf-generate.py CKPT --prompt 4,17,9 --expect "12 40 ..."

Loads the checkpoint's parameters into Qwen3ForCausalLM (MiniMind's sizes by
default; sharc's names are Qwen3's without "model.", docs/huggingface.md),
in f32 on the GPU with TF32 off, and continues the prompt greedily with
transformers' generate() (its own key/value cache, beside sharc's decode
plan's or its window of full forward passes). With --expect, the ids sharc-run printed for its sample 0
at temperature 0: exit 1 at the first that differs, unless the two
candidates' logits are within --tie of each other (fp32 noise can flip a
near tie; the script then says so and compares no further). Prints
"hf-generate: N of N ids agree" when they do. With --time, also the
milliseconds a token after the first of generate() and the time to the
first, which holds the prompt's forward (sharc-run's measures: after
warm-up runs, one run of N tokens whose streamer stamps each token as it
reaches the host). --dtype bfloat16 runs the model in bf16 (timing
only: its ids are not compared); --compile is what a PyTorch user runs
for speed, a static cache and torch.compile(mode="reduce-overhead") of
the forward (CUDA graphs), timed after three warm-up runs.
"""

import argparse
import sys

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("checkpoint")
    p.add_argument("--prompt", required=True, help="comma-separated ids")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--expect", help="sharc-run's sample 0, space-separated")
    p.add_argument("--tie", type=float, default=1e-3,
                   help="logits closer than this are a tie")
    p.add_argument("--time", action="store_true",
                   help="print generate()'s ms a token after the first")
    p.add_argument("--dtype", default="float32",
                   choices=["float32", "bfloat16"])
    p.add_argument("--compile", action="store_true",
                   help="static cache + torch.compile of the forward")
    for name, val in [("hidden", 768), ("layers", 8), ("heads", 8),
                      ("kv-heads", 4), ("head-dim", 96),
                      ("intermediate", 2432), ("vocab", 6400)]:
        p.add_argument("--" + name, type=int, default=val)
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from safetensors.torch import load_file
    from transformers import Qwen3Config, Qwen3ForCausalLM
    weights = load_file(a.checkpoint)
    tied = "lm_head.weight" not in weights
    cfg = Qwen3Config(hidden_size=a.hidden, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads,
                      num_key_value_heads=a.kv_heads, head_dim=a.head_dim,
                      intermediate_size=a.intermediate, vocab_size=a.vocab,
                      max_position_embeddings=32768, rope_theta=1e6,
                      rms_norm_eps=1e-6, tie_word_embeddings=tied,
                      attention_bias=False, attn_implementation="sdpa")
    model = Qwen3ForCausalLM(cfg)
    state = {}
    for name, value in weights.items():
        if name.endswith((".exp_avg", ".exp_avg_sq")):
            continue
        state[name if name.startswith("lm_head.") else "model." + name] = \
            value.float()
    missing, unexpected = model.load_state_dict(state, strict=False)
    if tied:
        missing = [m for m in missing if m != "lm_head.weight"]
    if missing or unexpected:
        sys.exit(f"hf-generate: missing {missing}, unexpected {unexpected}")
    model = model.to("cuda", getattr(torch, a.dtype)).eval()
    if a.compile:
        model.generation_config.cache_implementation = "static"
        model.forward = torch.compile(model.forward, mode="reduce-overhead",
                                      fullgraph=True)
    prompt = [int(x) for x in a.prompt.split(",")]

    def generate(streamer=None):
        with torch.no_grad():
            return model.generate(torch.tensor([prompt], device="cuda"),
                                  max_new_tokens=a.max_new_tokens,
                                  do_sample=False, pad_token_id=0,
                                  eos_token_id=None, streamer=streamer)
    out = generate()
    ids = out[0, len(prompt):].tolist()
    print("hf:", " ".join(map(str, ids)))
    if a.time:
        import time

        class Stamps:
            """generate()'s streamer: put() gets the prompt, then each new
            token once it is on the host."""

            def __init__(self):
                self.times = []

            def put(self, value):
                self.times.append(time.perf_counter())

            def end(self):
                pass
        for _ in range(3 if a.compile else 1):
            generate()
        stamps = Stamps()
        torch.cuda.synchronize()
        start = time.perf_counter()
        generate(stamps)
        whole = time.perf_counter() - start
        # times[0]: the prompt; times[1]: the first new token.
        after = (stamps.times[-1] - stamps.times[1]) / (len(stamps.times) - 2)
        how = ("static cache, torch.compile reduce-overhead" if a.compile
               else "dynamic cache, eager")
        first = stamps.times[1] - start
        print(f"hf-generate: {after * 1e3:.2f} ms a token after the first "
              f"({first * 1e3:.1f} ms to the first; {a.max_new_tokens} "
              f"tokens, {whole:.3f} s; {a.dtype}, {how})")
    if a.expect is None or a.dtype != "float32":
        return
    expected = [int(x) for x in a.expect.split()]
    for k, (ours, theirs) in enumerate(zip(expected, ids)):
        if ours == theirs:
            continue
        with torch.no_grad():
            context = torch.tensor([prompt + ids[:k]], device="cuda")
            logits = model(context).logits[0, -1].float()
        gap = (logits[theirs] - logits[ours]).item()
        print(f"hf-generate: id {k} differs: sharc {ours}, hf {theirs}; "
              f"hf's logits differ by {gap:.3g} there")
        if gap > a.tie:
            sys.exit(1)
        print(f"hf-generate: a near tie (within {a.tie}); the first {k} ids "
              "agree")
        return
    if len(expected) != len(ids):
        sys.exit(f"hf-generate: {len(expected)} ids against hf's {len(ids)}")
    print(f"hf-generate: {len(ids)} of {len(ids)} ids agree")


if __name__ == "__main__":
    main()
