#!/usr/bin/env bash
# Runs each plan on the GPUs and on the cpu from the same weights and tokens
# (sharc-run --compare-cpu) and prints one line per plan; exit 1 if any
# differs, 77 (ctest's skip) when the node has no GPU. A plan with more
# ranks than GPUs runs with --share-gpus (sharc's collectives, not NCCL's).
# usage: parity.sh SHARC_RUN PLAN...
set -uo pipefail
sharc_run=$1
shift
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
ran=0
failed=0
for plan in "$@"; do
  # ranks: the product of the mesh's axis sizes
  ranks=$("$(dirname "$0")/plan-ranks.sh" "$plan")
  # With fewer GPUs than ranks (but one at least), the ranks share them:
  # real kernels, streams and events, collectives as copies between
  # the ranks' memory (executor/cuda/PeerMemoryCommunicator.h).
  share=()
  if [ "$gpus" -eq 0 ]; then
    echo "skip  $(basename "$plan"): the node has no GPU"
    continue
  elif [ "$gpus" -lt "$ranks" ]; then
    share=(--share-gpus)
  fi
  log=$(mktemp)
  # The outer deadline catches a hang (sharc-run's --timeout does not apply
  # to --compare-cpu).
  if timeout 120 "$sharc_run" "$plan" --backend cuda "${share[@]}" \
      --compare-cpu --steps 3 >"$log" 2>&1; then
    echo "pass  $(basename "$plan")${share:+ ($ranks ranks sharing $gpus GPU)}"
  else
    echo "FAIL  $(basename "$plan")"
    cat "$log"
    failed=1
  fi
  worst=$(awk '$1 ~ /^(loss|logits|grad:)/ && $4+0 > w {w = $4+0; n = $1}
               END {if (n) printf "worst first-step rel L2 %.2e (%s)", w, n}' "$log")
  [ -n "$worst" ] && echo "      $worst"
  rm -f "$log"
  ran=$((ran + 1))
done
[ "$ran" -eq 0 ] && exit 77
exit $failed
