#!/usr/bin/env bash
# egress_steps.sh SRC_DIR BUILD_DIR - a limited-network session through
# `sbx create` against the fake OpenSandbox, checked at each step of
# provisioning: the worker is killed (SBX_TEST_CRASH_AT) after create,
# during package setup and just before the binding is published, and each
# time the fake's sidecar must enforce what that step needs (the setup
# allowlist while packages install, the final one before publish, and no
# binding yet); then a full run, whose every package command ran under the
# setup allowlist and which ends with the final one.
# Exit 77 (skipped) when the build has no crash hooks.
set -euo pipefail
src=$1 build=$2
sbx="$build/bin/sbx"
dir=$(mktemp -d /tmp/sbx-os-egress.XXXXXX)
mkdir -p "$dir/bin" "$dir/state"
# A stub package manager, found first in the PATH of the fake's commands.
printf '#!/bin/sh\necho "npm stub: $*"\n' >"$dir/bin/npm"
chmod +x "$dir/bin/npm"
FAKE_OS_EXTRA_PATH="$dir/bin" python3 "$src/tests/opensandbox/fake_opensandbox.py" \
  --port-file "$dir/port" --api-key steps_key --dir "$dir" &
fake=$!
trap 'kill $fake 2>/dev/null; wait $fake 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.1; done
url="http://127.0.0.1:$(cat "$dir/port")"
printf 'providers:\n  opensandbox:\n    api_url: "%s"\n    workspace: /home/user/workspace\n  local: {}\n' "$url" >"$dir/sbx.yaml"
export OPEN_SANDBOX_API_KEY=steps_key SBX_PLUGIN_PATH="$build/providers" XDG_STATE_HOME="$dir/state"
create() {
  "$sbx" --config "$dir/sbx.yaml" create -p opensandbox --allow example.com \
    --allow '*.internal.test' --setup-allow mirror.example.org -P npm:left-pad "$1"
}
# The newest sandbox's record at the fake: the policy now and its history.
policy() {
  curl -sf "$url/_fake/stats" >/dev/null
  python3 - "$url" <<'PY'
import json, sys, urllib.request
base = sys.argv[1]
stats = json.load(urllib.request.urlopen(base + "/_fake/stats"))
ids = [r["path"].split("/")[3] for r in stats["requests"]
       if r["service"] == "lifecycle" and r["method"] == "GET"
       and r["path"].count("/") == 3 and r["path"].startswith("/v1/sandboxes/")]
rec = json.load(urllib.request.urlopen(base + "/_fake/egress/" + ids[-1]))
print(json.dumps(rec))
PY
}
check() { # check STEP JSON-of-policy WANT-TARGETS...
  local step=$1 rec=$2; shift 2
  python3 - "$step" "$rec" "$@" <<'PY'
import json, sys
step, rec, want = sys.argv[1], json.loads(sys.argv[2]), sorted(sys.argv[3:])
pol = rec["policy"]
got = sorted(r["target"] for r in pol["egress"] if r["action"] == "allow")
if pol.get("defaultAction") != "deny" or got != want:
    sys.exit("%s: the sidecar enforces %s %s; want deny %s" % (step, pol.get("defaultAction"), got, want))
print("%s: deny + %s" % (step, got))
PY
}
setup=(example.com '*.internal.test' mirror.example.org registry.npmjs.org)
final=(example.com '*.internal.test')
killed_at() { # killed_at STEP KEY: the worker dies there, nothing is published
  set +e
  SBX_TEST_CRASH_AT=$1 create "$2" >/dev/null 2>"$dir/err"
  local st=$?
  set -e
  if [ $st -ne 137 ]; then
    if [ $st -eq 0 ]; then echo "skipped: this build has no crash hooks (SBX_TEST_HOOKS)"; exit 77; fi
    echo "$1: sbx create exited $st, want 137 (killed): $(cat "$dir/err")"; exit 1
  fi
  if "$sbx" --config "$dir/sbx.yaml" sessions 2>/dev/null | grep -q "^$2\b"; then
    echo "$1: a binding was published for $2"; exit 1
  fi
}
# A provider without the egress capability refuses the spec at admission.
set +e
"$sbx" --config "$dir/sbx.yaml" create -p local --allow example.com k0 >/dev/null 2>"$dir/err"
st=$?
set -e
if [ $st -ne 125 ] || ! grep -q 'provider "local" lacks capability egress' "$dir/err"; then
  echo "local with --allow: exit $st: $(cat "$dir/err")"; exit 1
fi
if "$sbx" --config "$dir/sbx.yaml" sessions 2>/dev/null | grep -q "^k0\b"; then
  echo "local with --allow: a binding was made"; exit 1
fi
echo "admission: $(cat "$dir/err")"
killed_at after-create k1;    check after-create "$(policy)" "${setup[@]}"
killed_at during-packages k2; check during-packages "$(policy)" "${setup[@]}"
killed_at before-publish k3;  check before-publish "$(policy)" "${final[@]}"
# A full run: published, final policy, every package command under setup.
out=$(create k4)
[ "$out" = created ] || { echo "full run: $out"; exit 1; }
# (the binding check above would see a published session)
"$sbx" --config "$dir/sbx.yaml" sessions | grep -q "^k4\b" ||
  { echo "sbx sessions does not list k4: the binding checks are blind"; exit 1; }
rec=$(policy)
check published "$rec" "${final[@]}"
python3 - "$rec" "${setup[@]}" <<'PY'
import json, sys
rec, setup = json.loads(sys.argv[1]), sorted(sys.argv[2:])
cmds = [h for h in rec["history"] if h["event"] == "command"]
if not cmds:
    sys.exit("no command ran during provisioning")
# The package commands are all but the provider's own setup commands, which
# ran first; every command before the final egress change saw the setup list.
last_change = max(i for i, h in enumerate(rec["history"]) if h["event"] in ("patch", "delete"))
before = [h for h in rec["history"][:last_change] if h["event"] == "command"]
for h in before:
    got = sorted(r["target"] for r in h["policy"]["egress"])
    if got != setup:
        sys.exit("a setup command ran under %s; want %s" % (got, setup))
print("%d setup commands ran under the setup allowlist" % len(before))
PY
echo "egress steps: ok"
