#!/usr/bin/env bash
# Evaluation and generation on the GPU against the cpu, plain runs (no
# checking mode, so the grouped AdamW launches and grouped transfers are
# the production ones): from --seed's weights, two training steps with a
# validation before, between and after (--val-data), then, for a plan that
# emits its logits, 8 greedy tokens (--generate). The validation losses
# must agree within TOL relative (f32 1e-4 by default), on the GPU both
# enqueued eagerly and with --cuda-graph (each evaluation's second batch
# replayed from a graph), and the generated ids (every token after the
# first from a graph) exactly where the plan is f32. A plan with more ranks than GPUs runs
# with --share-gpus. Prints one line per plan; exit 1 if any differs.
# usage: eval-parity.sh SHARC_RUN PLAN...
set -uo pipefail
sharc_run=$1
shift
export NCCL_NVLS_ENABLE=0
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# 4096 ids below 128, in every vocabulary here, as raw int32 tokens.
python3 -c "import struct; open('$work/val.bin', 'wb').write(struct.pack('<4096i', *[(i * 37 + 11) % 128 for i in range(4096)]))"
failed=0
for plan in "$@"; do
  name=$(basename "$plan" .plan)
  ranks=$("$(dirname "$0")/plan-ranks.sh" "$plan")
  share=()
  [ "$gpus" -lt "$ranks" ] && share=(--share-gpus)
  args=(--steps 2 --val-data "$work/val.bin" --eval-every 1 --eval-batches 2
        --timeout 60)
  for backend in cpu cuda graph; do
    extra=(--backend $backend)
    [ $backend != cpu ] && extra=(--backend cuda "${share[@]}")
    [ $backend = graph ] && extra+=(--cuda-graph)
    timeout 300 "$sharc_run" "$plan" "${extra[@]}" \
      "${args[@]}" >"$work/$backend.log" 2>&1 || echo "exit $?" >>"$work/$backend.log"
    grep -o 'val loss [0-9.]*' "$work/$backend.log" | awk '{print $3}' \
      >"$work/$backend.val"
  done
  tol=${TOL:-1e-4}
  grep -q 'dtype: bf16' "$plan" && tol=${TOL_BF16:-2e-2}
  differs=""
  for backend in cuda graph; do
    if [ "$(wc -l <"$work/cpu.val")" -ne 3 ] ||
       ! paste "$work/cpu.val" "$work/$backend.val" | awk -v tol="$tol" \
         'NF != 2 || ($1 - $2 > tol * $1 || $2 - $1 > tol * $1) { bad = 1 }
          END { exit bad }'; then
      echo "FAIL  $name: validation losses differ ($backend, tolerance $tol)"
      paste "$work/cpu.val" "$work/$backend.val"
      tail -n 3 "$work/cpu.log" "$work/$backend.log"
      differs=1
    fi
  done
  if [ -n "$differs" ]; then
    failed=1
    continue
  fi
  line="pass  $name: validation $(paste -sd' ' "$work/cuda.val") (cuda), $(paste -sd' ' "$work/graph.val") (graph) against $(paste -sd' ' "$work/cpu.val") (cpu)"
  if grep -q '{name: "logits", buffer:' "$plan"; then
    for backend in cpu cuda; do
      extra=()
      [ $backend = cuda ] && extra=("${share[@]}")
      timeout 300 "$sharc_run" "$plan" --backend $backend "${extra[@]}" \
        --generate 1,2,3 --max-new-tokens 8 --temperature 0 --quiet \
        >"$work/gen-$backend.log" 2>&1
    done
    if ! grep -q '^sample 0:' "$work/gen-cuda.log"; then
      echo "FAIL  $name: generation failed"
      tail -n 3 "$work/gen-cuda.log"
      failed=1
      continue
    elif cmp -s <(grep '^sample' "$work/gen-cpu.log") \
                <(grep '^sample' "$work/gen-cuda.log"); then
      line="$line; greedy ids equal"
    elif grep -q 'dtype: bf16' "$plan"; then
      line="$line; greedy ids differ (bf16)"
    else
      echo "FAIL  $name: greedy ids differ"
      diff <(grep '^sample' "$work/gen-cpu.log") \
           <(grep '^sample' "$work/gen-cuda.log") | head -n 6
      failed=1
      continue
    fi
  fi
  echo "$line"
done
exit $failed
