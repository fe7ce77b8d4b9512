#!/usr/bin/env bash
# The main job: set up, build, compile the bundled MiniMind model into a plan
# and train it for a few steps (CPU backend; on GPUs once the CUDA backend lands).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
model=${MODEL:-$root/models/minimind.yaml}
steps=${STEPS:-5}
"$root/scripts/build.sh"
mkdir -p "$root/out"
plan="$root/out/$(basename "$model" .yaml).plan"
"$build/bin/sharc" compile "$model" -o "$plan"
echo "compiled $model -> $plan"
"$build/bin/sharc-run" "$plan" --steps "$steps" "$@"
