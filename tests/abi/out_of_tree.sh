#!/bin/sh
# out_of_tree.sh - build a provider the way a backend author does.
#
# Installs the current build into a scratch prefix, then compiles providers
# outside the source tree with nothing but the flags from
# `pkg-config --cflags sbx-provider`: the minimal example of docs/ABI.md and
# the `good` test fixture. Then the provider written from a frozen header,
# frozen10.c, twice: as frozen10 with a copy of the frozen 1.0 header as its
# only include directory, and as frozen11 with a copy of the frozen 1.1
# header (no pkg-config at all). Each must link with -z defs (nothing
# from the host) and export exactly one dynamic symbol,
# sbx_provider_describe.
#
# usage: out_of_tree.sh BUILD_DIR SOURCE_DIR LIBDIR CC
set -eu

build=$1 src=$2 libdir=$3 cc=$4

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-out-of-tree-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
prefix=$work/prefix

if ! cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then
    cat "$work/install.log" >&2
    fail "cmake --install $build --prefix $prefix failed"
fi

pcdir=$prefix/$libdir/pkgconfig
[ -f "$pcdir/sbx-provider.pc" ] || fail "no sbx-provider.pc in $pcdir"

# Only the scratch prefix may answer: no system or build-tree .pc files.
PKG_CONFIG_PATH=$pcdir
PKG_CONFIG_LIBDIR=$pcdir
export PKG_CONFIG_PATH PKG_CONFIG_LIBDIR

cflags=$(pkg-config --cflags sbx-provider) || fail "pkg-config --cflags sbx-provider"
providerdir=$(pkg-config --variable=providerdir sbx-provider) ||
    fail "pkg-config --variable=providerdir sbx-provider"
echo "cflags: $cflags"
echo "providerdir: $providerdir"

case $cflags in
*"$src"* | *"$build"*) fail "cflags point into the source or build tree: $cflags" ;;
esac
case $cflags in
*-fvisibility=hidden*) ;;
*) fail "cflags lack -fvisibility=hidden: $cflags" ;;
esac
# The provider directory must be inside the prefix it was installed to.
real_prefix=$(cd "$prefix" && pwd -P)
mkdir -p "$providerdir"
real_providerdir=$(cd "$providerdir" && pwd -P)
case $real_providerdir in
"$real_prefix"/*) ;;
*) fail "providerdir $providerdir is outside the prefix $prefix" ;;
esac

# The .pc file states the header's ABI version and the link flags.
hdr=$(pkg-config --variable=includedir sbx-provider)/sbx/provider.h
[ -f "$hdr" ] || fail "no $hdr"
for part in MAJOR MINOR; do
    want=$(sed -n "s/^#define SBX_ABI_$part \([0-9]*\)$/\1/p" "$hdr")
    var=$(echo "abi_$part" | tr 'A-Z' 'a-z')
    got=$(pkg-config --variable="$var" sbx-provider)
    [ -n "$want" ] && [ "$got" = "$want" ] ||
        fail "sbx-provider.pc says $var=$got, the header SBX_ABI_$part $want"
done
libs=$(pkg-config --libs sbx-provider) || fail "pkg-config --libs sbx-provider"
case $libs in
*-z,defs*) ;;
*) fail "pkg-config --libs sbx-provider lacks -Wl,-z,defs: $libs" ;;
esac
echo "abi: $(pkg-config --variable=abi_major sbx-provider).$(pkg-config --variable=abi_minor sbx-provider); libs: $libs"

# The example of docs/ABI.md: the C block after the "abi-example" marker.
mkdir "$work/example"
awk '/<!-- abi-example -->/ { want = 1; next }
     want && /^```c$/ { copy = 1; next }
     copy && /^```$/ { exit }
     copy { print }' "$src/docs/ABI.md" >"$work/example/hello.c"
[ -s "$work/example/hello.c" ] || fail "no example found in docs/ABI.md"

# The good fixture, copied out of the tree so no source path can leak in.
mkdir "$work/good"
cp "$src/tests/fixtures/plugins/good.c" "$src/tests/fixtures/plugins/fixture_provider.h" \
    "$work/good/"

# The frozen provider and the frozen headers, copied out of the tree the
# same way.
mkdir -p "$work/frozen/1.0/sbx" "$work/frozen/1.1/sbx"
cp "$src/tests/abi/frozen/1.0/sbx/provider.h" "$work/frozen/1.0/sbx/"
cp "$src/tests/abi/frozen/1.1/sbx/provider.h" "$work/frozen/1.1/sbx/"
cp "$src/tests/abi/frozen/frozen10.c" "$work/frozen/"

# build_and_check NAME SOURCE [EXTRA_FLAGS [HEADER_FLAGS [LINK_FLAGS]]]:
# compile NAME.so and check its exports. HEADER_FLAGS and LINK_FLAGS
# replace the pkg-config flags.
build_and_check() {
    name=$1 source=$2 extra=${3:-} flags=${4:-$cflags} ldflags=${5:-$libs}
    so=$work/$name.so
    # shellcheck disable=SC2086 # flags and extra are lists of flags
    "$cc" -std=c11 -Wall -Wextra -Werror $extra -fPIC -shared $flags \
        $ldflags -o "$so" "$source" ||
        fail "$name: out-of-tree build failed"
    nm -D --defined-only "$so" >"$work/$name.syms" || fail "$name: nm failed"
    exported=$(awk '{ print $NF }' "$work/$name.syms")
    [ "$exported" = "sbx_provider_describe" ] ||
        fail "$name.so must export only sbx_provider_describe, exports: $(echo $exported)"
    grep -q ' T sbx_provider_describe$' "$work/$name.syms" ||
        fail "$name.so: sbx_provider_describe is not a defined function"
    cp "$so" "$providerdir/" || fail "$name: cannot install into $providerdir"
    echo "ok: $name.so exports only sbx_provider_describe"
}

build_and_check hello "$work/example/hello.c"
# The fixtures leave parameters unused, as the project's own flags allow.
build_and_check good "$work/good/good.c" -Wno-unused-parameter
build_and_check frozen10 "$work/frozen/frozen10.c" -pthread \
    "-fvisibility=hidden -I$work/frozen/1.0" "-Wl,--no-undefined -Wl,-z,defs"
build_and_check frozen11 "$work/frozen/frozen10.c" -pthread \
    "-fvisibility=hidden -I$work/frozen/1.1" "-Wl,--no-undefined -Wl,-z,defs"
[ -f "$providerdir/hello.so" ] || fail "hello.so not installed into $providerdir"
echo "PASS"
