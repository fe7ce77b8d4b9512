#!/usr/bin/env bash
# Trains one plan for N steps on the GPUs and on the cpu backend from the
# same seed and tokens and compares the loss curves step by step: prints the
# largest relative difference and exits 1 when it exceeds BOUND.
# usage: loss-curve.sh SHARC_RUN PLAN STEPS BOUND [DATA]
set -euo pipefail
sharc_run=$1 plan=$2 steps=$3 bound=$4
data=()
[ $# -ge 5 ] && data=(--data "$5")
export NCCL_NVLS_ENABLE=0
gpu=$(mktemp) cpu=$(mktemp)
trap 'rm -f "$gpu" "$cpu"' EXIT
"$sharc_run" "$plan" --backend cuda --steps "$steps" "${data[@]}" |
  awk '$1 == "step" {print $2, $4}' >"$gpu"
"$sharc_run" "$plan" --backend cpu --steps "$steps" "${data[@]}" |
  awk '$1 == "step" {print $2, $4}' >"$cpu"
join "$gpu" "$cpu" | awk -v bound="$bound" -v plan="$(basename "$plan")" '
  { d = ($2 - $3) / $3; if (d < 0) d = -d; if (d > worst) {worst = d; at = $1}
    n++; first[n] = $3; last = $3 }
  END {
    printf "%s: %d steps, loss %.4f -> %.4f (cpu), worst relative gap %.2e at step %d\n",
           plan, n, first[1], last, worst, at
    exit (n == 0 || worst > bound) }'
