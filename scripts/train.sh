#!/usr/bin/env bash
# The main job: set up, build, compile the bundled MiniMind model into a plan
# and train it for a few steps, on the GPUs where there is one per rank, else
# on the CPU backend with simulated ranks.
# The tokens are the bytes of this repository's documentation, a small real
# text, so the loss visibly falls; pass --synthetic for uniform random ids.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
model=${MODEL:-$root/models/minimind.yaml}
steps=${STEPS:-5}
# Two simulated ranks with every tensor-parallel optimisation by default.
flags=${SHARC_FLAGS---mode tp_sp_async_vp --tp 2}
"$root/scripts/build.sh"
mkdir -p "$root/out"
plan="$root/out/$(basename "$model" .yaml).plan"
tokens="$root/out/docs.tokens"
python3 - "$tokens" "$root"/README.md "$root"/docs/*.md <<'PY'
import struct, sys
data = b"".join(open(path, "rb").read() for path in sys.argv[2:])
with open(sys.argv[1], "wb") as out:
    out.write(struct.pack("<%di" % len(data), *data))
PY
"$build/bin/sharc" compile "$model" -o "$plan" $flags
"$build/bin/sharc" compile "$model" --report $flags
echo "compiled $model -> $plan; training $steps steps on $tokens"
"$build/bin/sharc-run" "$plan" --steps "$steps" --data "$tokens" "$@"
