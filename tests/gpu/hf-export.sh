#!/usr/bin/env bash
# Makes the inputs of tests/gpu/hf-logits.py where sharc is built: for each
# model, a checkpoint trained a few steps on this repository's docs,
# exported with `sharc export --format hf` into OUTDIR/NAME, with sharc's
# logits of one batch (the CPU backend, f32) beside it:
#   OUTDIR/NAME/{config.json, model.safetensors}   the export
#   OUTDIR/NAME/sharc-logits.safetensors            `logits` [S, B, V]
#   OUTDIR/NAME/sharc-tokens.bin                    the batch, int32 [B, S]
# usage: hf-export.sh BINDIR OUTDIR [MODEL.yaml...]
#   (default: models/tiny.yaml models/tiny-tied.yaml tests/gpu/small.yaml)
set -euo pipefail
bin=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
models=("$@")
[ ${#models[@]} -gt 0 ] ||
  models=("$root/models/tiny.yaml" "$root/models/tiny-tied.yaml"
          "$here/small.yaml")
mkdir -p "$out"
for model in "${models[@]}"; do
  name=$(basename "$model" .yaml)
  dir="$out/$name"
  work="$out/.work-$name"
  mkdir -p "$dir" "$work"
  "$bin/sharc" compile "$model" --emit-logits -o "$work/plan"
  read -r seq batch vocab < <(awk '/^seq_len:/ {s=$2} /^batch_size:/ {b=$2}
    /^vocab_size:/ {v=$2} END {print s, b, v}' "$work/plan")
  # Exactly one batch of ids, so every data position reads the same one.
  python3 - "$work/tokens.bin" "$((seq * batch))" "$vocab" \
    "$root"/README.md "$root"/docs/*.md <<'PY'
import struct, sys
path, count, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
text = b"".join(open(p, "rb").read() for p in sys.argv[4:])
ids = [(text[i] * 7 + i) % vocab for i in range(count)]
open(path, "wb").write(struct.pack("<%di" % count, *ids))
PY
  "$bin/sharc-run" "$work/plan" --backend cpu --steps 3 --data "$work/tokens.bin" \
    --save "$work/ckpt.safetensors" --quiet
  "$bin/sharc-run" "$work/plan" --backend cpu --load "$work/ckpt.safetensors" \
    --steps 1 --data "$work/tokens.bin" --quiet \
    --dump-outputs "$dir/sharc-logits.safetensors"
  cp "$work/tokens.bin" "$dir/sharc-tokens.bin"
  "$bin/sharc" export --format hf "$work/ckpt.safetensors" "$model" -o "$dir"
  rm -rf "$work"
  echo "$dir: seq_len $seq, batch $batch, vocab $vocab"
done
