#!/usr/bin/env bash
# Builds the fuzz harnesses (clang, libFuzzer, ASan+UBSan) in build-fuzz and
# runs each for SECONDS from its seed corpus (tests/fuzz/corpus/NAME):
#   scripts/fuzz.sh [SECONDS] [NAME...]    (default 30 s, every harness)
# New inputs go to build-fuzz/fuzz-work/NAME, a crash to a file named there;
# copy a crash into tests/fuzz/crashers/NAME/ with its fix, and ctest
# replays it in every build from then on. Exits 1 on the first crash.
# FUZZ_JOBS=N runs N processes per harness; FUZZ_FLAGS adds libFuzzer flags.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-30}
shift || true
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  names=(config plan safetensors machine tokens)
fi

if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-19 CXX=clang++-19 cmake -G Ninja -S . -B build-fuzz \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSHARC_FUZZ=ON \
    -DSHARC_ENABLE_CUDA=OFF >/dev/null
fi
ninja -C build-fuzz -j"${BUILD_JOBS:-$(nproc)}" sharc_fuzzers

for name in "${names[@]}"; do
  work=build-fuzz/fuzz-work/$name
  mkdir -p "$work"
  # What an earlier run found was reported then; only this run's count.
  rm -f "$work"/crash-* "$work"/timeout-* "$work"/oom-* "$work"/leak-*
  echo "== fuzz $name for $seconds s"
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one that
  # needs 2 GiB is unbounded work (every reader caps what it allocates).
  # shellcheck disable=SC2086
  build-fuzz/tests/fuzz/"$name"-fuzz -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    ${FUZZ_JOBS:+-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS} \
    -artifact_prefix="$work/" ${FUZZ_FLAGS:-} \
    "$work" tests/fuzz/corpus/"$name" 2>&1 |
    grep -E "^(stat::|==|SUMMARY|fuzz invariant|#[0-9]+ *DONE)|ERROR|error:" || true
  if [ -n "$(find "$work" -maxdepth 1 \( -name 'crash-*' -o \
              -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \))" ]; then
    echo "fuzz $name: crashing inputs in $work" >&2
    exit 1
  fi
done
