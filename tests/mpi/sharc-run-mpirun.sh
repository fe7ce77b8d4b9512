#!/usr/bin/env bash
# sharc-run under mpirun on a machine without GPUs, on the cpu backend:
# - each plan's losses, checkpoint and generated samples over processes
#   equal one process's bit for bit (tests/gpu/mpi-parity.sh with
#   BACKEND=cpu): tensor, sequence, data (ZeRO 1 and 3), pipeline and
#   context parallel plans and a bf16-mixed one, one rank per process, and
#   4-rank tp x pp, tp x cp and pp x cp plans and an 8-rank tp x cp x pp
#   one with two ranks per process;
# - evaluations (--val-data) print the same validation losses;
# - background saves (--save-every) and a resume (--load) over processes
#   write the bytes one process writes;
# - what cannot span processes is refused, the process naming itself, with
#   exit 2 and no hang: a plan that 2 processes cannot share evenly, a
#   trace, --bench;
# - a failure in one process alone (its background write) ends the others
#   at once (exit 1, well before the collectives' timeout).
# - a stop asked of mpirun (SIGUSR1, which it forwards), or of one process
#   alone (SIGTERM), stops every process after the same step with the
#   checkpoint one process writes after that many steps, and so does a
#   --stop-file; --resume goes on from the checkpoint the first process
#   picks.
# usage: sharc-run-mpirun.sh MPIRUN SHARC_RUN MODEL SHARC
set -uo pipefail
mpirun=$1 sharc_run=$2 model=$3 sharc=$4
here=$(cd "$(dirname "$0")" && pwd)
gpu_tests=$here/../gpu
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compile() { # OUT FLAGS...
  local out=$1
  shift
  "$sharc" compile "$model" "$@" -o "$work/$out.plan" >/dev/null ||
    { echo "cannot compile $out: $*"; exit 1; }
}
pp=(--run "$gpu_tests/pp.run.yaml")
compile tp --mode tp_sp_async_vp --tp 2 --emit-logits
compile mixed --run "$gpu_tests/mixed.run.yaml" --mode tp_sp_async_vp --tp 2
compile ddp-zero --mode ddp --dp 2 --zero 1
compile ddp-zero3 --mode ddp --dp 2 --zero 3
compile pp-1f1b "${pp[@]}" --mode pp --pp 2 --pp-schedule 1f1b
compile cp-ring --mode cp --cp 2 --cp-comm ring --cp-split balanced
compile tp_pp "${pp[@]}" --mode tp_pp --tp 2 --pp 2
compile tp_cp --mode tp_cp --tp 2 --cp 2 --cp-comm all_gather --sp
compile pp_cp "${pp[@]}" --pp 2 --cp 2 --cp-comm a2a
compile tp_cp_pp "${pp[@]}" --tp 2 --cp 2 --pp 2 --cp-comm ring
compile dense
failed=0
BACKEND=cpu MPIRUN=$mpirun "$gpu_tests/mpi-parity.sh" "$sharc_run" 2 \
  "$work/tp.plan" "$work/mixed.plan" "$work/ddp-zero.plan" \
  "$work/ddp-zero3.plan" "$work/pp-1f1b.plan" "$work/cp-ring.plan" || failed=1
BACKEND=cpu MPIRUN=$mpirun PROCESSES=2 "$gpu_tests/mpi-parity.sh" \
  "$sharc_run" 2 "$work/tp_pp.plan" "$work/tp_cp.plan" "$work/pp_cp.plan" ||
  failed=1
BACKEND=cpu MPIRUN=$mpirun PROCESSES=4 "$gpu_tests/mpi-parity.sh" \
  "$sharc_run" 2 "$work/tp_cp_pp.plan" || failed=1

# Evaluations on a validation file over processes.
python3 -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('<4096i', *[(i * 7919) % 1001 for i in range(4096)]))" "$work/val.bin"
for launch in one mpi; do
  prefix=()
  [ $launch = mpi ] && prefix=("$mpirun" -np 2)
  timeout 120 "${prefix[@]}" "$sharc_run" "$work/tp.plan" --backend cpu \
    --steps 2 --val-data "$work/val.bin" --eval-every 1 \
    >"$work/eval-$launch.log" 2>&1
done
if grep -q '^eval step    2' "$work/eval-one.log" &&
  cmp -s <(grep '^eval' "$work/eval-one.log") \
    <(grep '^eval' "$work/eval-mpi.log"); then
  echo "evaluations over processes: pass ($(grep -c '^eval' "$work/eval-one.log") alike)"
else
  echo "FAIL  evaluations over processes differ"
  failed=1
fi

# Background saves and a resume over processes.
run() { timeout 120 "$@" --backend cpu --quiet >>"$work/runs.log" 2>&1; }
run "$sharc_run" "$work/tp.plan" --steps 4 --save "$work/one.safetensors" \
  --save-every 2 --keep-last 2
run "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" --steps 4 \
  --save "$work/mpi.safetensors" --save-every 2 --keep-last 2
saves=pass
for step in 000002 000004; do
  cmp "$work/one-step$step.safetensors" "$work/mpi-step$step.safetensors" ||
    { echo "FAIL  background save of step $step differs"; saves=FAIL; }
done
run "$sharc_run" "$work/tp.plan" --load "$work/one-step000002.safetensors" \
  --steps 2 --save "$work/one-resumed.safetensors"
run "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" \
  --load "$work/one-step000002.safetensors" --steps 2 \
  --save "$work/mpi-resumed.safetensors"
cmp "$work/one-resumed.safetensors" "$work/mpi-resumed.safetensors" &&
  cmp "$work/one-resumed.safetensors" "$work/one-step000004.safetensors" ||
  { echo "FAIL  a resume over processes differs"; saves=FAIL; }
echo "background saves and a resume over processes: $saves"
[ $saves = pass ] || failed=1

expect() { # LOG WANT...
  local log=$1
  shift
  for want in "$@"; do
    grep -qF -- "$want" "$log" || { echo "missing: $want"; failed=1; }
  done
}
timeout 120 "$mpirun" -np 2 "$sharc_run" "$work/dense.plan" --backend cpu \
  --steps 1 >"$work/dense.log" 2>&1
echo "1-rank plan under mpirun -np 2: exit $?"
expect "$work/dense.log" "sharc-run: process " \
  "the plan's 1 ranks cannot be shared evenly by 2 processes"
timeout 120 "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" --backend cpu \
  --steps 1 --trace "$work/t.json" >"$work/trace.log" 2>&1
echo "a trace under mpirun -np 2: exit $?"
expect "$work/trace.log" "a trace is recorded by one process"
timeout 120 "$mpirun" -np 2 "$sharc_run" --bench "$work/none.yaml" \
  >"$work/bench.log" 2>&1
expect "$work/bench.log" "--bench runs every point in one process"
# (A rotating file's name longer than the file system's 255 bytes: a
# write that fails mid-run.)
start=$(date +%s)
timeout 120 "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" --backend cpu \
  --steps 6 --save "$work/$(printf '%0240d' 0).safetensors" --save-every 1 \
  --timeout 100 >"$work/alone.log" 2>&1
code=$?
seconds=$(($(date +%s) - start))
echo "a background write failing in process 0 alone: exit $code after $seconds s"
expect "$work/alone.log" "sharc-run: process 0: error: step 1: cannot write"
[ $code -eq 1 ] && [ $seconds -lt 60 ] ||
  { echo "FAIL  expected exit 1 within 60 s"; failed=1; }

# Stops: after the same step everywhere, saved as one process saves it.
stopped_alike() { # NAME SIGNAL; the log of $work/NAME.log
  local step
  step=$(sed -n 's/^stopped by .* after step \([0-9]*\) .*/\1/p' "$work/$1.log")
  if ! grep -q "^stopped by $2 after step [0-9]" "$work/$1.log"; then
    echo "FAIL  $1: no stop by $2"
    failed=1
    return
  fi
  run "$sharc_run" "$work/tp.plan" --steps "$step" \
    --save "$work/$1-alone.safetensors"
  if cmp -s "$work/$1.safetensors" "$work/$1-alone.safetensors"; then
    echo "$1: pass (stopped by $2 after step $step, the checkpoint of one process)"
  else
    echo "FAIL  $1: the checkpoint after step $step differs"
    failed=1
  fi
}
ended=$("$here/../lit/run/Inputs/stop-run.sh" USR1 '^step +2 ' "$work/usr1.log" \
  "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" --backend cpu \
  --steps 1000000 --save "$work/usr1.safetensors")
echo "SIGUSR1 to mpirun: $ended"
[ "$ended" = "exit 138" ] || { echo "FAIL  expected exit 138"; failed=1; }
stopped_alike usr1 SIGUSR1
timeout 120 "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" --backend cpu \
  --steps 1000000 --save "$work/term.safetensors" >"$work/term.log" 2>&1 &
launcher=$!
# The second process alone: its pid is the sharc-run whose environment
# names rank 1.
second=
for _ in $(seq 1200); do
  for pid in $(pgrep -f "sharc-run $work/tp.plan"); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null |
      grep -qx OMPI_COMM_WORLD_RANK=1 && second=$pid
  done
  [ -n "$second" ] && grep -Eq '^step +2 ' "$work/term.log" && break
  sleep 0.1
done
[ -n "$second" ] && kill -TERM "$second"
wait $launcher
code=$?
echo "SIGTERM to process 1 alone: exit $code"
[ $code -eq 143 ] || { echo "FAIL  expected exit 143"; failed=1; }
stopped_alike term SIGTERM

# --stop-file, seen by either process (here on one file system): both
# stop after the same step, and the file is gone.
ended=$("$here/../lit/run/Inputs/stop-run.sh" "file:$work/STOP" '^step +2 ' \
  "$work/file.log" "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" \
  --backend cpu --steps 1000000 --save "$work/file.safetensors" \
  --stop-file "$work/STOP")
echo "--stop-file under mpirun: $ended"
[ "$ended" = "exit 75" ] && [ ! -e "$work/STOP" ] ||
  { echo "FAIL  expected exit 75 and the stop file removed"; failed=1; }
stopped_alike file "the stop file $work/STOP (removed)"

# --resume over processes: the first process picks the file for all.
for steps in 2 4; do
  run "$mpirun" -np 2 "$sharc_run" "$work/tp.plan" --steps $steps \
    --save "$work/r.safetensors" --resume
done
run "$sharc_run" "$work/tp.plan" --steps 4 --save "$work/r-alone.safetensors"
if cmp -s "$work/r.safetensors" "$work/r-alone.safetensors"; then
  echo "--resume over processes: pass (2 steps, then to step 4)"
else
  echo "FAIL  --resume over processes differs from one process's 4 steps"
  failed=1
fi

[ $failed -eq 0 ] || cat "$work"/*.log
exit $failed
