#!/usr/bin/env bash
# live.sh BUILD_DIR - the conformance suite against a real OpenSandbox
# server, opt-in: SBX_LIVE_OPENSANDBOX=1 and OPEN_SANDBOX_DOMAIN (host:port
# or a URL; OPEN_SANDBOX_API_KEY when the server wants one; optionally
# SBX_LIVE_OPENSANDBOX_IMAGE, SBX_LIVE_OPENSANDBOX_PROXY=1 to go through
# the server proxy). Otherwise one "skipped: set ..." line and exit 77.
set -euo pipefail
build=$1
if [ "${SBX_LIVE_OPENSANDBOX:-}" != 1 ] || [ -z "${OPEN_SANDBOX_DOMAIN:-}" ]; then
  echo "skipped: set SBX_LIVE_OPENSANDBOX=1 and OPEN_SANDBOX_DOMAIN (and OPEN_SANDBOX_API_KEY) to run the opensandbox conformance suite against an OpenSandbox server"
  exit 77
fi
cfg=$(mktemp /tmp/sbx-live.XXXXXX.yaml)
trap 'rm -f "$cfg"' EXIT
printf 'providers:\n  opensandbox:\n    image: "%s"\n    use_server_proxy: %s\n' \
  "${SBX_LIVE_OPENSANDBOX_IMAGE:-ubuntu:22.04}" \
  "$([ "${SBX_LIVE_OPENSANDBOX_PROXY:-}" = 1 ] && echo true || echo false)" >"$cfg"
SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" --config "$cfg" conformance opensandbox
