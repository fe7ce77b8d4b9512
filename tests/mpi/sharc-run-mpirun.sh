#!/usr/bin/env bash
# sharc-run under mpirun -np 2 on a machine without GPUs: a tp=2 plan on
# the cpu backend is refused by every process, each naming itself, with exit
# 2 and no hang; a plan that 2 processes cannot share evenly (3 ranks is
# impossible here, so a dense 1-rank plan) is refused likewise.
# usage: sharc-run-mpirun.sh MPIRUN SHARC_RUN MODEL SHARC
set -uo pipefail
mpirun=$1 sharc_run=$2 model=$3 sharc=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$sharc" compile "$model" --mode tp --tp 2 -o "$work/tp.plan" >/dev/null || exit 1
"$sharc" compile "$model" -o "$work/dense.plan" >/dev/null || exit 1
failed=0
expect() { # LOG WANT...
  local log=$1
  shift
  for want in "$@"; do
    grep -qF -- "$want" "$log" || { echo "missing: $want"; failed=1; }
  done
}
timeout 120 "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" --backend cpu \
  --steps 1 >"$work/tp.log" 2>&1
echo "tp plan on the cpu under mpirun: exit $?"
expect "$work/tp.log" \
  "sharc-run: process 0: error:" "sharc-run: process 1: error:" \
  "a run over 2 processes needs the cuda backend"
timeout 120 "$mpirun" -np 2 "$sharc_run" "$work/dense.plan" --backend cpu \
  --steps 1 >"$work/dense.log" 2>&1
echo "1-rank plan under mpirun -np 2: exit $?"
expect "$work/dense.log" "the plan's 1 ranks cannot be shared evenly by 2 processes"
timeout 120 "$mpirun" -np 2 "$sharc_run" --bench "$work/none.yaml" \
  >"$work/bench.log" 2>&1
expect "$work/bench.log" "--bench runs every point in one process"
[ $failed -eq 0 ] || cat "$work"/*.log
exit $failed
