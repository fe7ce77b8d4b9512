#!/usr/bin/env bash
# Trains one plan for N steps on the GPUs and on the cpu backend from the
# same seed and tokens and compares the loss curves step by step. Two runs
# that round differently in the last bit agree closely at first and drift
# apart later (training amplifies tiny differences), so the first half of
# the curve is held to EARLY and the whole of it to LATE (relative gaps);
# exit 1 when either is exceeded.
# usage: loss-curve.sh SHARC_RUN PLAN STEPS EARLY LATE [DATA]
set -euo pipefail
sharc_run=$1 plan=$2 steps=$3 early=$4 late=$5
data=()
[ $# -ge 6 ] && data=(--data "$6")
export NCCL_NVLS_ENABLE=0
gpu=$(mktemp) cpu=$(mktemp)
trap 'rm -f "$gpu" "$cpu"' EXIT
"$sharc_run" "$plan" --backend cuda --steps "$steps" "${data[@]}" |
  awk '$1 == "step" {print $2, $4}' >"$gpu"
"$sharc_run" "$plan" --backend cpu --steps "$steps" "${data[@]}" |
  awk '$1 == "step" {print $2, $4}' >"$cpu"
join "$gpu" "$cpu" | awk -v early="$early" -v late="$late" -v steps="$steps" \
  -v plan="$(basename "$plan")" '
  { d = ($2 - $3) / $3; if (d < 0) d = -d; n++
    if (n == 1) first = $3
    last = $3
    if ($1 <= steps / 2 && d > worstEarly) worstEarly = d
    if (d > worst) {worst = d; at = $1} }
  END {
    bad = n != steps || worstEarly > early || worst > late
    printf "%s %s: %d steps, loss %.4f -> %.4f (cpu); worst gap %.1e in the " \
           "first half, %.1e overall (step %d)\n", bad ? "FAIL" : "pass",
           plan, n, first, last, worstEarly, worst, at
    exit bad }'
