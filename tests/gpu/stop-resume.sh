#!/usr/bin/env bash
# A stopped run, run again with --resume, ends with the uninterrupted run's
# checkpoint and log: each PLAN is stopped once step 3 is printed (SIGINT
# to one process; SIGUSR1 to the processes of mpirun, a process per GPU
# where the node has one per rank, else one process driving every rank;
# --stop-file under mpirun), resumed with the same command to 5 steps past
# the stop, and compared with an uninterrupted run of as many steps, byte for byte (set
# SHARC_CUDNN_DETERMINISTIC=1 on cuda: cuDNN's attention backward is not
# otherwise reproducible). CUDA graphs and background saves (--save-every
# 4) are on. Prints one line per plan and launch; exit 1 if any differs.
# usage: [BACKEND=cpu] [MPIRUN=path] stop-resume.sh SHARC_RUN PLAN...
set -uo pipefail
sharc_run=$1
shift
backend=${BACKEND:-cuda}
mpirun=${MPIRUN:-mpirun}
here=$(cd "$(dirname "$0")" && pwd)
stop=$here/../lit/run/Inputs/stop-run.sh
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
for plan in "$@"; do
  name=$(basename "$plan" .plan)
  ranks=$("$here/plan-ranks.sh" "$plan")
  common=(--backend "$backend")
  [ "$backend" = cuda ] && common+=(--cuda-graph)
  launches=(one)
  command -v "$mpirun" >/dev/null && launches+=(mpi mpi-file)
  for launch in "${launches[@]}"; do
    run=("$sharc_run") flags=("${common[@]}") signal=INT
    if [ $launch != one ]; then
      processes=$ranks
      [ "$backend" = cuda ] && [ "$gpus" -lt "$ranks" ] && processes=1
      run=("$mpirun" -np "$processes" -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE
           -x SHARC_CUDNN_DETERMINISTIC "$sharc_run")
      # To the ranks themselves: the H200 node's mpirun (Open MPI 4.1.6)
      # did not forward SIGUSR1 where Debian's 4.1.4 does.
      signal=children:USR1
    fi
    if [ $launch = mpi-file ]; then
      signal=file:$work/STOP
      flags+=(--stop-file "$work/STOP")
    fi
    # More ranks than GPUs in one process: they share them.
    [ "$backend" = cuda ] && [ "$gpus" -lt "$ranks" ] && flags+=(--share-gpus)
    ckpt=$work/$name-$launch.safetensors log=$work/$name-$launch.csv
    resume=(--save "$ckpt" --save-every 4 --keep-last 2 --log "$log" --resume)
    ended=$("$stop" $signal '^step +3 ' "$work/stopped.txt" "${run[@]}" \
      "$plan" --steps 1000000 "${flags[@]}" "${resume[@]}")
    n=$(sed -n 's/^stopped by .* after step \([0-9]*\) .*/\1/p' "$work/stopped.txt")
    by=$(sed -n 's/^stopped by \(.*\) after step .*/\1/p' "$work/stopped.txt")
    if [ -z "$n" ]; then
      echo "FAIL  $name ($launch): $ended, no stop line"
      tail -n 5 "$work/stopped.txt" "$work/stopped.txt.err"
      failed=1
      continue
    fi
    steps=$((n + 5))
    timeout 300 "${run[@]}" "$plan" --steps $steps "${flags[@]}" \
      "${resume[@]}" >"$work/resumed.txt" 2>&1
    timeout 300 "$sharc_run" "$plan" --steps $steps "${flags[@]}" \
      --save "$work/ref.safetensors" --log "$work/ref.csv" >"$work/ref.txt" 2>&1
    rows() { grep ',train,' "$1" | cut -d, -f1-5; }
    if ! grep -q "^resuming at step $n of $steps" "$work/resumed.txt"; then
      echo "FAIL  $name ($launch): the second run did not resume at step $n"
      tail -n 5 "$work/resumed.txt"
      failed=1
    elif ! cmp -s "$ckpt" "$work/ref.safetensors"; then
      echo "FAIL  $name ($launch): the checkpoint after step $steps differs"
      failed=1
    elif ! cmp -s <(rows "$log") <(rows "$work/ref.csv"); then
      echo "FAIL  $name ($launch): the logs' train rows differ"
      failed=1
    else
      echo "pass  $name ($launch): $ended after step $n (stopped by $by), resumed to step $steps: checkpoint and $(rows "$log" | wc -l) log rows identical"
    fi
  done
done
exit $failed
