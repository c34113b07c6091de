#!/bin/sh
# consumer_example.sh - examples/consumer, built with its own Makefile
# against an install of this build tree (pkg-config sbx, nothing from the
# build tree), runs commands in a session of the installed local provider:
# output, exit status, and the workspace kept between two runs.
set -u
src=$1 build=$2 cflags=${3:--O1 -Werror}
fail() { echo "FAIL: $*" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-consumer-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log"; fail "cmake --install"; }
pc=$(dirname "$(find "$work/prefix" -name sbx.pc | head -n 1)")
[ -d "$pc" ] || fail "no sbx.pc installed"
cp "$src/examples/consumer/consumer.c" "$src/examples/consumer/Makefile" "$work/"
PKG_CONFIG_PATH=$pc PKG_CONFIG_LIBDIR=$pc make -s -C "$work" consumer \
    CFLAGS="$cflags" LDFLAGS="$cflags" >"$work/make.log" 2>&1 || { cat "$work/make.log"; fail "make"; }
mkdir "$work/ws" "$work/state"
printf 'store: { driver: sqlite, path: %s/state/sbx.db }\nproviders:\n  local:\n    root: %s/ws\n' \
    "$work" "$work" >"$work/sbx.yaml"
unset SBX_PLUGIN_PATH SBX_PROVIDER
export SBX_CONFIG="$work/sbx.yaml"
libdir=$(PKG_CONFIG_PATH=$pc PKG_CONFIG_LIBDIR=$pc pkg-config --variable=libdir sbx)
export LD_LIBRARY_PATH="$libdir"
out=$("$work/consumer" s1 sh -c 'echo hello > kept; echo out; exit 3' 2>"$work/err")
status=$?
[ "$status" -eq 3 ] || fail "exit status $status, stderr: $(cat "$work/err")"
[ "$out" = out ] || fail "output '$out'"
out=$("$work/consumer" s1 cat kept) || fail "second run: $(cat "$work/err")"
[ "$out" = hello ] || fail "the workspace was not kept: '$out'"
echo PASS
