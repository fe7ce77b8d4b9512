#!/usr/bin/env bash
# Compiles MODEL with RUN and FLAGS twice, with --fuse-projections (q/k/v
# and gate/up as one GEMM each, read in place; the default) and with
# --no-fuse-projections, checks the
# fused plan with sharc-run --check on the cpu (no hazard, pipeline
# transfers paired in order), trains both 3 steps and requires the same
# printed loss (f32: the fused input-gradient GEMM sums in another order,
# so the bits may differ past the printed digits).
# usage: fused-pp-loss.sh SHARC SHARC_RUN MODEL RUN OUT FLAGS...
set -euo pipefail
sharc=$1 run=$2 model=$3 runfile=$4 out=$5
shift 5
"$sharc" compile "$model" --run "$runfile" "$@" --fuse-projections \
  -o "$out.fused.plan"
"$sharc" compile "$model" --run "$runfile" "$@" --no-fuse-projections \
  -o "$out.apart.plan"
grep -q "row_stride" "$out.apart.plan" &&
  { echo "a column view in the plan without fusion"; exit 1; }
grep -q "row_stride" "$out.fused.plan" ||
  { echo "no column view in the fused plan"; exit 1; }
"$run" "$out.fused.plan" --backend cpu --check --steps 3 --timeout 30 \
  >"$out.fused.log"
"$run" "$out.apart.plan" --backend cpu --steps 3 >"$out.apart.log"
grep "check: transfers" "$out.fused.log"
fused=$(grep -o "last loss [0-9.]*" "$out.fused.log")
apart=$(grep -o "last loss [0-9.]*" "$out.apart.log")
[ "$fused" = "$apart" ] || { echo "fused: $fused, apart: $apart"; exit 1; }
echo "same loss: 3 steps, $fused"
