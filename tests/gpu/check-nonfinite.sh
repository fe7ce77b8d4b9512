#!/usr/bin/env bash
# sharc-run --check on the GPU: a clean plan passes; the same plan loaded
# from a checkpoint with one infinite weight of lm_head stops with exit 1
# at the first instruction whose output went non-finite, naming it.
# usage: check-nonfinite.sh SHARC_RUN PLAN
set -uo pipefail
sharc_run=$1
plan=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$sharc_run" "$plan" --backend cuda --check --steps 2 --quiet \
    --save "$tmp/clean.safetensors" >"$tmp/clean.log" 2>&1; then
  echo "FAIL  the clean run failed under --check"
  tail -n 5 "$tmp/clean.log"
  exit 1
fi
python3 - "$tmp/clean.safetensors" "$tmp/bad.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
size = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + size])
entry = header["lm_head.weight"]
assert entry["dtype"] in ("F32", "BF16"), entry["dtype"]
at = 8 + size + entry["data_offsets"][0] + 4 * (4 if entry["dtype"] == "F32" else 2)
inf = struct.pack("<f", float("inf")) if entry["dtype"] == "F32" else b"\x80\x7f"
out = bytearray(data)
out[at:at + len(inf)] = inf
open(sys.argv[2], "wb").write(out)
PY
"$sharc_run" "$plan" --backend cuda --check --steps 1 --quiet \
  --load "$tmp/bad.safetensors" >"$tmp/bad.log" 2>&1
status=$?
if [ $status -eq 1 ] && grep -q "the first output to go non-finite" "$tmp/bad.log"; then
  echo "pass  $(basename "$plan"): $(grep -o 'instr [0-9]* ([a-z_]*.*' "$tmp/bad.log" | head -c 200)"
else
  echo "FAIL  exit $status:"
  tail -n 5 "$tmp/bad.log"
  exit 1
fi
