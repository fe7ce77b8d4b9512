#!/usr/bin/env bash
# Unpacks the cuDNN frontend's C++ headers (header-only) into .deps/ from
# PyPI's nvidia-cudnn-frontend wheel, which ships its include/ tree; cuDNN
# itself comes with the CUDA libraries. Skipped without a CUDA toolkit, and
# a failure only costs the cuDNN attention path (CMake says so).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=1.32.0
dest=$root/.deps/cudnn-frontend-$version
[ -f "$dest/include/cudnn_frontend.h" ] && exit 0
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Any Python tag will do: only the headers are used.
if ! python3 -m pip download -q --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 \
    "nvidia-cudnn-frontend==$version" -d "$tmp" >&2; then
  echo "setup: could not download nvidia-cudnn-frontend $version;" \
       "building without cuDNN attention" >&2
  exit 0
fi
python3 - "$tmp"/*.whl "$tmp/unpacked" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    wheel.extractall(sys.argv[2], [n for n in wheel.namelist() if n.startswith("include/")])
PY
mkdir -p "$root/.deps"
rm -rf "$dest"
mv "$tmp/unpacked" "$dest"
echo "setup: cuDNN frontend $version headers in ${dest#$root/}" >&2
