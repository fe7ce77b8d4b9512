#!/usr/bin/env bash
# A fuzz campaign on a node with many cores (the GPU node's 16): plan-fuzz
# and safetensors-fuzz side by side, the flags of scripts/fuzz.sh
# (-timeout=10 -rss_limit_mb=2048), plan inputs capped at 2048 bytes;
# prints the runs of all jobs and any error line, crash inputs go to $OUT.
# Stage FUZZ_DIR with the binaries of build-fuzz/tests/fuzz and the corpora
# (tests/fuzz/corpus/NAME plus build-fuzz/fuzz-work/NAME) in FUZZ_DIR/plan
# and FUZZ_DIR/safetensors, yaml-cpp in FUZZ_DIR/../lib, then
#   FUZZ_DIR=.device/fuzz OUT=out scripts/fuzz-node.sh SECONDS
here=${FUZZ_DIR:-$(cd "$(dirname "$0")" && pwd)}
export LD_LIBRARY_PATH=$here/../lib:${LD_LIBRARY_PATH:-}
secs=${1:-200}
work=$(mktemp -d)
cd "$work"
"$here/plan-fuzz" -jobs=13 -workers=13 -max_total_time="$secs" -max_len=2048 \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$OUT/plan-" "$here/plan" >/dev/null 2>&1 &
mkdir st && cd st
"$here/safetensors-fuzz" -jobs=3 -workers=3 -max_total_time="$secs" \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$OUT/safetensors-" "$here/safetensors" >/dev/null 2>&1 &
wait
cd "$work"
for name in plan st; do
  dir=$work; [ $name = st ] && dir=$work/st
  runs=$(cat "$dir"/fuzz-*.log | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s+=$1} END {print s}')
  echo "$name: $(ls "$dir"/fuzz-*.log | wc -l) jobs, $runs runs"
  grep -h -E "ERROR|SUMMARY|crash|deadly" "$dir"/fuzz-*.log | sort | uniq -c | head
done
ls "$OUT"
