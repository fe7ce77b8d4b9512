#!/usr/bin/env bash
# Generation through key/value caches (sharc compile --decode) on the GPU,
# over the plans scripts/stage-device.sh compiled into DIR: MiniMind at
# 512 positions, f32 and bf16, batch 1 and 4, each as a decode plan and as
# the windowed forward (--emit-logits), the batch-1 plans with a prefill
# (at 512 positions, and at 4096 for a prompt of 3000 ids with prefills of
# 64, 256, 512 and 1024 rows), and a training plan that makes the
# checkpoint. Prints each plan's ms a token; exit 1 where the f32 decode
# ids differ from the cpu's or from the windowed plan's. Then, from the
# same checkpoint, transformers' generate() (its own cache) greedily with
# its ms a token (tests/gpu/hf-generate.py --time), where PyTorch is, and
# timed only, generate() in bf16 (HF_FLAGS adds runs: "--compile" is a
# static cache under torch.compile, which died of a segmentation fault on
# the node's PyTorch 2.11 and transformers 5.17). BACKEND=cpu runs the GPU side on the cpu
# (to check this script), TOKENS the new tokens (64), BASELINE another
# sharc-run (an earlier build) whose ms a token on the decode plans is
# printed beside each.
# usage: decode-parity.sh SHARC_RUN DIR
set -uo pipefail
sharc_run=$1
dir=$2
export NCCL_NVLS_ENABLE=0
backend=${BACKEND:-cuda}
tokens=${TOKENS:-64}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$sharc_run" "$dir/mm-train.plan" --backend $backend --steps 1 --quiet \
  --save "$work/m.safetensors" || exit 1
prompt=35,263,394,398
failed=0
for plan in mm-float32-b1 mm-float32-b4 mm-bfloat16-b1 mm-bfloat16-b4; do
  for kind in decode window; do
    timeout 300 "$sharc_run" "$dir/$plan-$kind.plan" --backend $backend \
      --load "$work/m.safetensors" --generate $prompt --max-new-tokens $tokens \
      --temperature 0 >"$work/$plan-$kind.log" 2>&1 ||
      { echo "FAIL  $plan-$kind"; tail -n 3 "$work/$plan-$kind.log"; failed=1; }
    echo "$plan-$kind: $(grep generated "$work/$plan-$kind.log")"
    if [ -n "${BASELINE:-}" ] && [ $kind = decode ]; then
      timeout 300 "$BASELINE" "$dir/$plan-$kind.plan" --backend $backend \
        --load "$work/m.safetensors" --generate $prompt \
        --max-new-tokens $tokens --temperature 0 >"$work/baseline.log" 2>&1
      echo "      baseline: $(grep generated "$work/baseline.log")"
    fi
  done
  if cmp -s <(grep '^sample' "$work/$plan-decode.log") \
            <(grep '^sample' "$work/$plan-window.log"); then
    echo "      decode ids = window ids"
  elif [ "${plan#mm-float32}" != "$plan" ]; then
    echo "FAIL  $plan: decode and window ids differ"; failed=1
  else
    echo "      decode and window ids differ (bf16)"
  fi
done
timeout 300 "$sharc_run" "$dir/mm-float32-b1-decode.plan" --backend cpu \
  --load "$work/m.safetensors" --generate $prompt --max-new-tokens $tokens \
  --temperature 0 >"$work/cpu.log" 2>&1
echo "mm-float32-b1-decode on the cpu: $(grep generated "$work/cpu.log")"
if cmp -s <(grep '^sample' "$work/cpu.log") \
          <(grep '^sample' "$work/mm-float32-b1-decode.log"); then
  echo "      cuda ids = cpu ids"
else
  echo "FAIL  mm-float32-b1-decode: cuda and cpu ids differ"; failed=1
fi
# Four prompts of 1 to 6 ids, one a row, on the f32 batch-4 decode plan.
rows=(--generate 35 --generate 263,394,398,35,263,394 --generate 398,35
      --generate 394,398,35)
for where in $backend cpu; do
  timeout 300 "$sharc_run" "$dir/mm-float32-b4-decode.plan" --backend $where \
    --load "$work/m.safetensors" "${rows[@]}" --max-new-tokens 16 \
    --temperature 0 >"$work/rows-$where.log" 2>&1
done
if grep -q '^sample 3:' "$work/rows-cpu.log" &&
   cmp -s <(grep '^sample' "$work/rows-cpu.log") \
          <(grep '^sample' "$work/rows-$backend.log"); then
  echo "four prompts of 1 to 6 ids (f32, batch 4): $backend ids = cpu ids"
else
  echo "FAIL  four prompts of 1 to 6 ids: $backend and cpu ids differ"
  tail -n 4 "$work/rows-cpu.log" "$work/rows-$backend.log"; failed=1
fi
# A prompt of 400 ids through the prefill (64 positions a pass) and a
# position a step: the same ids (f32; bf16 printed), and the time to the
# first new token, which holds the prompt.
long=$(python3 -c "print(','.join(str((i * 37 + 11) % 6400) for i in range(400)))")
for dtype in float32 bfloat16; do
  for kind in prefill decode; do
    plan=$dir/mm-$dtype-b1-$kind.plan
    [ -f "$plan" ] || continue
    timeout 300 "$sharc_run" "$plan" --backend $backend \
      --load "$work/m.safetensors" --generate "$long" --max-new-tokens 16 \
      --temperature 0 >"$work/long-$kind.log" 2>&1
    echo "prompt of 400, mm-$dtype-b1-$kind: $(grep generated "$work/long-$kind.log")"
  done
  [ -f "$dir/mm-$dtype-b1-prefill.plan" ] || continue
  if cmp -s <(grep '^sample' "$work/long-prefill.log") \
            <(grep '^sample' "$work/long-decode.log") &&
     grep -q '^sample 0:' "$work/long-prefill.log"; then
    echo "      prefill ids = decode ids"
  elif [ $dtype = float32 ]; then
    echo "FAIL  prompt of 400: prefill and decode ids differ"; failed=1
  else
    echo "      prefill and decode ids differ (bf16)"
  fi
done
# A prompt of 3000 ids on caches of 4096 positions (the decode attention's
# chunks at their long end; bf16 prefills through cuDNN): the ids against
# the cpu's (f32), and the ms a token there, beside BASELINE's and
# transformers' generate() on the same prompt. The times to the first
# token are printed cold (the process's first generation: each program's
# first run eager, its second captured) and warm (--warmup 3, as
# hf-generate.py times after three warm-up runs).
huge=$(python3 -c "print(','.join(str((i * 53 + 7) % 6400) for i in range(3000)))")
for dtype in float32 bfloat16; do
  plan=$dir/mm-$dtype-b1-long.plan
  [ -f "$plan" ] || continue
  timeout 300 "$sharc_run" "$plan" --backend $backend \
    --load "$work/m.safetensors" --generate "$huge" --max-new-tokens 32 \
    --temperature 0 >"$work/huge-$dtype.log" 2>&1
  echo "prompt of 3000, mm-$dtype-b1-long: $(grep generated "$work/huge-$dtype.log")"
  timeout 300 "$sharc_run" "$plan" --backend $backend \
    --load "$work/m.safetensors" --generate "$huge" --max-new-tokens 32 \
    --temperature 0 --warmup 3 >"$work/warm.log" 2>&1
  echo "      warm: $(grep generated "$work/warm.log")"
  cmp -s <(grep '^sample' "$work/warm.log") \
         <(grep '^sample' "$work/huge-$dtype.log") ||
    { echo "FAIL  prompt of 3000: warm and cold ids differ"; failed=1; }
  if [ -n "${BASELINE:-}" ]; then
    timeout 300 "$BASELINE" "$plan" --backend $backend \
      --load "$work/m.safetensors" --generate "$huge" --max-new-tokens 32 \
      --temperature 0 >"$work/baseline.log" 2>&1
    echo "      baseline: $(grep generated "$work/baseline.log")"
  fi
  # The same prompt through prefills of 256, 512 and 1024 rows: the same
  # ids (f32; bf16's may part at a near tie), warm.
  for rows in 256 512 1024; do
    [ -f "$dir/mm-$dtype-b1-long-p$rows.plan" ] || continue
    timeout 300 "$sharc_run" "$dir/mm-$dtype-b1-long-p$rows.plan" \
      --backend $backend --load "$work/m.safetensors" --generate "$huge" \
      --max-new-tokens 32 --temperature 0 --warmup 3 >"$work/rows.log" 2>&1
    echo "      prefill of $rows rows, warm: $(grep generated "$work/rows.log")"
    cmp -s <(grep '^sample' "$work/rows.log") \
           <(grep '^sample' "$work/huge-$dtype.log") ||
      echo "      prefill of $rows rows: ids differ from 64 rows'"
  done
  [ $dtype = float32 ] || continue
  timeout 300 "$sharc_run" "$plan" --backend cpu --load "$work/m.safetensors" \
    --generate "$huge" --max-new-tokens 32 --temperature 0 \
    >"$work/huge-cpu.log" 2>&1
  if grep -q '^sample 0:' "$work/huge-cpu.log" &&
     cmp -s <(grep '^sample' "$work/huge-cpu.log") \
            <(grep '^sample' "$work/huge-float32.log"); then
    echo "      $backend ids = cpu ids"
  else
    echo "FAIL  prompt of 3000: $backend and cpu ids differ"; failed=1
  fi
done
if python3 -c "import torch, transformers" 2>/dev/null; then
  if [ -f "$work/huge-float32.log" ]; then
    ids=$(grep '^sample 0:' "$work/huge-float32.log" | cut -d: -f2)
    python3 "$(dirname "$0")/hf-generate.py" "$work/m.safetensors" \
      --prompt "$huge" --max-new-tokens 32 --expect "$ids" --time |
      grep -v '^hf:' || failed=1
    python3 "$(dirname "$0")/hf-generate.py" "$work/m.safetensors" \
      --prompt "$huge" --max-new-tokens 32 --time --dtype bfloat16 2>&1 |
      grep -E 'hf-generate:|Error' | tail -n 2
  fi
  ids=$(grep '^sample 0:' "$work/mm-float32-b1-decode.log" | cut -d: -f2)
  python3 "$(dirname "$0")/hf-generate.py" "$work/m.safetensors" \
    --prompt $prompt --max-new-tokens $tokens --expect "$ids" --time |
    grep -v '^hf:' || failed=1
  for flags in "--dtype bfloat16" ${HF_FLAGS:+"$HF_FLAGS"}; do
    # shellcheck disable=SC2086
    timeout 300 python3 "$(dirname "$0")/hf-generate.py" "$work/m.safetensors" \
      --prompt $prompt --max-new-tokens $tokens --time $flags 2>&1 |
      grep -E 'hf-generate:|Error' | tail -n 2
  done
fi
exit $failed
