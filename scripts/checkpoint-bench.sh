#!/usr/bin/env bash
# Checkpoint save and load of large models on a GPU node: sharc-run against
# another build of it (sharc-run-old, say a commit before a change), side
# by side: wall time, host peak RSS, losses. Plans under .device/plans
# (scripts/stage-device.sh stages .device/); BINS picks the binaries
# ("old new"), BASE=1 adds a run without a save; logs under $OUT.
# usage: scripts/checkpoint-bench.sh PLAN_NAME...  (minimind: also cmp the
#        two binaries' files, with deterministic cuDNN)
export NCCL_NVLS_ENABLE=0
cd "$(dirname "$0")/.."
stage=.device
export LD_LIBRARY_PATH=$PWD/$stage/lib:${LD_LIBRARY_PATH:-}
new=$stage/bin/sharc-run old=$stage/bin/sharc-run-old
ck=/tmp/ck; mkdir -p $ck
df -h /tmp | tail -1; free -g | head -2
measure() { # NAME CMD...
  local name=$1; shift
  python3 - "$@" > $OUT/$name.log 2>&1 <<'PY'
import resource, subprocess, sys, time
t = time.time(); p = subprocess.run(sys.argv[1:]); w = time.time() - t
r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(f"exit {p.returncode} wall {w:.1f} s host peak rss {r / 1048576:.2f} GiB", flush=True)
PY
  echo "== $name: $(tail -1 $OUT/$name.log)"
  grep -E "^step|saved|loaded|error|killed|set-up|drawn" $OUT/$name.log | grep -v "^step.*eval" | tail -4
}
for p in "$@"; do
  plan=$stage/plans/$p.plan
  if [ "$p" = minimind ]; then
    # cuDNN's attention backward is deterministic only when asked.
    export SHARC_CUDNN_DETERMINISTIC=1
    measure mm-save-new $new $plan --backend cuda --steps 2 --save $ck/mm-new.st
    measure mm-save-old $old $plan --backend cuda --steps 2 --save $ck/mm-old.st
    cmp $ck/mm-new.st $ck/mm-old.st && echo "minimind: the two files are byte-identical ($(stat -c %s $ck/mm-new.st) bytes)"
    measure mm-load-new $new $plan --backend cuda --load $ck/mm-old.st --steps 1
    measure mm-load-old $old $plan --backend cuda --load $ck/mm-new.st --steps 1
    rm -f $ck/mm-*.st
    unset SHARC_CUDNN_DETERMINISTIC
    continue
  fi
  [ -n "${BASE:-}" ] && measure $p-base $new $plan --backend cuda --steps 1
  for b in ${BINS:-old new}; do
    bin=$new; [ $b = old ] && bin=$old
    measure $p-save-$b $bin $plan --backend cuda --steps 1 --save $ck/$p.st
    ls -la $ck/
    measure $p-load-$b $bin $plan --backend cuda --load $ck/$p.st --steps 1
    rm -f $ck/$p.st*
  done
done
