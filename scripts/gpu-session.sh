#!/usr/bin/env bash
# Runs on a GPU node over what scripts/stage-device.sh put in .device/: the
# CUDA kernel tests, cuda-vs-cpu parity of every mode, compute-sanitizer on
# small plans, and the first throughput numbers beside the PyTorch peer.
# Logs go to $OUT (the device tool's output folder) or ./out.
# usage: scripts/gpu-session.sh [kernels] [parity] [sanitize] [bench]
#                               [curve] [trace] [ceilings] [peers] [attention]
#                               [graph] [hf] [check] [sweep] [mpi]
#                               [mpi-sanitize] [comm] [ncclmem] [eval] [stop]
#                               [decode]
#
# What the next two-GPU session should run, in three calls of under 10
# minutes each (NCCL_NVLS_ENABLE=0 in all):
#   scripts/gpu-session.sh comm mpi mpi-sanitize parity eval stop
#   SWEEPS="layers layers-latency h4096" PEERS="ddp 8 2048 4 compile,tp 8 2048 4 compile" \
#     TRACE_MODE="tp_sp tp_sp_async_vp tp_sp_async_vp-latency" \
#     scripts/gpu-session.sh sweep peers trace ceilings
#   SWEEPS="seq memory" PEERS="ddp 8 8192 4 compile,tp 8 4096 4 compile \
#     --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --intermediate 12928" \
#     scripts/gpu-session.sh sweep peers
# and SHARC_STREAM_PRIORITY=comm|compute with BENCH_MODES=... bench (with
# ddp-zero and ddp-zero3 beside ddp: ZeRO-1's and ZeRO-3's grouped
# reduce-scatters and all-gathers have run only through the host so far),
# and
# `scripts/gpu-session.sh ncclmem` (about two minutes: what NCCL holds per
# rank beside the plan, the speed issue's memory goal).
#
# On one GPU, everything the sixth session queued ran in the seventh and
# the seventh's in the eighth (docs/benchmarks.md); the twenty-ninth's
# `decode` ran in the thirtieth (docs/training.md, "Each token a CUDA
# graph"). The two-GPU calls above
# should also run the KJV training run of docs/training.md under
# tp_sp_async_vp and ddp beside its single-GPU log, and pp2 and cp2 plans
# plainly (not only --compare-cpu, whose checking mode hid a set-up crash
# of every pp plan until the eighteenth session). Multi-rank plans run on
# one GPU with --share-gpus:
#   PARITY_PLANS="small-f32-cp-ring-balanced ..." scripts/gpu-session.sh parity
#   BENCH_MODES="dense dense-unfused" BENCH_FLAGS=--cuda-graph \
#     PEERS="dense 8 2048 4 compile" scripts/gpu-session.sh bench peers
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stage=$root/.device
out=${OUT:-$root/out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
# yaml-cpp from the stage; cuBLASLt and NCCL from the node's CUDA or, failing
# that, PyTorch's copies.
torchlib=$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null || true)
export LD_LIBRARY_PATH=$stage/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for dir in "$torchlib"/nvidia/nccl/lib "$torchlib"/nvidia/cu13/lib; do
  [ -d "$dir" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
done
# cuDNN: PyTorch's copy first where it is newer than the node's (9.19
# against 9.14 on the H200 node), as sharc was built against 9.19's headers.
[ -d "$torchlib/nvidia/cudnn/lib" ] &&
  export LD_LIBRARY_PATH=$torchlib/nvidia/cudnn/lib:$LD_LIBRARY_PATH
run=$stage/bin/sharc-run
steps=${*:-kernels parity sanitize bench trace ceilings peers}

nvidia-smi -L
ldd "$run" | grep -E "nccl|cublas|cudnn|nvrtc|cudart|yaml|not found"
for step in $steps; do
  echo "== $step"
  case $step in
  kernels)
    "$stage/bin/KernelsCudaTest" 2>&1 | tee "$out/kernels.log" | tail -n 40 ;;
  comm)
    # NCCL's collectives against the cpu's (all_to_all, axis sets), and
    # those of ranks sharing GPUs (on two GPUs, across them over NVLink).
    "$stage/bin/CommunicatorCudaTest" 2>&1 | tee "$out/comm.log" | tail -n 20
    "$stage/bin/PeerMemoryCommunicatorTest" 2>&1 | tee "$out/peer.log" |
      tail -n 20 ;;
  parity)
    # Every mode of the small model; minimind (head_dim 96) where its cpu
    # reference stays short.
    # PARITY_PLANS (names under plans/) narrows it, e.g. to one-GPU plans.
    if [ -n "${PARITY_PLANS:-}" ]; then
      plans=()
      for name in $PARITY_PLANS; do plans+=("$stage/plans/$name.plan"); done
    else
      plans=("$stage"/plans/small-*.plan "$stage"/plans/minimind-f32-dense.plan
             "$stage"/plans/minimind-bf16-tp_sp_async_vp.plan)
    fi
    "$root/tests/gpu/parity.sh" "$run" "${plans[@]}" 2>&1 |
      tee "$out/parity.log" ;;
  sanitize)
    # A plan with more ranks than GPUs shares them (--share-gpus), as in
    # tests/gpu/parity.sh. racecheck also flags cuDNN's and cuBLAS's own
    # Hopper kernels (wgmma, TMA barriers it does not model); the summary
    # line names the kernels so sharc's can be told apart.
    gpus=$(nvidia-smi -L | grep -c '^GPU')
    for plan in ${SANITIZE_PLANS:-small-f32-tp_sp_async_vp small-bf16-ddp small-f32-dense}; do
      ranks=$("$root/tests/gpu/plan-ranks.sh" "$stage/plans/$plan.plan")
      share=()
      [ "$gpus" -lt "$ranks" ] && share=(--share-gpus)
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        compute-sanitizer --tool $tool --error-exitcode 9 \
          "$run" "$stage/plans/$plan.plan" --backend cuda "${share[@]}" \
          --steps 1 --quiet >"$out/sanitize-$plan-$tool.log" 2>&1
        echo "$tool $plan: exit $? $(grep -c 'ERROR SUMMARY: 0' \
          "$out/sanitize-$plan-$tool.log") clean summaries"
        # The kernels racecheck reports, by name prefix.
        grep -o 'Race reported between [A-Za-z]* access at [A-Za-z0-9_]*' \
          "$out/sanitize-$plan-$tool.log" | awk '{print "  race in " $NF}' |
          cut -c1-60 | sort | uniq -c
      done
    done ;;
  bench)
    # BENCH_ATTENTION="cudnn sharc" runs each plan with both attentions.
    for mode in ${BENCH_MODES:-ddp tp tp_sp tp_sp_async tp_vp tp_sp_async_vp}; do
      for attention in ${BENCH_ATTENTION:-cudnn}; do
        log=$out/bench-$mode-$attention.log
        SHARC_ATTENTION=$attention "$run" "$stage/bench/$mode.plan" \
          --backend cuda --steps 20 ${BENCH_FLAGS:-} >"$log" 2>&1
        echo "$mode ($attention attention): $(grep -E 'median|mean|tokens' "$log" | tail -n 1)"
        grep -E "device in use|runs on sharc" "$log" | tail -n 3
      done
    done ;;
  sweep)
    # The `sharc bench` manifests stage-device.sh compiled (SWEEPS narrows
    # them): every point of each in one sharc-run process, CSV per sweep.
    for name in ${SWEEPS:-layers seq memory h4096}; do
      timeout 400 "$run" --bench "$stage/sweeps/$name/bench.yaml" \
        --backend cuda --output_csv "$out/sweep-$name.csv" \
        >"$out/sweep-$name.log" 2>&1
      echo "$name: exit $?"
      tail -n 30 "$out/sweep-$name.log"
    done ;;
  mpi)
    # mpirun, one GPU per process, against one process driving both.
    "$root/tests/gpu/mpi-parity.sh" "$run" 5 \
      ${MPI_PLANS:-"$stage"/plans/small-f32-tp_sp_async_vp.plan "$stage"/plans/small-bf16-ddp.plan "$stage"/plans/small-f32-ddp-zero.plan "$stage"/bench/tp_sp_async_vp.plan} \
      2>&1 | tee "$out/mpi.log" ;;
  mpi-sanitize)
    # The sanitizer serialises kernels within a process, so two GPUs that
    # meet in NCCL must each have their own: one process per GPU.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    for plan in ${SANITIZE_PLANS:-small-f32-tp_sp_async_vp small-bf16-ddp}; do
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
        timeout 240 mpirun -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
          compute-sanitizer --tool $tool --error-exitcode 9 \
          "$run" "$stage/plans/$plan.plan" --backend cuda --steps 1 --quiet \
          >"$out/mpi-sanitize-$plan-$tool.log" 2>&1
        echo "$tool $plan (mpirun -np 2): exit $? $(grep -c 'ERROR SUMMARY: 0' \
          "$out/mpi-sanitize-$plan-$tool.log") clean summaries"
      done
    done ;;
  graph)
    # CUDA-graph replay against eager enqueueing: identical checkpoints.
    "$root/tests/gpu/graph-parity.sh" "$run" 6 \
      ${GRAPH_PLANS:-"$stage"/plans/small-bf16-dense.plan "$stage"/plans/small-f32-tp_sp_async_vp.plan "$stage"/plans/small-bf16-ddp.plan "$stage"/bench/dense.plan "$stage"/bench/tp_sp_async_vp.plan} \
      2>&1 | tee "$out/graph.log" ;;
  stop)
    # A run stopped by a signal and resumed with --resume ends as the
    # uninterrupted run does (one process, and mpirun with SIGUSR1).
    SHARC_CUDNN_DETERMINISTIC=1 "$root/tests/gpu/stop-resume.sh" "$run" \
      ${STOP_PLANS:-"$stage"/plans/small-bf16-dense.plan "$stage"/plans/small-f32-tp_sp_async_vp.plan "$stage"/plans/small-bf16-ddp.plan} \
      2>&1 | tee "$out/stop.log" ;;
  eval)
    # Validation and generation, plain runs (grouped AdamW and transfers as
    # in production), cuda against cpu: every pipeline schedule, cp, tp, dp.
    plans=()
    for name in ${EVAL_PLANS:-small-f32-dense small-bf16-dense small-f32-ddp \
        small-f32-tp_sp_async_vp small-f32-cp-ring-balanced small-f32-pp-gpipe \
        small-f32-pp-1f1b small-bf16-pp-1f1b small-f32-pp-interleaved \
        small-f32-pp-logits minimind-f32-dense}; do
      plans+=("$stage/plans/$name.plan")
    done
    "$root/tests/gpu/eval-parity.sh" "$run" "${plans[@]}" 2>&1 |
      tee "$out/eval.log" ;;
  decode)
    # Generation through key/value caches against the cpu, the windowed
    # forward and transformers' generate(), with each one's ms a token.
    "$root/tests/gpu/decode-parity.sh" "$run" "$stage/decode" 2>&1 |
      tee "$out/decode.log" ;;
  check)
    # --check names the first instruction whose output went non-finite;
    # without it, a step whose updates stored an infinity stops the run.
    for plan in small-f32-dense small-bf16-dense; do
      "$root/tests/gpu/check-nonfinite.sh" "$run" "$stage/plans/$plan.plan"
    done 2>&1 | tee "$out/check.log"
    "$root/tests/gpu/check-nonfinite.sh" "$run" \
      "$stage/plans/small-f32-ddp.plan" --share-gpus 2>&1 |
      tee -a "$out/check.log" ;;
  hf)
    # transformers' Qwen3ForCausalLM on sharc's exports against sharc's logits.
    python3 "$root/tests/gpu/hf-logits.py" "$stage"/hf/*/ 2>&1 |
      tee "$out/hf.log" ;;
  attention)
    # The attention kernels alone, beside PyTorch's SDPA on the same shapes.
    "$stage/bin/sharc-attention-bench" 2>&1 | tee "$out/attention.log"
    python3 "$stage/attention-peer.py" 2>&1 | tee -a "$out/attention.log" ;;
  curve)
    for plan in "$stage"/curve/*.plan; do
      "$root/tests/gpu/loss-curve.sh" "$run" "$plan" 200 1e-4 5e-2 \
        "$stage/curve/docs.tokens" 2>&1 | tee -a "$out/curve.log"
    done ;;
  trace)
    # CUDA events around every instruction of the last of 5 steps, for each
    # mode of TRACE_MODE (default tp_sp_async_vp).
    for mode in ${TRACE_MODE:-tp_sp_async_vp}; do
      "$run" "$stage/bench/$mode.plan" --backend cuda --steps 5 \
        --trace "$out/trace-$mode.json" >"$out/trace-$mode.log" 2>&1
      tail -n 2 "$out/trace-$mode.log"
      python3 "$root/scripts/trace-summary.py" "$out/trace-$mode.json" |
        tee "$out/trace-summary-$mode.txt"
    done ;;
  ncclmem)
    # What NCCL holds beside the plan on two GPUs, and what it costs to
    # hold less: "device in use" and the step under NCCL's defaults, then
    # smaller buffers and fewer channels (NCCL_MEM_PLANS narrows the plans).
    for mode in ${NCCL_MEM_PLANS:-ddp tp_sp_async_vp}; do
      for env in "" NCCL_BUFFSIZE=1048576 NCCL_MAX_NCHANNELS=8 \
                 "NCCL_BUFFSIZE=1048576 NCCL_MAX_NCHANNELS=8"; do
        log=$out/ncclmem-$mode.log
        env $env "$run" "$stage/bench/$mode.plan" --backend cuda --steps 30 \
          --cuda-graph >"$log" 2>&1
        echo "$mode ${env:-defaults}: $(grep -E 'median' "$log" | tail -n 1)"
        grep -E "device in use" "$log" | tail -n 2
      done
    done ;;
  ceilings)
    python3 "$root/scripts/measure-machine.py" >"$out/machine.yaml" 2>&1
    cat "$out/machine.yaml" ;;
  peers)
    # What a PyTorch user would run on the same point (8 layers, seq 2048,
    # global batch 4, bf16 AdamW), in the same session.
    IFS=, read -ra peers <<<"${PEERS:-ddp 8 2048 4,ddp 8 2048 4 compile,tp 8 2048 4 compile}"
    for peer in "${peers[@]}"; do
      if [ "${peer%% *}" = dense ]; then
        timeout 300 python3 "$stage/torch_peer.py" $peer 2>&1 | grep PEER=
      else
        timeout 300 torchrun --standalone --nproc_per_node=2 \
          "$stage/torch_peer.py" $peer 2>&1 | grep PEER= | tail -n 1
      fi
    done ;;
  esac
done
