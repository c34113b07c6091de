#!/bin/sh
# cli_crash.sh - `sbx conformance` survives a provider that crashes it.
#
# Runs the built `sbx conformance` against cfixture in crash_in_exec mode
# (every exec kills the process with SIGSEGV) for one case that runs a
# command and one that does not: the command still prints both results and
# the summary, writes a well-formed JUnit file naming the crash, destroys
# the sandbox left behind, and exits 1 (a case failed), not by a signal.
#
# usage: cli_crash.sh SBX_BINARY PROVIDER_DIR FIXTURE_DIR
set -eu

sbx=$1 providers=$2 fixtures=$3

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-conformance-cli-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir "$work/ws"
cat >"$work/sbx.yaml" <<YAML
providers:
  cfixture:
    root: $work/ws
    inner: $providers/local.so
    break: crash_in_exec
YAML

status=0
SBX_PLUGIN_PATH=$fixtures:$providers "$sbx" --config "$work/sbx.yaml" \
    conformance cfixture --junit "$work/report.xml" \
    --filter 'identity_two_instances,exec_exit_codes' >"$work/out" 2>"$work/err" ||
    status=$?
cat "$work/out"
[ "$status" -eq 1 ] || { cat "$work/err" >&2; fail "exit status $status, want 1"; }
grep -q '^ok    identity_two_instances ' "$work/out" || fail "no ok line"
grep -q '^FAIL  exec_exit_codes (.*): case crashed: killed by signal 11 (SIGSEGV); sandbox left: provider "cfixture" ref ".*destroyed by the runner$' \
    "$work/out" || fail "no FAIL line naming the crash and the sandbox"
grep -q '^1 passed, 1 failed, 0 skipped$' "$work/out" || fail "no summary line"
xmllint --noout "$work/report.xml" || fail "the JUnit report is not well-formed"
grep -q 'message="case crashed: killed by signal 11 (SIGSEGV)' "$work/report.xml" ||
    fail "the JUnit report does not carry the crash"
[ -z "$(ls -A "$work/ws")" ] || fail "the crashed case's workspace was left"
echo "PASS"
