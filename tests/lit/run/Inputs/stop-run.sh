#!/usr/bin/env bash
# Runs COMMAND (a training run) with stdout to OUT and stderr to OUT.err,
# sends SIGNAL to it (or to mpirun, which forwards SIGUSR1) once OUT shows
# step AFTER, and prints how it ended: "exit N", or "no step AFTER within
# 120 s" or "still running 120 s after" the signal (the run is then
# killed). COMMAND must take the signal itself (not `timeout`, which does
# not forward SIGUSR1).
# usage: stop-run.sh SIGNAL AFTER OUT COMMAND...
set -uo pipefail
signal=$1 after=$2 out=$3
shift 3
"$@" >"$out" 2>"$out.err" &
pid=$!
for _ in $(seq 2400); do
  grep -Eq "^step +$after " "$out" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
if ! grep -Eq "^step +$after " "$out"; then
  kill -KILL $pid 2>/dev/null
  wait $pid
  echo "no step $after within 120 s"
  exit 1
fi
kill -"$signal" $pid
for _ in $(seq 1200); do
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if kill -0 $pid 2>/dev/null; then
  kill -KILL $pid
  wait $pid
  echo "still running 120 s after SIG$signal"
  exit 1
fi
wait $pid
echo "exit $?"
