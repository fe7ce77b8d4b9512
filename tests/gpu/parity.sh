#!/usr/bin/env bash
# Runs each plan on the GPUs and on the cpu from the same weights and tokens
# (sharc-run --compare-cpu) and prints one line per plan; exit 1 if any
# differs, 77 (ctest's skip) when the node has no GPU for any of them.
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
  ranks=$(sed -n 's/^mesh: //p' "$plan" | grep -o 'size: *[0-9]*' |
          awk '{n = (NR == 1 ? 1 : n) * $2} END {print n ? n : 1}')
  if [ "$gpus" -lt "$ranks" ]; then
    echo "skip  $(basename "$plan"): needs $ranks GPUs, the node has $gpus"
    continue
  fi
  log=$(mktemp)
  # The outer deadline catches a hang (sharc-run's --timeout does not apply
  # to --compare-cpu).
  if timeout 120 "$sharc_run" "$plan" --backend cuda --compare-cpu --steps 3 \
      >"$log" 2>&1; then
    echo "pass  $(basename "$plan")"
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
