#!/usr/bin/env bash
# One process driving every rank against `mpirun -np PROCESSES`: the same
# plan, seed and steps must print the same losses and save byte-identical
# checkpoints (the same collectives over the same groups: NCCL's on cuda,
# the cpu's reference sums on cpu), and generate the same samples from the
# checkpoint (the plans emit their logits). On cuda one GPU per process;
# on cpu (BACKEND=cpu) PROCESSES (default: the plan's ranks) share them.
# Prints one line per plan; exit 1 if any differs, 77 (ctest's skip)
# without mpirun or enough GPUs.
# usage: [BACKEND=cpu] [MPIRUN=path] [PROCESSES=n] mpi-parity.sh SHARC_RUN STEPS PLAN...
set -uo pipefail
sharc_run=$1
steps=$2
shift 2
backend=${BACKEND:-cuda}
mpirun=${MPIRUN:-mpirun}
export NCCL_NVLS_ENABLE=0
command -v "$mpirun" >/dev/null || { echo "skip: no mpirun"; exit 77; }
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
# mpirun as root (containers) needs Open MPI's consent.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ran=0
failed=0
# Sampled generation from a checkpoint (--generate): each process reads the
# logits gathered over all of them, so the samples must match. Only plans
# that emit their logits (--emit-logits) can generate.
generated_alike() { # PLAN RANKS CKPT; a plan without logits passes
  grep -q '{name: "logits", buffer:' "$1" || return 0
  local args=(--backend "$backend" --load "$3" --generate 1,2,3
              --max-new-tokens 6 --seed 5 --quiet)
  timeout 180 "$sharc_run" "$1" "${args[@]}" >"$work/gen-one.log" 2>&1 &&
    timeout 180 "$mpirun" -np "$2" -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
      "$sharc_run" "$1" "${args[@]}" >"$work/gen-mpi.log" 2>&1 &&
    grep -q '^sample 0:' "$work/gen-one.log" &&
    cmp -s <(grep '^sample' "$work/gen-one.log") \
      <(grep '^sample' "$work/gen-mpi.log")
}
for plan in "$@"; do
  ranks=$("$(dirname "$0")/plan-ranks.sh" "$plan")
  name=$(basename "$plan" .plan)
  processes=$ranks
  [ "$backend" = cpu ] && processes=${PROCESSES:-$ranks}
  if [ "$backend" = cuda ] && [ "$gpus" -lt "$ranks" ]; then
    echo "skip  $name: needs $ranks GPUs, the node has $gpus"
    continue
  fi
  timeout 180 "$sharc_run" "$plan" --backend "$backend" --steps "$steps" \
    --save "$work/$name-one.safetensors" >"$work/one.log" 2>&1
  one=$?
  timeout 180 "$mpirun" -np "$processes" -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE \
    "$sharc_run" "$plan" --backend "$backend" --steps "$steps" \
    --save "$work/$name-mpi.safetensors" >"$work/mpi.log" 2>&1
  mpi=$?
  grep -E '^step ' "$work/one.log" | awk '{print $2, $4}' >"$work/one.loss"
  grep -E '^step ' "$work/mpi.log" | awk '{print $2, $4}' >"$work/mpi.loss"
  if [ $one -ne 0 ] || [ $mpi -ne 0 ]; then
    echo "FAIL  $name: exit $one (one process), $mpi (mpirun)"
    tail -n 20 "$work/one.log" "$work/mpi.log"
    failed=1
  elif [ "$(wc -l <"$work/one.loss")" -ne "$steps" ] ||
       ! cmp -s "$work/one.loss" "$work/mpi.loss"; then
    echo "FAIL  $name: losses differ"
    paste "$work/one.loss" "$work/mpi.loss"
    failed=1
  elif ! cmp -s "$work/$name-one.safetensors" "$work/$name-mpi.safetensors"; then
    echo "FAIL  $name: the losses agree but the checkpoints differ"
    failed=1
  elif ! generated_alike "$plan" "$processes" "$work/$name-one.safetensors"; then
    echo "FAIL  $name: generation from the checkpoint differs"
    diff "$work/gen-one.log" "$work/gen-mpi.log" | head -n 20
    failed=1
  else
    echo "pass  $name: $steps steps, losses equal ($(tail -n 1 "$work/one.loss" | awk '{print $2}') at the last), checkpoints identical, generation alike"
    grep -m1 "^backend" "$work/mpi.log" | sed 's/^/      /'
    echo "      median step: one process $(grep -o 'median step [0-9.]* ms' "$work/one.log"), mpirun $(grep -o 'median step [0-9.]* ms' "$work/mpi.log")"
  fi
  ran=$((ran + 1))
done
[ "$ran" -eq 0 ] && exit 77
exit $failed
