#!/usr/bin/env bash
# Stages what a GPU node needs into .device/ (git-ignored): sharc-run and the
# CUDA kernel tests built here, the libraries a node may lack (yaml-cpp),
# the GPU parity plans and the benchmark plans compiled here (a node has no
# LLVM), and the PyTorch peer. The device tool carries .device/ and runs
# scripts/gpu-session.sh there.
# usage: scripts/stage-device.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
stage=$root/.device
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib" "$stage/plans" "$stage/bench"
cp "$build/bin/sharc-run" "$stage/bin/"
cp "$build/tests/unit/kernels/KernelsCudaTest" "$stage/bin/"
cp "$build/tests/gpu/CommunicatorCudaTest" \
  "$build/tests/gpu/PeerMemoryCommunicatorTest" "$stage/bin/"
cp "$build/bin/sharc-attention-bench" "$stage/bin/"
cp "$root/tests/gpu/attention-peer.py" "$stage/"
for lib in $(ldd "$build/bin/sharc-run" | awk '/yaml-cpp/ {print $3}'); do
  cp -L "$lib" "$stage/lib/"
done
"$root/tests/gpu/make-plans.sh" "$build/bin/sharc" "$stage/plans" >/dev/null
# The original's throughput point: minimind, 8 layers, seq 2048, global
# batch 4, pure bf16 with AdamW, in its six modes at tp=2 (ddp at dp=2).
run=$root/models/bench-seq2048.run.yaml
"$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
  --mode ddp --dp 2 -o "$stage/bench/ddp.plan"
for mode in tp tp_sp tp_sp_async tp_vp tp_sp_async_vp; do
  "$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
    --mode $mode --tp 2 -o "$stage/bench/$mode.plan"
done
"$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
  -o "$stage/bench/dense.plan"
# ddp with ZeRO-1 (the optimizer state sharded over dp), beside ddp.
"$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
  --mode ddp --dp 2 --zero 1 -o "$stage/bench/ddp-zero.plan"
# ... and with ZeRO-3 (the parameters as well).
"$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
  --mode ddp --dp 2 --zero 3 -o "$stage/bench/ddp-zero3.plan"
# Full recompute (--recompute full), beside the same plans without it.
for mode in dense ddp tp_sp_async_vp; do
  flags=()
  [ $mode = ddp ] && flags=(--mode ddp --dp 2)
  [ $mode = tp_sp_async_vp ] && flags=(--mode $mode --tp 2)
  "$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
    "${flags[@]}" --recompute full -o "$stage/bench/$mode-recompute.plan"
  "$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
    "${flags[@]}" --recompute selective -o "$stage/bench/$mode-selective.plan"
  "$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
    "${flags[@]}" --recompute full --recompute-layers 4 \
    --recompute-rest selective -o "$stage/bench/$mode-mixed.plan"
done
# Generation through key/value caches (--decode) and through the window
# (--emit-logits), MiniMind at 512 positions, the batch-1 decode plans with
# a prefill of 64 rows (and at 4096 positions), and a training plan for the
# checkpoint they all load (tests/gpu/decode-parity.sh).
mkdir -p "$stage/decode"
for dtype in float32 bfloat16; do
  for batch in 1 4; do
    printf 'run:\n  seq_len: 512\n  micro_batch_size: %s\n  dtype: %s\n' \
      "$batch" "$dtype" >"$stage/decode/run.yaml"
    "$build/bin/sharc" compile "$root/models/minimind.yaml" \
      --run "$stage/decode/run.yaml" --decode \
      -o "$stage/decode/mm-$dtype-b$batch-decode.plan"
    "$build/bin/sharc" compile "$root/models/minimind.yaml" \
      --run "$stage/decode/run.yaml" --emit-logits --no-optimizer \
      -o "$stage/decode/mm-$dtype-b$batch-window.plan"
    [ "$batch" = 1 ] && "$build/bin/sharc" compile \
      "$root/models/minimind.yaml" --run "$stage/decode/run.yaml" --decode \
      --prefill-rows 64 -o "$stage/decode/mm-$dtype-b$batch-prefill.plan"
  done
done
# Caches of 4096 positions for a prompt of 3000 ids (the chunked decode
# attention's long end), with prefills of 64, 256, 512 and 1024 rows.
for dtype in float32 bfloat16; do
  printf 'run:\n  seq_len: 4096\n  micro_batch_size: 1\n  dtype: %s\n' \
    "$dtype" >"$stage/decode/run.yaml"
  "$build/bin/sharc" compile "$root/models/minimind.yaml" \
    --run "$stage/decode/run.yaml" --decode --prefill-rows 64 \
    -o "$stage/decode/mm-$dtype-b1-long.plan"
  for rows in 256 512 1024; do
    "$build/bin/sharc" compile "$root/models/minimind.yaml" \
      --run "$stage/decode/run.yaml" --decode --prefill-rows $rows \
      -o "$stage/decode/mm-$dtype-b1-long-p$rows.plan"
  done
done
printf 'run:\n  seq_len: 64\n  micro_batch_size: 1\n  dtype: float32\n' \
  >"$stage/decode/run.yaml"
"$build/bin/sharc" compile "$root/models/minimind.yaml" \
  --run "$stage/decode/run.yaml" -o "$stage/decode/mm-train.plan"
# The compute-bound point of the speed issue, on one GPU.
"$build/bin/sharc" compile "$root/models/bench-hidden4096.yaml" \
  -o "$stage/bench/dense-h4096.plan"
# q/k/v and gate/up are one GEMM each by default; the same points with a
# GEMM for every projection (--no-fuse-projections), and gate/up alone
# (read in place by swiglu_packed), to measure what the fusion gains.
for mode in dense ddp tp_sp_async_vp; do
  flags=()
  [ $mode = ddp ] && flags=(--mode ddp --dp 2)
  [ $mode = tp_sp_async_vp ] && flags=(--mode $mode --tp 2)
  "$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
    "${flags[@]}" --no-fuse-projections -o "$stage/bench/$mode-separate.plan"
done
"$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
  --fuse-projections=gate_up -o "$stage/bench/dense-gateup.plan"
"$build/bin/sharc" compile "$root/models/bench-hidden4096.yaml" \
  --fuse-projections=gate_up -o "$stage/bench/dense-h4096-gateup.plan"
# The speed issue's sweeps as `sharc bench` manifests (compiled here, run
# there by `sharc-run --bench`, all points in one process): the original's
# layer scan at seq 2048 and sequence scan at 8 layers, its memory
# experiment, and the compute-bound point (hidden 4096), all six modes.
common=(--tp_size 2 --modes ddp tp tp_sp tp_sp_async tp_vp tp_sp_async_vp
        --vocab_size 6400
        --micro_batch_size 4 --num_microbatches 1 --dtype bfloat16
        --warmup_iters 10 --benchmark_iters 10 --cuda_graph --compile-only)
"$build/bin/sharc" bench --kind throughput "${common[@]}" --hidden_size 768 \
  --num_attention_heads 8 --num_key_value_heads 4 \
  --num_hidden_layers 2 4 8 16 32 --seq_len 2048 \
  --work-dir "$stage/sweeps/layers" >/dev/null
"$build/bin/sharc" bench --kind throughput "${common[@]}" --hidden_size 768 \
  --num_attention_heads 8 --num_key_value_heads 4 \
  --num_hidden_layers 8 --seq_len 1024 2048 4096 8192 16000 \
  --work-dir "$stage/sweeps/seq" >/dev/null
# The same layer scan (2, 8, 32 layers) in the latency-hiding order.
"$build/bin/sharc" bench --kind throughput "${common[@]}" --hidden_size 768 \
  --num_attention_heads 8 --num_key_value_heads 4 \
  --num_hidden_layers 2 8 32 --seq_len 2048 --schedule latency \
  --work-dir "$stage/sweeps/layers-latency" >/dev/null
"$build/bin/sharc" bench --kind memory --batch_policy fixed_per_rank \
  "${common[@]}" --hidden_size 768 \
  --num_attention_heads 8 --num_key_value_heads 4 --num_hidden_layers 2 4 8 \
  --seq_len 2048 --work-dir "$stage/sweeps/memory" >/dev/null
"$build/bin/sharc" bench --kind throughput "${common[@]}" \
  --hidden_size 4096 --num_attention_heads 32 --num_key_value_heads 8 \
  --intermediate_size 12928 --num_hidden_layers 8 --seq_len 4096 \
  --work-dir "$stage/sweeps/h4096" >/dev/null
# Without the default fusions (the adds as their own kernels, q/k norm and
# rope apart), to measure what they gain.
for mode in dense ddp tp_sp_async_vp; do
  flags=()
  [ $mode = ddp ] && flags=(--mode ddp --dp 2)
  [ $mode = tp_sp_async_vp ] && flags=(--mode $mode --tp 2)
  "$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
    "${flags[@]}" --no-fuse-adds --no-fuse-norm-rope \
    -o "$stage/bench/$mode-unfused.plan"
done
"$build/bin/sharc" compile "$root/models/bench-hidden4096.yaml" \
  --no-fuse-adds --no-fuse-norm-rope -o "$stage/bench/dense-h4096-unfused.plan"
# The tensor-parallel modes in the latency-hiding order (--schedule latency).
for mode in tp tp_sp tp_sp_async tp_vp tp_sp_async_vp; do
  "$build/bin/sharc" compile "$root/models/minimind.yaml" --run "$run" \
    --mode $mode --tp 2 --schedule latency -o "$stage/bench/$mode-latency.plan"
done
# 200-step loss curves of the tiny model on real text (this repository's
# documentation as bytes, folded into its 128-token vocabulary).
mkdir -p "$stage/curve"
for mode in dense tp_sp_async_vp; do
  flags=()
  [ $mode != dense ] && flags=(--mode $mode --tp 2)
  "$build/bin/sharc" compile "$root/models/tiny.yaml" "${flags[@]}" \
    -o "$stage/curve/tiny-$mode.plan"
done
# Two microbatches per step (no logits output: --compare-cpu cannot take
# them, the loss curve can), one GPU and two.
for mode in dense ddp tp_sp_async_vp; do
  flags=()
  [ $mode = ddp ] && flags=(--mode ddp --dp 2)
  [ $mode = tp_sp_async_vp ] && flags=(--mode $mode --tp 2)
  "$build/bin/sharc" compile "$root/models/tiny.yaml" "${flags[@]}" \
    --run "$root/tests/gpu/microbatch.run.yaml" \
    -o "$stage/curve/tiny-$mode-mb2.plan"
done
python3 - "$stage/curve/docs.tokens" "$root"/README.md "$root"/docs/*.md <<'PY'
import struct, sys
data = b"".join(open(path, "rb").read() for path in sys.argv[2:])
with open(sys.argv[1], "wb") as out:
    out.write(struct.pack("<%di" % len(data), *(b & 0x7F for b in data)))
PY
# Hugging Face exports of three small models with sharc's logits beside
# them, for tests/gpu/hf-logits.py (transformers is on the GPU node).
"$root/tests/gpu/hf-export.sh" "$build/bin" "$stage/hf" >/dev/null
cp "$root/../shared/peers/torch_peer.py" "$stage/" 2>/dev/null || true
du -sh "$stage"
