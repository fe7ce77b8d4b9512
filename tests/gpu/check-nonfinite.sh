#!/usr/bin/env bash
# Non-finite values on the GPU, from one clean step's checkpoint:
#  - under sharc-run --check, one infinite weight of lm_head stops the run
#    with exit 1 at the first instruction whose output went non-finite,
#    naming it;
#  - without --check, row 0 of lm_head at 1e30 keeps the logits (about
#    1e31) and the loss finite while the gradients' squares overflow: the
#    AdamW kernels flag the moment they store as infinite, and the run stops
#    at that step (2; the checkpoint holds step 1), naming it.
# usage: check-nonfinite.sh SHARC_RUN PLAN [sharc-run flags: --share-gpus]
set -uo pipefail
sharc_run=$1
plan=$2
shift 2
name=$(basename "$plan")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$sharc_run" "$plan" --backend cuda "$@" --check --steps 1 --quiet \
    --save "$tmp/clean.safetensors" >"$tmp/clean.log" 2>&1; then
  echo "FAIL  $name: the clean step failed under --check"
  tail -n 5 "$tmp/clean.log"
  exit 1
fi
# Writes a copy of the clean checkpoint with `count` weights of lm_head
# (from the first) set to `value`.
patch_head() { # value count out
  python3 - "$tmp/clean.safetensors" "$@" <<'PY'
import json, struct, sys
src, value, count, dst = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
data = open(src, "rb").read()
size = struct.unpack("<Q", data[:8])[0]
entry = json.loads(data[8:8 + size])["lm_head.weight"]
word = struct.pack("<f", value)
if entry["dtype"] == "BF16":
    word = word[2:]  # the upper half: the value rounded toward zero
else:
    assert entry["dtype"] == "F32", entry["dtype"]
out = bytearray(data)
at = 8 + size + entry["data_offsets"][0]
out[at:at + count * len(word)] = word * count
open(dst, "wb").write(out)
PY
}
hidden=$(python3 -c '
import json, struct, sys
data = open(sys.argv[1], "rb").read(8 + 10**6)
size = struct.unpack("<Q", data[:8])[0]
print(json.loads(data[8:8 + size])["lm_head.weight"]["shape"][1])' \
  "$tmp/clean.safetensors")
status_all=0

patch_head inf 1 "$tmp/inf.safetensors"
"$sharc_run" "$plan" --backend cuda "$@" --check --steps 1 --quiet \
  --load "$tmp/inf.safetensors" >"$tmp/inf.log" 2>&1
status=$?
if [ $status -eq 1 ] &&
    grep -q "the first output to go non-finite" "$tmp/inf.log"; then
  echo "pass  $name --check: $(grep -o 'instr [0-9]* ([a-z_]*.*' "$tmp/inf.log" | head -c 200)"
else
  echo "FAIL  $name --check: exit $status:"
  tail -n 5 "$tmp/inf.log"
  status_all=1
fi

patch_head 1e30 "$hidden" "$tmp/huge.safetensors"
"$sharc_run" "$plan" --backend cuda "$@" --steps 3 \
  --load "$tmp/huge.safetensors" >"$tmp/huge.log" 2>&1
status=$?
if [ $status -eq 1 ] &&
    grep -q "error: step 2: the gradient norm is not finite (AdamW moment '" \
      "$tmp/huge.log" &&
    ! grep -q "^step *3 " "$tmp/huge.log"; then
  echo "pass  $name diverged step: $(grep -o 'step 2: the gradient.*' "$tmp/huge.log" | head -c 200)"
else
  echo "FAIL  $name diverged step: exit $status:"
  tail -n 5 "$tmp/huge.log"
  status_all=1
fi
exit $status_all
