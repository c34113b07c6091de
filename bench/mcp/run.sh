#!/usr/bin/env bash
# bench/mcp/run.sh [BUILD_DIR] [COUNT] - MCP exec_command of `true`
# through one `sbx mcp` against `sbx exec KEY -- true` from a new process,
# same session, same count (default 200), on local and, when
# SBX_TEST_DOCKER_HOST is set, docker. Uses the MCP SDK pinned in
# tests/mcp/sdk (npm ci into the build tree, as its tests do).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
count=${2:-200}
work="$build/tests/mcp/sdk"
[ -x "$build/bin/sbx" ] || { echo "run.sh: $build/bin/sbx not found: build sbx_cli first" >&2; exit 2; }
command -v npm >/dev/null || { echo "run.sh: npm is required" >&2; exit 2; }
mkdir -p "$work"
(
  flock 9
  if ! cmp -s "$src/tests/mcp/sdk/package-lock.json" "$work/node_modules/.sbx-lock" 2>/dev/null; then
    cp "$src/tests/mcp/sdk/package.json" "$src/tests/mcp/sdk/package-lock.json" "$work/"
    (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
    cp "$src/tests/mcp/sdk/package-lock.json" "$work/node_modules/.sbx-lock"
  fi
) 9>"$work/.npm-ci.lock"
cp "$src/tests/mcp/sdk/common.mjs" "$here/bench_mcp.mjs" "$work/"
providers=(local)
if [ -n "${SBX_TEST_DOCKER_HOST:-}" ]; then providers+=(docker); else echo "docker: skipped (SBX_TEST_DOCKER_HOST is not set)"; fi
cd "$work"
SBX="$build/bin/sbx" SBX_PLUGIN_PATH="$build/providers" exec node bench_mcp.mjs "$count" "${providers[@]}"
