#!/usr/bin/env bash
# Installs what sharc needs from Debian 12 packages; does nothing when all is there.
set -euo pipefail

packages=(cmake ninja-build g++ python3 libmlir-19-dev mlir-19-tools
          llvm-19-dev llvm-19-tools libyaml-cpp-dev catch2 clang-format-19 python3-pip
          clang-19 libclang-rt-19-dev  # these two: the fuzz build (.ci/run)
          libopenmpi-dev openmpi-bin)  # runs spanning processes (mpirun)
# The data path: prepare-data.py's venv and a public-domain text (the KJV
# Bible; bible-kjv's reader prints it from bible-kjv-text's data).
packages+=(python3-venv bible-kjv)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
"$(dirname "$0")/fetch-cudnn-frontend.sh"
# scripts/prepare-data.py's tokenizers, in a git-ignored venv of the repo
# (Debian's Python is externally managed: no pip install outside a venv).
venv="$(cd "$(dirname "$0")/.." && pwd)/.venv"
if ! "$venv/bin/python" -c "import tokenizers" 2>/dev/null; then
  echo "setup: creating $venv with tokenizers" >&2
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q "tokenizers>=0.19,<1"
fi
