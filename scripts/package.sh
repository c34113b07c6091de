#!/usr/bin/env bash
# Build the Debian packages of sbx (cmake/Packaging.cmake):
#   scripts/package.sh [BUILD_DIR]      default build/pkg
# Configures BUILD_DIR for /usr and /etc (RelWithDebInfo, stripped when packaged; no tests, no
# benchmarks, no run path), builds, and writes BUILD_DIR/packages/*.deb.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build/pkg}
jobs=${SBX_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_PACKAGING=ON \
      -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_SYSCONFDIR=/etc \
      -DCMAKE_SKIP_INSTALL_RPATH=ON -DBUILD_TESTING=OFF -DSBX_BUILD_BENCH=OFF \
      -DSBX_WERROR=ON -DSBX_TEST_HOOKS=OFF >/dev/null
cmake --build "$build" -j"$jobs"
rm -rf "$build/packages"
cmake --build "$build" --target package >"$build/cpack.log" 2>&1 ||
    { cat "$build/cpack.log" >&2; exit 1; }
ls "$build"/packages/*.deb
