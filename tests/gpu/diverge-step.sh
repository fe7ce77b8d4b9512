#!/usr/bin/env bash
# A run whose loss stays finite but whose gradient overflows stops at that
# step on the GPU, as on the cpu, without --check: the AdamW kernels flag
# the moment they store as infinite, and sharc-run names it. The checkpoint
# of one clean step gets row 0 of lm_head at 1e30: the logits (about 1e31)
# and the loss stay finite, the gradients' squares overflow.
# usage: diverge-step.sh SHARC_RUN PLAN [sharc-run flags, e.g. --share-gpus]
set -uo pipefail
sharc_run=$1
plan=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$sharc_run" "$plan" --backend cuda "$@" --steps 1 --quiet \
    --save "$tmp/clean.safetensors" >"$tmp/clean.log" 2>&1; then
  echo "FAIL  the clean step failed"
  tail -n 5 "$tmp/clean.log"
  exit 1
fi
python3 - "$tmp/clean.safetensors" "$tmp/huge.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
size = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + size])
entry = header["lm_head.weight"]
hidden = entry["shape"][1]
huge = struct.pack("<f", 1e30)
if entry["dtype"] == "BF16":
    huge = huge[2:]  # the upper half: bf16's 1e30, rounded toward zero
else:
    assert entry["dtype"] == "F32", entry["dtype"]
out = bytearray(data)
at = 8 + size + entry["data_offsets"][0]
for i in range(hidden):
    out[at + i * len(huge):at + (i + 1) * len(huge)] = huge
open(sys.argv[2], "wb").write(out)
PY
"$sharc_run" "$plan" --backend cuda "$@" --steps 3 \
  --load "$tmp/huge.safetensors" >"$tmp/huge.log" 2>&1
status=$?
# The checkpoint holds step 1: the run must stop at step 2, before step 3.
if [ $status -eq 1 ] &&
    grep -q "error: step 2: the gradient norm is not finite (AdamW moment '" \
      "$tmp/huge.log" &&
    ! grep -q "^step 3" "$tmp/huge.log"; then
  echo "pass  $(basename "$plan"): $(grep -o 'step 2: the gradient.*' "$tmp/huge.log" | head -c 200)"
else
  echo "FAIL  $(basename "$plan"): exit $status:"
  tail -n 5 "$tmp/huge.log"
  exit 1
fi
