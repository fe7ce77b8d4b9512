#!/usr/bin/env bash
# Configures and builds sharc in build/ (set BUILD_DIR and extra CMake flags to vary).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$build" -j"$(nproc)"
