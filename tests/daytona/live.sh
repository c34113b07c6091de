#!/usr/bin/env bash
# live.sh BUILD_DIR - the conformance suite against the real Daytona
# service, opt-in: SBX_LIVE_DAYTONA=1 and DAYTONA_API_KEY (optionally
# DAYTONA_API_URL, SBX_LIVE_DAYTONA_SNAPSHOT, SBX_LIVE_DAYTONA_TARGET).
# Otherwise one "skipped: set ..." line and exit 77. Creates billable
# sandboxes and destroys each one its case made.
set -euo pipefail
build=$1
if [ "${SBX_LIVE_DAYTONA:-}" != 1 ] || [ -z "${DAYTONA_API_KEY:-}" ]; then
  echo "skipped: set SBX_LIVE_DAYTONA=1 and DAYTONA_API_KEY to run the daytona conformance suite against Daytona"
  exit 77
fi
cfg=$(mktemp /tmp/sbx-live.XXXXXX.yaml)
trap 'rm -f "$cfg"' EXIT
{
  printf 'providers:\n  daytona:\n'
  [ -n "${SBX_LIVE_DAYTONA_SNAPSHOT:-}" ] && printf '    snapshot: "%s"\n' "$SBX_LIVE_DAYTONA_SNAPSHOT"
  [ -n "${SBX_LIVE_DAYTONA_TARGET:-}" ] && printf '    target: "%s"\n' "$SBX_LIVE_DAYTONA_TARGET"
  printf '    auto_stop_minutes: 15\n'
} >"$cfg"
SBX_PLUGIN_PATH="$build/providers" "$build/bin/sbx" --config "$cfg" conformance daytona
