#!/usr/bin/env bash
# live.sh PROVIDER BUILD_DIR - the conformance suite against the real
# service, opt-in: e2b with SBX_LIVE_E2B=1 and E2B_API_KEY (optionally
# SBX_LIVE_E2B_TEMPLATE), cube with SBX_LIVE_CUBE=1, SBX_LIVE_CUBE_API_URL,
# SBX_LIVE_CUBE_TEMPLATE (optionally SBX_LIVE_CUBE_PROXY=host:port,
# CUBE_API_KEY). Otherwise one "skipped: set ..." line and exit 77.
set -euo pipefail
prov=$1 build=$2
cfg=$(mktemp /tmp/sbx-live.XXXXXX.yaml)
trap 'rm -f "$cfg"' EXIT
case $prov in
e2b)
  if [ "${SBX_LIVE_E2B:-}" != 1 ] || [ -z "${E2B_API_KEY:-}" ]; then
    echo "skipped: set SBX_LIVE_E2B=1 and E2B_API_KEY to run the e2b conformance suite against E2B"
    exit 77
  fi
  printf 'providers:\n  e2b:\n    template: "%s"\n' "${SBX_LIVE_E2B_TEMPLATE:-base}" >"$cfg" ;;
cube)
  if [ "${SBX_LIVE_CUBE:-}" != 1 ] || [ -z "${SBX_LIVE_CUBE_API_URL:-}" ] ||
     [ -z "${SBX_LIVE_CUBE_TEMPLATE:-}" ]; then
    echo "skipped: set SBX_LIVE_CUBE=1, SBX_LIVE_CUBE_API_URL and SBX_LIVE_CUBE_TEMPLATE to run the cube conformance suite against CubeSandbox"
    exit 77
  fi
  printf 'providers:\n  cube:\n    api_url: "%s"\n    template: "%s"\n' \
    "$SBX_LIVE_CUBE_API_URL" "$SBX_LIVE_CUBE_TEMPLATE" >"$cfg"
  if [ -n "${SBX_LIVE_CUBE_PROXY:-}" ]; then
    printf '    proxy_address: "%s"\n    proxy_port: %s\n' \
      "${SBX_LIVE_CUBE_PROXY%:*}" "${SBX_LIVE_CUBE_PROXY##*:}" >>"$cfg"
  fi ;;
*) echo "live.sh: unknown provider $prov" >&2; exit 2 ;;
esac
SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" --config "$cfg" conformance "$prov"
