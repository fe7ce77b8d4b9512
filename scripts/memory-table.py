#!/usr/bin/env python3
# Predicted per-rank memory of the original benchmark's configurations, from `sharc compile --report=json`,
# beside the original's measured peaks (2x RTX 4090D, shared/seeds/000: fixed_per_rank, bf16, mbs 4).
import json, os, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARC = os.environ.get("SHARC", os.path.join(ROOT, "build", "bin", "sharc"))
MODES = ["ddp", "tp", "tp_sp", "tp_sp_async", "tp_vp", "tp_sp_async_vp"]
# Peak MiB measured by the original (seed-system.md section 3.9).
MEASURED_LAYERS = {2: [1452.19, 1097.94, 1052.08, 956.73, 867.23, 719.59],
                   4: [2350.91, 1658.71, 1588.95, 1398.82, 1427.88, 1163.93],
                   8: [4148.79, 2781.92, 2665.97, 2282.97, 2554.47, 2048.08],
                   16: [7745.10, 5026.93, 4824.38, 4056.38, 4796.54, 3816.55],
                   32: [14937.42, 9521.13, 9136.96, 7600.27, 9291.74, 7364.60]}
MEASURED_SEQ = {1024: [2378.46, 1509.15, 1447.62, 1260.08, 1385.84, 1131.15],
                2048: [4148.79, 2781.92, 2665.97, 2282.97, 2554.47, 2048.08],
                4096: [7751.45, 5268.23, 5027.70, 4259.70, 4839.45, 3819.76],
                8192: [14954.20, 10292.70, 9811.70, 8275.70, 9464.89, 7424.67]}


def predict(layers, seq, mode, workdir):
    # fixed_per_rank: each DDP rank runs 4 samples (global 8 over dp 2), the two TP ranks share 4.
    batch = 8 if mode == "ddp" else 4
    model = os.path.join(workdir, f"m{layers}-{seq}-{mode}.yaml")
    with open(model, "w") as f:
        f.write(f"""model:
  name: minimind-{layers}l
  hidden_size: 768
  num_hidden_layers: {layers}
  num_attention_heads: 8
  num_key_value_heads: 4
  vocab_size: 6400
run:
  seq_len: {seq}
  micro_batch_size: {batch}
  dtype: bfloat16
""")
    out = subprocess.run([SHARC, "compile", model, "--mode", mode, "--report=json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def table(title, key, rows, measured, workdir):
    lines = [f"### {title}", "",
             "| " + key + " | " + " | ".join(MODES) + " |",
             "|---:|" + "---:|" * len(MODES)]
    details = []
    for value in rows:
        layers, seq = (value, 2048) if key == "layers" else (8, value)
        cells = []
        ddp_total = None
        for i, mode in enumerate(MODES):
            r = predict(layers, seq, mode, workdir)
            mib = r["total_bytes"] / 2**20
            if mode == "ddp":
                ddp_total = mib
            cells.append(f"{mib:.1f} ({100 * mib / ddp_total:.1f}%) vs {measured[value][i]:.1f}")
            details.append((value, mode, r))
        lines.append(f"| {value} | " + " | ".join(cells) + " |")
    return "\n".join(lines), details


def main():
    with tempfile.TemporaryDirectory() as workdir:
        a, _ = table("Layer scan, seq_len 2048: predicted MiB per rank (% of ddp) vs the original's measured peak",
                     "layers", [2, 4, 8, 16, 32], MEASURED_LAYERS, workdir)
        b, _ = table("Sequence scan, 8 layers: predicted MiB per rank (% of ddp) vs the original's measured peak",
                     "seq_len", [1024, 2048, 4096, 8192], MEASURED_SEQ, workdir)
    print(a + "\n\n" + b)


if __name__ == "__main__":
    sys.exit(main())
