#!/usr/bin/env bash
# Prints how many ranks PLAN runs on: the product of its mesh's axis sizes
# (1 for a plan without a mesh line).
# usage: plan-ranks.sh PLAN
set -euo pipefail
sed -n 's/^mesh: //p' "$1" | grep -o 'size: *[0-9]*' |
  awk '{n = (NR == 1 ? 1 : n) * $2} END {print n ? n : 1}'
