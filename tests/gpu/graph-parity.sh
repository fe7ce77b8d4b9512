#!/usr/bin/env bash
# A step replayed from a CUDA graph (sharc-run --cuda-graph) must train
# exactly as the eagerly enqueued step: after STEPS steps from the same seed
# the two checkpoints (every parameter and both Adam moments) are the same
# bytes. Plans needing more GPUs than the node has are skipped.
# usage: graph-parity.sh SHARC_RUN STEPS PLAN...
set -uo pipefail
sharc_run=$1
steps=$2
shift 2
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for plan in "$@"; do
  name=$(basename "$plan")
  # ranks: the product of the mesh's axis sizes
  ranks=$("$(dirname "$0")/plan-ranks.sh" "$plan")
  if [ "$ranks" -gt "$gpus" ]; then
    echo "skip  $name: needs $ranks GPUs, the node has $gpus"
    continue
  fi
  for mode in eager graph; do
    flags=()
    [ $mode = graph ] && flags=(--cuda-graph)
    # cuDNN's default attention backward adds dq in no fixed order.
    if ! SHARC_CUDNN_DETERMINISTIC=1 timeout 300 "$sharc_run" "$plan" \
        --backend cuda --steps "$steps" \
        "${flags[@]}" --save "$tmp/$mode.ckpt" >"$tmp/$mode.log" 2>&1; then
      echo "FAIL  $name: the $mode run failed"
      tail -n 5 "$tmp/$mode.log"
      failed=1
      continue 2
    fi
  done
  if cmp -s "$tmp/eager.ckpt" "$tmp/graph.ckpt"; then
    echo "pass  $name: $steps steps, checkpoints identical;" \
      "eager $(grep -o 'median step [0-9.]* ms' "$tmp/eager.log"), graph" \
      "$(grep -o 'median step [0-9.]* ms' "$tmp/graph.log")"
  else
    echo "FAIL  $name: the checkpoints differ after $steps steps"
    grep -E "first loss" "$tmp"/*.log
    failed=1
  fi
done
exit $failed
