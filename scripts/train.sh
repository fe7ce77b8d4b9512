#!/usr/bin/env bash
# The main job: set up, build, compile the bundled MiniMind model into a plan
# and train it for a few steps, on the GPUs where there is one per rank, else
# on the CPU backend with simulated ranks.
# The text is the King James Bible (Debian's bible-kjv, public domain): a
# 6400-token byte-level BPE is trained on it and it is cut into train and
# validation token files (scripts/prepare-data.py, docs/data.md), and the
# run prints the validation loss before and after training. Without the
# package (not Debian) it falls back to this repository's documentation.
# Every step also goes to out/train/log.csv (sharc-run --log, flushed per
# step: plot it mid-run), and out/train/loss.svg is its plot. The trained
# weights go to out/train/model.safetensors (CKPT=FILE elsewhere), and the
# model then continues a line of the text (scripts/generate.py; SAMPLE=0
# skips it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
model=${MODEL:-$root/models/minimind.yaml}
run=${RUN:-$root/models/kjv.run.yaml}
steps=${STEPS:-10}
log=${LOG:-$root/out/train/log.csv}
ckpt=${CKPT:-$root/out/train/model.safetensors}
# Two simulated ranks with every tensor-parallel optimisation by default.
flags=${SHARC_FLAGS---mode tp_sp_async_vp --tp 2}
"$root/scripts/build.sh"
mkdir -p "$root/out" "$(dirname "$log")"
plan="$root/out/$(basename "$model" .yaml).plan"
# The tokenizer's vocabulary is the model's; a byte-level BPE needs 300 ids.
vocab=$(sed -n 's/^ *vocab_size: *\([0-9]*\).*/\1/p' "$model" | head -n 1)
data="$root/out/kjv-$vocab"
if [ "${vocab:-0}" -lt 300 ]; then
  echo "$model: vocab_size ${vocab:-?} is too small for a BPE tokenizer;" \
    "training on synthetic ids"
  datargs=(--synthetic)
else
  if [ ! -s "$data/train.tokens" ] || [ ! -s "$data/val.tokens" ]; then
    text="$root/out/kjv.txt"
    if command -v bible >/dev/null && bible -l0 gen1:1-rev22:21 >"$text" &&
        [ -s "$text" ]; then
      echo "text: the King James Bible ($(wc -c <"$text") bytes)"
    else
      cat "$root"/README.md "$root"/docs/*.md >"$text"
      echo "text: bible-kjv is missing; this repository's documentation" \
        "instead"
    fi
    "$root/.venv/bin/python" "$root/scripts/prepare-data.py" "$text" \
      -o "$data" --train-tokenizer "$vocab"
  fi
  datargs=(--data "$data/train.tokens" --shuffle --val-data "$data/val.tokens"
           --eval-every 5 --eval-batches 4)
fi
"$build/bin/sharc" compile "$model" --run "$run" -o "$plan" $flags
"$build/bin/sharc" compile "$model" --run "$run" --report $flags
echo "compiled $model -> $plan; training $steps steps"
mkdir -p "$(dirname "$ckpt")"
started="$root/out/.train-started"
touch "$started"
# A --save among the extra arguments comes later and wins.
"$build/bin/sharc-run" "$plan" --steps "$steps" "${datargs[@]}" --log "$log" \
  --save "$ckpt" "$@"
svg="$(dirname "$log")/loss.svg"
python3 "$root/scripts/plot-training.py" "$log" "$svg"
echo "training log $log, plotted in $svg"
# What the model writes now: a line of Genesis continued, greedily enough
# to show what it has learned (temperature 0.7, the 20 likeliest tokens).
if [ "${SAMPLE:-1}" != 0 ] && [ -s "$data/tokenizer.json" ] &&
    [ "$ckpt" -nt "$started" ]; then
  echo "the trained model ($ckpt) continues a prompt:"
  "$root/.venv/bin/python" "$root/scripts/generate.py" "$ckpt" \
    --tokenizer "$data/tokenizer.json" --model "$model" \
    --prompt "${PROMPT:-And God said}" --max-new-tokens 24 \
    --temperature 0.7 --top-k 20
fi
