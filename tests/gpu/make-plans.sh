#!/usr/bin/env bash
# Compiles the GPU parity plans into OUTDIR: every mode at tp=2, ddp at
# dp=2 and the dense model, each in f32 and bf16, of tests/gpu/small.yaml
# (head_dim 64) and of models/minimind.yaml (head_dim 96), all with the
# logits and gradients as outputs for --compare-cpu (the adds and q/k norm
# + rope fused, q/k/v and gate/up one GEMM each: the defaults); and plans
# of the small model with a GEMM for every projection or gate/up alone;
# and plans without the other fusions and with --schedule latency;
# bf16-mixed plans of the small model; and
# context- and pipeline-parallel plans (2 and 4 ranks) of the small model,
# the interleaved one also with clipping; and ZeRO-1 plans.
# usage: make-plans.sh SHARC OUTDIR
set -euo pipefail
sharc=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mkdir -p "$out"
flags="--emit-logits --keep-grads"
for model in "$here/small.yaml" "$root/models/minimind.yaml"; do
  name=$(basename "$model" .yaml)
  for dtype in f32 bf16; do
    run=()
    [ "$dtype" = bf16 ] && run=(--run "$here/bf16.run.yaml")
    "$sharc" compile "$model" "${run[@]}" $flags -o "$out/$name-$dtype-dense.plan"
    "$sharc" compile "$model" "${run[@]}" $flags --mode ddp --dp 2 \
      -o "$out/$name-$dtype-ddp.plan"
    for mode in tp tp_sp tp_sp_async tp_vp tp_sp_async_vp; do
      "$sharc" compile "$model" "${run[@]}" $flags --mode $mode --tp 2 \
        -o "$out/$name-$dtype-$mode.plan"
    done
  done
done
# The adds and the q/k norm + rope as their own kernels (--no-fuse-adds
# --no-fuse-norm-rope; every other plan has them fused, the default), and
# the latency-hiding schedule.
for dtype in f32 bf16; do
  run=()
  [ "$dtype" = bf16 ] && run=(--run "$here/bf16.run.yaml")
  unfused=(--no-fuse-adds --no-fuse-norm-rope)
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags "${unfused[@]}" \
    -o "$out/small-$dtype-dense-unfused.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags "${unfused[@]}" \
    --mode tp_sp_async_vp --tp 2 \
    -o "$out/small-$dtype-tp_sp_async_vp-unfused.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --schedule latency \
    --mode tp_sp_async_vp --tp 2 \
    -o "$out/small-$dtype-tp_sp_async_vp-latency.plan"
done
"$sharc" compile "$root/models/minimind.yaml" --run "$here/bf16.run.yaml" \
  $flags --no-fuse-adds --no-fuse-norm-rope \
  -o "$out/minimind-bf16-dense-unfused.plan"
# A GEMM for every projection (--no-fuse-projections; every other plan has
# q/k/v and gate/up fused, the default) and gate/up alone, one GPU and tp=2,
# in both dtypes of the small model.
for dtype in f32 bf16; do
  run=()
  [ "$dtype" = bf16 ] && run=(--run "$here/bf16.run.yaml")
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --no-fuse-projections \
    -o "$out/small-$dtype-dense-separate.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --no-fuse-projections \
    --mode tp_sp_async_vp --tp 2 \
    -o "$out/small-$dtype-tp_sp_async_vp-separate.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags \
    --fuse-projections=gate_up -o "$out/small-$dtype-dense-gateup.plan"
done
# Gradient clipping by the global norm (sum_squares, one all_reduce over
# every axis, adamw reading the norm), one GPU, ddp and tp=2, both dtypes.
for dtype in f32 bf16; do
  run=(--run "$here/clip.run.yaml")
  [ "$dtype" = bf16 ] && run=(--run "$here/clip-bf16.run.yaml")
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags \
    -o "$out/small-$dtype-dense-clip.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode ddp --dp 2 \
    -o "$out/small-$dtype-ddp-clip.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags \
    --mode tp_sp_async_vp --tp 2 -o "$out/small-$dtype-tp_sp_async_vp-clip.plan"
done
# bf16-mixed (adamw_master: fp32 masters and moments), dense, ddp and tp=2,
# alone and grouped updates alike.
run=(--run "$here/mixed.run.yaml")
"$sharc" compile "$here/small.yaml" "${run[@]}" $flags \
  -o "$out/small-mixed-dense.plan"
"$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode ddp --dp 2 \
  -o "$out/small-mixed-ddp.plan"
"$sharc" compile "$here/small.yaml" "${run[@]}" $flags \
  --mode tp_sp_async_vp --tp 2 -o "$out/small-mixed-tp_sp_async_vp.plan"
# Context parallelism (each exchange, with tp) and pipeline parallelism
# (each schedule, with tp and cp), both dtypes of the small model; on a
# node with fewer GPUs than ranks parity.sh runs them with --share-gpus.
for dtype in f32 bf16; do
  run=()
  pp=(--run "$here/pp.run.yaml")
  if [ "$dtype" = bf16 ]; then
    run=(--run "$here/bf16.run.yaml")
    pp=(--run "$here/pp-bf16.run.yaml")
  fi
  for comm in a2a all_gather; do
    for split in balanced contiguous; do
      "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode cp --cp 2 \
        --cp-comm $comm --cp-split $split \
        -o "$out/small-$dtype-cp-$comm-$split.plan"
    done
  done
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode tp_cp --tp 2 \
    --cp 2 --cp-comm all_gather --sp -o "$out/small-$dtype-tp_cp.plan"
  # Ring attention: cp 2, and tp 2 x cp 2 with SP, on the contiguous split
  # (the chain; names kept from before the balanced ring) and on the
  # balanced one (the whole ring, two chunks of queries and keys a block:
  # 32 positions each at cp 2, so a 64-row tile spans both); cp 4 balanced
  # too (chunks of 16).
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode cp --cp 2 \
    --cp-comm ring --cp-split contiguous -o "$out/small-$dtype-cp-ring.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode tp_cp --tp 2 \
    --cp 2 --cp-comm ring --cp-split contiguous --sp \
    -o "$out/small-$dtype-tp_cp-ring.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode cp --cp 2 \
    --cp-comm ring --cp-split balanced \
    -o "$out/small-$dtype-cp-ring-balanced.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode tp_cp --tp 2 \
    --cp 2 --cp-comm ring --cp-split balanced --sp \
    -o "$out/small-$dtype-tp_cp-ring-balanced.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode cp --cp 4 \
    --cp-comm ring --cp-split balanced \
    -o "$out/small-$dtype-cp4-ring-balanced.plan"
  # Selective recompute exchanges k and v again in the backward.
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode cp --cp 4 \
    --cp-comm ring --cp-split balanced --recompute selective \
    -o "$out/small-$dtype-cp4-ring-selective.plan"
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode cp --cp 2 \
    --cp-comm all_gather --recompute selective \
    -o "$out/small-$dtype-cp-all_gather-selective.plan"
  # One microbatch over two stages, with its logits (the last stage's):
  # generation on a pipeline (eval-parity.sh).
  "$sharc" compile "$here/small.yaml" "${run[@]}" $flags --mode pp --pp 2 \
    -o "$out/small-$dtype-pp-logits.plan"
  # Microbatched plans return the loss and gradients, not logits.
  for schedule in gpipe 1f1b; do
    "$sharc" compile "$here/small.yaml" "${pp[@]}" --keep-grads --mode pp --pp 2 \
      --pp-schedule $schedule -o "$out/small-$dtype-pp-$schedule.plan"
  done
  # Interleaved: 2 chunks a stage need 4 layers.
  sed 's/num_hidden_layers: 2/num_hidden_layers: 4/' "$here/small.yaml" \
    >"$out/small-4-layers.yaml"
  "$sharc" compile "$out/small-4-layers.yaml" "${pp[@]}" --keep-grads --mode pp \
    --pp 2 --pp-schedule interleaved --pp-chunks 2 \
    -o "$out/small-$dtype-pp-interleaved.plan"
  # Interleaved with clipping: each stage's norm over both of its chunks.
  clip=(--run "$here/pp-clip.run.yaml")
  [ "$dtype" = bf16 ] && clip=(--run "$here/pp-clip-bf16.run.yaml")
  "$sharc" compile "$out/small-4-layers.yaml" "${clip[@]}" --keep-grads \
    --mode pp --pp 2 --pp-schedule interleaved --pp-chunks 2 \
    -o "$out/small-$dtype-pp-interleaved-clip.plan"
  "$sharc" compile "$here/small.yaml" "${pp[@]}" --keep-grads --mode tp_pp --tp 2 \
    --pp 2 --pp-schedule 1f1b -o "$out/small-$dtype-tp_pp.plan"
  "$sharc" compile "$here/small.yaml" "${pp[@]}" --keep-grads --pp 2 --cp 2 \
    --cp-comm a2a -o "$out/small-$dtype-pp_cp.plan"
  # dp x pp: each stage's gradient buckets (fused gradients included) over
  # dp; the small run's 4 sequences, 2 a rank, in 2 microbatches.
  "$sharc" compile "$here/small.yaml" "${run[@]}" --keep-grads --mode pp \
    --pp 2 --dp 2 --microbatches 2 --pp-schedule 1f1b \
    -o "$out/small-$dtype-dp_pp.plan"
done
# ZeRO-1 (--zero 1: gradients reduce-scattered in buckets, the moments of
# one block a rank, the updated blocks all-gathered): ddp in f32, bf16 and
# bf16-mixed, dp 2 x tp 2 (blocks along dim 1 of the column-parallel
# weights: staged copies), and MiniMind in bf16. No gradients come out;
# --compare-cpu compares the moments instead.
for dtype in f32 bf16 mixed; do
  run=()
  [ "$dtype" = bf16 ] && run=(--run "$here/bf16.run.yaml")
  [ "$dtype" = mixed ] && run=(--run "$here/mixed.run.yaml")
  "$sharc" compile "$here/small.yaml" "${run[@]}" --emit-logits --mode ddp \
    --dp 2 --zero 1 -o "$out/small-$dtype-ddp-zero.plan"
done
"$sharc" compile "$here/small.yaml" --emit-logits --mode tp --tp 2 --dp 2 \
  --zero 1 -o "$out/small-f32-dp_tp-zero.plan"
"$sharc" compile "$here/small.yaml" --mode pp --pp 2 --dp 2 --microbatches 2 \
  --pp-schedule 1f1b --zero 1 -o "$out/small-f32-dp_pp-zero.plan"
"$sharc" compile "$here/small.yaml" --emit-logits --cp 2 --dp 2 --zero 1 \
  -o "$out/small-f32-dp_cp-zero.plan"
"$sharc" compile "$root/models/minimind.yaml" --run "$here/bf16.run.yaml" \
  --emit-logits --mode ddp --dp 2 --zero 1 \
  -o "$out/minimind-bf16-ddp-zero.plan"
# ZeRO-3 (--zero 3: the parameters themselves one block a rank, gathered
# before the ops that read them; fused weights gathered into one buffer):
# ddp in f32, bf16 and bf16-mixed, in small groups (several gathers a
# step), dp 2 x tp 2, dp 2 x cp 2, and MiniMind in bf16.
for dtype in f32 bf16 mixed; do
  run=()
  [ "$dtype" = bf16 ] && run=(--run "$here/bf16.run.yaml")
  [ "$dtype" = mixed ] && run=(--run "$here/mixed.run.yaml")
  "$sharc" compile "$here/small.yaml" "${run[@]}" --emit-logits --mode ddp \
    --dp 2 --zero 3 --bucket-bytes 65536 -o "$out/small-$dtype-ddp-zero3.plan"
done
"$sharc" compile "$here/small.yaml" --emit-logits --mode tp --tp 2 --dp 2 \
  --zero 3 -o "$out/small-f32-dp_tp-zero3.plan"
"$sharc" compile "$here/small.yaml" --emit-logits --cp 2 --dp 2 --zero 3 \
  -o "$out/small-f32-dp_cp-zero3.plan"
"$sharc" compile "$root/models/minimind.yaml" --run "$here/bf16.run.yaml" \
  --emit-logits --mode ddp --dp 2 --zero 3 \
  -o "$out/minimind-bf16-ddp-zero3.plan"
"$sharc" compile "$here/small.yaml" --mode pp --pp 2 --dp 2 --microbatches 2 \
  --pp-schedule 1f1b --zero 3 -o "$out/small-f32-dp_pp-zero3.plan"
# The latency schedule on pipeline stages (each stage's transfers in
# program order; every such plan hung before).
"$sharc" compile "$here/small.yaml" --keep-grads --mode pp --pp 2 \
  --microbatches 2 --pp-schedule 1f1b --schedule latency \
  -o "$out/small-f32-pp-1f1b-latency.plan"
# Full recompute (--recompute full: each layer's forward runs again in its
# backward, only layer inputs kept): dense in f32, bf16 and bf16-mixed,
# tp_sp_async_vp (the SP collectives re-run), cp ring, and MiniMind in bf16.
# The copies run the same kernels on the same inputs: the gradients must
# match the cpu as closely as without recompute. Selective recompute (norms,
# rope and SwiGLU re-run; names ending in -selective): dense f32 and bf16,
# and tp_sp_async_vp (the re-gather beside it).
for dtype in f32 bf16 mixed; do
  run=()
  [ "$dtype" = bf16 ] && run=(--run "$here/bf16.run.yaml")
  [ "$dtype" = mixed ] && run=(--run "$here/mixed.run.yaml")
  for policy in full selective; do
    [ $policy = selective ] && [ $dtype = mixed ] && continue
    name=recompute
    [ $policy = selective ] && name=selective
    "$sharc" compile "$here/small.yaml" "${run[@]}" --emit-logits \
      --keep-grads --recompute $policy -o "$out/small-$dtype-dense-$name.plan"
  done
done
"$sharc" compile "$here/small.yaml" --emit-logits --keep-grads \
  --mode tp_sp_async_vp --tp 2 --recompute full \
  -o "$out/small-f32-tp_sp_async_vp-recompute.plan"
"$sharc" compile "$here/small.yaml" --emit-logits --keep-grads --cp 2 \
  --cp-comm ring --recompute full -o "$out/small-f32-cp-ring-recompute.plan"
"$sharc" compile "$root/models/minimind.yaml" --run "$here/bf16.run.yaml" \
  --emit-logits --keep-grads --recompute full \
  -o "$out/minimind-bf16-dense-recompute.plan"
"$sharc" compile "$here/small.yaml" --emit-logits --keep-grads \
  --mode tp_sp_async_vp --tp 2 --recompute selective \
  -o "$out/small-f32-tp_sp_async_vp-selective.plan"
# The first layer whole and the others selectively (names ending in -mixed,
# what --recompute auto settles on between the two): dense f32 and bf16,
# tp_sp_async_vp.
for dtype in f32 bf16; do
  run=()
  [ "$dtype" = bf16 ] && run=(--run "$here/bf16.run.yaml")
  "$sharc" compile "$here/small.yaml" "${run[@]}" --emit-logits --keep-grads \
    --recompute full --recompute-layers 1 --recompute-rest selective \
    -o "$out/small-$dtype-dense-mixed.plan"
done
"$sharc" compile "$here/small.yaml" --emit-logits --keep-grads \
  --mode tp_sp_async_vp --tp 2 --recompute full --recompute-layers 1 \
  --recompute-rest selective -o "$out/small-f32-tp_sp_async_vp-mixed.plan"
# ... and on two 1F1B stages of four layers, two microbatches: the first
# stage's layers whole, the second's selectively.
sed 's/num_hidden_layers: 2/num_hidden_layers: 4/' "$here/small.yaml" \
  >"$out/small-4-layers.yaml"
"$sharc" compile "$out/small-4-layers.yaml" --keep-grads --mode pp --pp 2 \
  --microbatches 2 --pp-schedule 1f1b --recompute full --recompute-layers 2 \
  --recompute-rest selective -o "$out/small-f32-pp-1f1b-mixed.plan"
