#!/usr/bin/env bash
# Build everything, install it into ./_install and run the main job:
# `sbx run` on the local provider (no configuration, no server needed).
#   scripts/run.sh                 runs a demo command
#   scripts/run.sh -- CMD ARGS...  runs CMD in a fresh local sandbox
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/deps.sh build
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
      -DSBX_BUILD_BENCH=OFF -DCMAKE_INSTALL_PREFIX="$root/_install" >/dev/null
cmake --build build/release -j"$(nproc)" >/dev/null
cmake --install build/release >/dev/null

[ "${1:-}" = -- ] && shift
if [ $# -eq 0 ]; then
  set -- sh -c 'echo "hello from $(pwd)"; echo "env: $(env | wc -l) variables"; uname -sr'
fi
exec "$root/_install/bin/sbx" run -- "$@"
