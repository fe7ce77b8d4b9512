#!/usr/bin/env python3
# Text from a trained sharc checkpoint: encodes a prompt, compiles a plan of
# the model that emits its logits, and has `sharc-run --generate` continue
# the prompt, printing the text as each token comes.
#
#   .venv/bin/python scripts/generate.py out/train/model.safetensors \
#       --tokenizer out/kjv-6400/tokenizer.json --prompt "And God said"
#
# The plan is the dense model (any layout's checkpoint loads on it, since a
# checkpoint holds global tensors) in --dtype (f32; on a GPU a decode step
# takes about a millisecond in either, docs/training.md) with one batch
# row per --samples, run on --backend (auto: the GPU where there is one).
# By default it is a decode plan (`sharc compile --decode`): each token is
# one position through the layers' key/value caches, which hold --seq-len
# positions (the prompt and the new tokens unless given), the prompt going
# in up to 1024 positions a pass first (`--prefill-rows`). With --no-cache
# it is the training forward instead, each new token one pass over a
# window of --seq-len tokens (64 unless given) that slides once full; the
# two draw the same tokens. --prompt given several times continues each
# (--samples rows apiece) side by side in one batch. A row ends at the
# tokenizer's <|endoftext|> (which prepare-data.py puts between documents)
# unless --no-stop. Tokenising stays in
# Python, as for the training data (docs/data.md).
# Needs the `tokenizers` package (scripts/setup.sh installs it in .venv).
import argparse
import os
import subprocess
import sys
import tempfile


def fail(message):
    print(f"generate: error: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(
        description="Continue a prompt with a trained sharc checkpoint.")
    parser.add_argument("checkpoint", help="a sharc-run --save checkpoint")
    parser.add_argument("--tokenizer", required=True,
                        help="the tokenizer.json the training data was made "
                        "with (prepare-data.py)")
    parser.add_argument("--model", default=os.path.join(root, "models",
                                                        "minimind.yaml"))
    parser.add_argument("--prompt", action="append",
                        help="the text to continue (\"In the beginning\" "
                        "unless given); several: each in its own rows")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--samples", type=int, default=1,
                        help="continuations drawn side by side")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="positions the model sees: the key/value "
                        "cache's (the prompt and the new tokens unless "
                        "given), or with --no-cache the window's (64)")
    parser.add_argument("--no-cache", action="store_true",
                        help="no key/value cache: a forward pass of the "
                        "whole window a token")
    parser.add_argument("--temperature", default="0.8",
                        help="0 is greedy")
    parser.add_argument("--top-k", default="40")
    parser.add_argument("--top-p", default="1",
                        help="nucleus sampling: draw among the fewest "
                        "highest tokens whose probability reaches it")
    parser.add_argument("--seed", default="42")
    parser.add_argument("--no-stop", action="store_true",
                        help="go on past <|endoftext|>")
    parser.add_argument("--dtype", default="float32",
                        choices=["float32", "bfloat16"])
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--build", default=os.environ.get(
        "BUILD_DIR", os.path.join(root, "build")))
    args = parser.parse_args()
    if args.samples < 1 or (args.seq_len is not None and args.seq_len < 1):
        fail("--samples and --seq-len must be at least 1")
    for path in (args.checkpoint, args.tokenizer, args.model):
        if not os.path.isfile(path):
            fail(f"{path}: no such file")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail("the tokenizers package is missing (scripts/setup.sh puts it "
             "in .venv; run this script with .venv/bin/python)")
    tokenizer = Tokenizer.from_file(args.tokenizer)
    texts = args.prompt or ["In the beginning"]
    prompts = [tokenizer.encode(text).ids for text in texts]
    if not all(prompts):
        fail("a prompt encodes to no tokens")
    # Each prompt's --samples rows, one after another.
    rows = [prompt for prompt in prompts for _ in range(args.samples)]
    seq_len = args.seq_len
    if seq_len is None:
        seq_len = 64 if args.no_cache else \
            max(map(len, prompts)) + args.max_new_tokens

    # The positions every prompt fills before its last id go in a pass of
    # that many rows (at most 1024) rather than a position a step: a pass
    # of 64 rows is launch-bound on a GPU, so wider passes reach the first
    # new token 7x sooner after 3000 ids in bf16 (docs/training.md,
    # "Prefill through cuDNN").
    filled = min(map(len, prompts)) - 1
    prefill = ["--prefill-rows", str(min(filled, 1024))] if filled > 0 else []

    with tempfile.TemporaryDirectory(prefix="sharc-generate-") as scratch:
        run_file = os.path.join(scratch, "generate.run.yaml")
        with open(run_file, "w") as f:
            f.write(f"run:\n  seq_len: {seq_len}\n"
                    f"  micro_batch_size: {len(rows)}\n"
                    f"  dtype: {args.dtype}\n")
        plan = os.path.join(scratch, "generate.plan")
        compiled = subprocess.run(
            [os.path.join(args.build, "bin", "sharc"), "compile", args.model,
             "--run", run_file] +
            (["--emit-logits", "--no-optimizer"] if args.no_cache
             else ["--decode"] + prefill) + ["-o", plan],
            stdout=subprocess.DEVNULL)
        if compiled.returncode != 0:
            sys.exit(compiled.returncode)
        command = [os.path.join(args.build, "bin", "sharc-run"), plan,
                   "--backend", args.backend, "--load", args.checkpoint,
                   "--max-new-tokens", str(args.max_new_tokens),
                   "--temperature", args.temperature, "--top-k", args.top_k,
                   "--top-p", args.top_p,
                   "--seed", args.seed, "--quiet"]
        end = tokenizer.token_to_id("<|endoftext|>")
        if end is not None and not args.no_stop:
            command += ["--stop-id", str(end)]
        # One prompt: every row continues it; several: one for each row.
        for row in rows if len(prompts) > 1 else prompts:
            command += ["--generate", ",".join(map(str, row))]
        samples = [list(row) for row in rows]
        shown = tokenizer.decode(rows[0])
        # One sample: its text as it comes; several: each at the end.
        if len(rows) == 1:
            print(shown, end="", flush=True)
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) \
                as runner:
            for line in runner.stdout:
                if not line.startswith("token "):
                    continue
                ids = [int(word) for word in line.split(":", 1)[1].split()]
                for sample, new in zip(samples, ids):
                    sample.append(new)
                if len(rows) == 1:
                    text = tokenizer.decode(samples[0])
                    # A byte-level BPE may end mid-character: wait for it.
                    if text.startswith(shown) and not text.endswith("\ufffd"):
                        print(text[len(shown):], end="", flush=True)
                        shown = text
        if runner.returncode != 0:
            print(file=sys.stderr)
            sys.exit(runner.returncode)
    if len(rows) == 1:
        print(tokenizer.decode(samples[0])[len(shown):])
    else:
        for index, sample in enumerate(samples):
            print(f"--- sample {index} ---")
            print(tokenizer.decode(sample))


if __name__ == "__main__":
    main()
