#!/usr/bin/env bash
# Runs COMMAND (a training run, a sweep) with stdout to OUT and stderr to
# OUT.err, sends SIGNAL to it (or to mpirun, which forwards SIGUSR1) once a
# line of OUT matches PATTERN (grep -E), and prints how it ended: "exit N",
# or "no PATTERN within 120 s" or "still running 120 s after" the signal
# (the run is then killed). COMMAND must take the signal itself (not
# `timeout`, which does not forward SIGUSR1).
# SIGNAL "children:USR1" sends it to COMMAND's child processes instead
# (mpirun's ranks: not every mpirun forwards SIGUSR1); "file:PATH" creates
# PATH instead (--stop-file PATH).
# usage: stop-run.sh SIGNAL PATTERN OUT COMMAND...
set -uo pipefail
signal=$1 pattern=$2 out=$3
shift 3
"$@" >"$out" 2>"$out.err" &
pid=$!
for _ in $(seq 2400); do
  grep -Eq -- "$pattern" "$out" && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
if ! grep -Eq -- "$pattern" "$out"; then
  kill -KILL $pid 2>/dev/null
  wait $pid
  echo "no $pattern within 120 s"
  exit 1
fi
case $signal in
children:*) signal=${signal#children:}; pkill -"$signal" -P $pid ;;
file:*) signal=${signal#file:}; touch "$signal" ;;
*) kill -"$signal" $pid ;;
esac
for _ in $(seq 1200); do
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
if kill -0 $pid 2>/dev/null; then
  kill -KILL $pid
  wait $pid
  echo "still running 120 s after $signal"
  exit 1
fi
wait $pid
echo "exit $?"
