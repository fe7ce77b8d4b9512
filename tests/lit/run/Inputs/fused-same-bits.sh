#!/usr/bin/env bash
# Compiles MODEL with FLAGS twice, with the default fusions and with
# --no-fuse-adds --no-fuse-norm-rope, checks the first has the fused ops
# (rms_norm_grad_add, rms_norm_rope, and an add in a GEMM's epilogue: a
# residual, or the sum of q/k/v's or gate/up's input gradients; under tp
# with the projections fused, the default, there is neither: each residual
# add waits for a collective) and the second none, trains both 3 steps on
# the cpu backend
# and requires the same checkpoint bytes (f32: every fused sum rounds as
# the separate ops do).
# usage: fused-same-bits.sh SHARC SHARC_RUN MODEL OUTDIR FLAGS...
set -euo pipefail
sharc=$1 run=$2 model=$3 out=$4
shift 4
mkdir -p "$out"
"$sharc" compile "$model" "$@" -o "$out/fused.plan"
"$sharc" compile "$model" "$@" --no-fuse-adds --no-fuse-norm-rope \
  -o "$out/apart.plan"
ops=("op: rms_norm_grad_add," "op: rms_norm_rope,")
tensor_parallel=false projections_fused=true
grep -q "{name: tp, size: [2-9]" "$out/fused.plan" && tensor_parallel=true
grep -q -- "--no-fuse-projections" <<<"$*" && projections_fused=false
if ! $tensor_parallel || ! $projections_fused; then
  ops+=("op: matmul[a-z_]*_add,")
fi
for op in "${ops[@]}"; do
  grep -q "$op" "$out/fused.plan" || { echo "no '$op' in the fused plan"; exit 1; }
done
if grep -q "_add,\|rms_norm_rope" "$out/apart.plan"; then
  echo "a fused op in the --no-fuse plan"
  exit 1
fi
for plan in fused apart; do
  "$run" "$out/$plan.plan" --backend cpu --steps 3 --quiet \
    --save "$out/$plan.ckpt" >/dev/null
done
cmp "$out/fused.ckpt" "$out/apart.ckpt"
echo "same bits: $*"
