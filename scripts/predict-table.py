#!/usr/bin/env python3
"""Prints docs/benchmarks.md's table of compiler predictions for MiniMind
at the throughput point on 1 to 8 GPUs: per rank, the planned memory of
`sharc compile --report=json` and the step the cost model simulates on the
default machine (docs/cost-model.md), and tokens/s per GPU from it.

usage: scripts/predict-table.py [--sharc build/bin/sharc]

Layouts the compiler rejects get a row with its error. MiniMind's 4 KV
heads do not split 8 ways, so the tp=8 rows use the same model with 8 KV
heads (written to a temporary file), as the table says.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "models", "bench-seq2048.run.yaml")
MODEL = os.path.join(ROOT, "models", "minimind.yaml")
TP_MODES = ["tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"]
MIB = 1024.0 * 1024.0
TOKENS = 2048 * 4  # seq_len x global batch of the run file


def layouts(kv8):
    yield "dense", MODEL, ["--mode", "dense"]
    for dp in (2, 4, 8):
        yield f"ddp dp={dp}", MODEL, ["--mode", "ddp", "--dp", str(dp)]
    for tp, dp in ((2, 1), (4, 1), (4, 2)):
        for mode in TP_MODES:
            flags = ["--mode", mode, "--tp", str(tp)]
            name = f"{mode} tp={tp}"
            if dp > 1:
                flags += ["--dp", str(dp)]
                name += f" dp={dp}"
            yield name, MODEL, flags
    for mode in TP_MODES:
        yield f"{mode} tp=8 (8 KV heads)", kv8, ["--mode", mode, "--tp", "8"]


def row(sharc, name, model, flags):
    cmd = [sharc, "compile", model, "--run", RUN, "--report=json"] + flags
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as error:
        sys.exit(f"predict-table: error: {sharc}: {error.strerror}")
    if done.returncode != 0:
        error = done.stderr.strip().splitlines()[-1] if done.stderr else "?"
        error = error.replace(ROOT + "/", "")
        return f"| {name} | | rejected: `{error}` |" + " |" * 7
    r = json.loads(done.stdout)
    ranks = r["world_size"]
    step = r["predicted_step_seconds"]
    sent = sum(r.get("comm_bytes_by_axis", {}).values())
    cells = [name, str(ranks),
             f"{(r['parameter_bytes'] + r['optimizer_bytes']) / MIB:.1f}",
             f"{r['gradient_bytes'] / MIB:.1f}",
             f"{r['activation_peak_bytes'] / MIB:.1f}",
             f"{r['total_bytes'] / MIB:.1f}",
             f"{r['workspace_bytes'] / MIB:.1f}",
             f"{sent / MIB:.1f}",
             f"{step * 1e3:.3f} ms",
             f"{TOKENS / step / ranks / 1e3:.0f}k"]
    return "| " + " | ".join(cells) + " |"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sharc", default=os.path.join(ROOT, "build", "bin",
                                                        "sharc"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        kv8 = os.path.join(tmp, "minimind-kv8.yaml")
        with open(MODEL) as src, open(kv8, "w") as dst:
            dst.write(src.read().replace("num_key_value_heads: 4",
                                         "num_key_value_heads: 8"))
        print("| layout | ranks | params + AdamW | gradients | activations "
              "| total / rank | + GPU workspace | sent / rank "
              "| predicted step | predicted tokens/s per GPU |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, model, flags in layouts(kv8):
            print(row(args.sharc, name, model, flags), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
