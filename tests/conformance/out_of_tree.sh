#!/bin/sh
# out_of_tree.sh - run the conformance suite the way a backend author's CI
# does, from an installed copy only.
#
# Installs the current build into a scratch prefix and checks that the
# author's toolkit is there: libsbx-conformance (exporting only the
# sbx_conformance_* API), sbx/conformance.h, sbx/sbx.h, sbx.pc and
# sbx-conformance.pc. Then compiles the library example of
# docs/CONFORMANCE.md outside the source tree with nothing but
# `pkg-config --cflags --libs sbx-conformance`, runs it against the
# installed `local` provider (every case must pass, the JUnit report must
# be well-formed) and runs the installed `sbx conformance` the same way.
#
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR LIBDIR CC [EXTRA_CFLAGS]
# EXTRA_CFLAGS are needed when the installed libraries were built with
# sanitizers (the program must then link their runtime too).
set -eu

build=$1 src=$2 libdir=$3 cc=$4 extra=${5:-}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-conformance-oot-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
prefix=$work/prefix

if ! cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then
    cat "$work/install.log" >&2
    fail "cmake --install $build --prefix $prefix failed"
fi

for f in include/sbx/conformance.h include/sbx/sbx.h include/sbx/session.h include/sbx/provider.h include/sbx/types.h \
    include/sbx/memory.h include/sbx/manifest.h \
    "$libdir/pkgconfig/sbx.pc" "$libdir/pkgconfig/sbx-conformance.pc"; do
    [ -f "$prefix/$f" ] || fail "$f was not installed"
done
so=$(ls "$prefix/$libdir"/libsbx-conformance.so.* 2>/dev/null | head -n 1)
[ -n "$so" ] || fail "no versioned libsbx-conformance.so.* in $prefix/$libdir"
[ -L "$prefix/$libdir/libsbx-conformance.so" ] ||
    fail "libsbx-conformance.so (the link-time name) is missing"
soname=$(objdump -p "$so" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libsbx-conformance.so.0" ] || fail "SONAME is '$soname'"
# Only the documented API is exported; the suite's internals stay hidden.
others=$(nm -D --defined-only "$so" | awk '{ print $NF }' |
    grep -v '^sbx_conformance_' | grep -v '^_init$' | grep -v '^_fini$' || true)
[ -z "$others" ] || fail "libsbx-conformance exports more than its API: $(echo $others)"

pcdir=$prefix/$libdir/pkgconfig
# Only the scratch prefix may answer: no system or build-tree .pc files.
PKG_CONFIG_PATH=$pcdir
PKG_CONFIG_LIBDIR=$pcdir
export PKG_CONFIG_PATH PKG_CONFIG_LIBDIR
flags=$(pkg-config --cflags --libs sbx-conformance) ||
    fail "pkg-config --cflags --libs sbx-conformance"
echo "flags: $flags"
case $flags in
*"$src"* | *"$build"*) fail "flags point into the source or build tree: $flags" ;;
esac
case $flags in
*-lsbx-conformance*-lsbx* | *-lsbx*-lsbx-conformance*) ;;
*) fail "flags lack -lsbx-conformance and -lsbx (Requires: sbx): $flags" ;;
esac
# Every installed consumer header stands alone, in C and C++.
for h in sbx session memory manifest; do
    printf '#include <sbx/%s.h>\nint main(void) { return 0; }\n' "$h" >"$work/h_$h.c"
    # shellcheck disable=SC2086
    "$cc" -std=c11 -pedantic -Wall -Wextra -Werror -Wstrict-prototypes $extra -c \
        -o "$work/h_$h.o" "$work/h_$h.c" $(pkg-config --cflags sbx) ||
        fail "sbx/$h.h does not compile on its own"
    if command -v c++ >/dev/null 2>&1; then
        c++ -Wall -Wextra -Werror -x c++ -c -o "$work/h_$h.cc.o" "$work/h_$h.c" \
            $(pkg-config --cflags sbx) || fail "sbx/$h.h does not compile as C++"
    fi
done
providerdir=$(pkg-config --variable=providerdir sbx-provider)
[ -f "$providerdir/local.so" ] || fail "no local.so in $providerdir"
runtime_libdir=$(pkg-config --variable=libdir sbx-conformance)

# The example of docs/CONFORMANCE.md: the C block after the marker.
mkdir "$work/ci"
awk '/<!-- conformance-example -->/ { want = 1; next }
     want && /^```c$/ { copy = 1; next }
     copy && /^```$/ { exit }
     copy { print }' "$src/docs/CONFORMANCE.md" >"$work/ci/ci_conformance.c"
[ -s "$work/ci/ci_conformance.c" ] || fail "no example found in docs/CONFORMANCE.md"
# shellcheck disable=SC2086 # flags and extra are lists of flags
"$cc" -std=c11 -pedantic -Wall -Wextra -Werror -Wstrict-prototypes $extra \
    -o "$work/ci/ci_conformance" "$work/ci/ci_conformance.c" $flags ||
    fail "the example does not build with pkg-config --cflags --libs sbx-conformance"

# Nothing from the build tree or the caller's environment may take part.
unset SBX_PLUGIN_PATH SBX_CONFIG SBX_PROVIDER
mkdir "$work/ws"
printf 'providers:\n  local:\n    root: %s\n' "$work/ws" >"$work/ci.yaml"
LD_LIBRARY_PATH=$runtime_libdir
export LD_LIBRARY_PATH
resolved=$(ldd "$work/ci/ci_conformance" | awk '/libsbx-conformance/ { print $3 }')
case $resolved in
"$prefix"/*) ;;
*) fail "libsbx-conformance resolves to '$resolved', not into $prefix" ;;
esac

status=0
"$work/ci/ci_conformance" "$work/ci.yaml" "$providerdir" "$work/example.xml" \
    >"$work/example.out" 2>&1 || status=$?
cat "$work/example.out"
[ "$status" -eq 0 ] || fail "the example exited with $status"
grep -q "^sbx conformance: provider local .*($providerdir/local.so)" "$work/example.out" ||
    fail "the example did not test the installed local.so"
grep -q '^[0-9]* passed, 0 failed, [0-9]* skipped$' "$work/example.out" ||
    fail "no summary line with 0 failures"
xmllint --noout "$work/example.xml" || fail "the example's JUnit report is not well-formed"
[ -z "$(ls -A "$work/ws")" ] || fail "the example left workspaces behind"

# The installed CLI, as docs/CONFORMANCE.md tells a CI job to run it.
status=0
SBX_PLUGIN_PATH=$providerdir "$prefix/bin/sbx" --config "$work/ci.yaml" \
    conformance local --junit "$work/cli.xml" --filter 'exec_*' \
    >"$work/cli.out" 2>&1 || status=$?
[ "$status" -eq 0 ] || { cat "$work/cli.out"; fail "sbx conformance exited with $status"; }
xmllint --noout "$work/cli.xml" || fail "sbx conformance wrote a malformed JUnit report"
echo "PASS"
