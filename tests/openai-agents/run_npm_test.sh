#!/usr/bin/env bash
# run_npm_test.sh SRC_DIR BUILD_DIR TEST_FILE|typecheck [PROVIDERS] - install the
# pinned packages of clients/openai-agents (package-lock.json, npm ci) into
# a copy of the package in the build tree and run one of its node:test
# files against the build tree's sbx. Exit 77 (skipped) without npm.
set -euo pipefail
src=$1 build=$2 file=$3 providers=${4:-}
pkg="$src/clients/openai-agents"
work="$build/tests/openai-agents/pkg"
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
command -v node >/dev/null || { echo "skipped: node is not installed"; exit 77; }
if [ "$providers" = docker ] && [ -z "${SBX_TEST_DOCKER_HOST:-}" ]; then
  echo "skipped: SBX_TEST_DOCKER_HOST is not set"; exit 77
fi
mkdir -p "$work"
# The pinned packages, installed once per lockfile (tests/support/npm_ci.sh);
# a lock keeps parallel tests from copying the package at once.
(
  flock 9
  bash "$src/tests/support/npm_ci.sh" "$pkg" "$build" "$work"
  rm -rf "$work/src" "$work/test" "$work/bench"
  cp -r "$pkg/src" "$pkg/test" "$pkg/bench" "$pkg/tsconfig.json" "$work/"
) 9>"$build/tests/openai-agents/.install-lock"
cd "$work"
export SBX_SOURCE_DIR="$src" SBX_BUILD_DIR="$build"
[ -n "$providers" ] && export SBX_OAI_PROVIDERS="$providers"
if [ "$file" = typecheck ]; then exec node node_modules/typescript/bin/tsc -p tsconfig.json; fi
exec node --test --test-concurrency=1 --test-reporter=spec "test/$file"
