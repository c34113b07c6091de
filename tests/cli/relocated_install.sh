#!/bin/sh
# relocated_install.sh - an installed tree finds its own providers.
#
# Installs the build into a scratch prefix with `cmake --install --prefix`,
# then runs that prefix's `sbx` with no plugin path and no configuration:
# it must list the providers installed under the prefix and run a command
# on `local`. Then moves the whole tree and checks again.
#
# usage: relocated_install.sh BUILD_DIR
set -eu
build=$1

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-relocated-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "cmake --install failed"; }

unset SBX_PLUGIN_PATH SBX_CONFIG SBX_PROVIDER
export HOME="$work/home" XDG_STATE_HOME="$work/state"
mkdir -p "$HOME"

check_prefix() {
    prefix=$1
    "$prefix/bin/sbx" providers --json >"$work/providers.json" 2>"$work/providers.err" ||
        fail "$prefix/bin/sbx providers: $(cat "$work/providers.err")"
    real=$(cd "$prefix" && pwd -P)
    grep -q "\"path\": *\"$real/[^\"]*/local.so\"" "$work/providers.json" ||
        fail "local.so under $real not listed: $(cat "$work/providers.json")"
    if grep -q '"status": *"not found"' "$work/providers.json"; then
        fail "a provider is missing: $(cat "$work/providers.json")"
    fi
    out=$("$prefix/bin/sbx" run -- echo relocated) || fail "sbx run failed under $prefix"
    [ "$out" = relocated ] || fail "sbx run printed '$out'"
    echo "ok: $prefix/bin/sbx finds its providers"
}

check_prefix "$work/prefix"
mv "$work/prefix" "$work/moved"
check_prefix "$work/moved"
echo PASS
