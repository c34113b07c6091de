#!/bin/sh
# consumer_headers.sh - sbx/sbx.h and the other consumer headers compile
# without sbx/provider.h: a scratch include directory holds them and
# sbx/types.h only. Built as strict C99 and, when a C++ compiler is given,
# as C++11. Run with a deliberately broken copy of sbx.h (one that includes
# sbx/provider.h) it must fail, and does: see the last check.
#
# usage: consumer_headers.sh SOURCE_DIR CC [CXX]
set -eu

src=$1 cc=$2 cxx=${3:-}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-consumer-headers-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

# build DIR: compile consumer_alone.c against the headers in DIR/sbx.
build() {
    "$cc" -std=c99 -pedantic -Wall -Wextra -Werror -Wstrict-prototypes \
        -Wmissing-prototypes -Wshadow -I"$1" \
        -c "$src/tests/abi/consumer_alone.c" -o "$1/c99.o" || return 1
    if [ -n "$cxx" ]; then
        "$cxx" -x c++ -std=c++11 -pedantic -Wall -Wextra -Werror -I"$1" \
            -c "$src/tests/abi/consumer_alone.c" -o "$1/cxx.o" || return 1
    fi
}

mkdir -p "$work/ok/sbx"
cp "$src"/host/include/sbx/*.h "$src/abi/sbx/types.h" "$work/ok/sbx/"
[ ! -e "$work/ok/sbx/provider.h" ] || fail "provider.h must not be in the scratch dir"
build "$work/ok" || fail "the consumer headers need more than themselves and sbx/types.h"
echo "ok: consumer headers without sbx/provider.h"

# The check can fail: sbx.h including the ABI header does not build here.
mkdir -p "$work/bad/sbx"
cp "$work/ok/sbx/"*.h "$work/bad/sbx/"
sed 's|^#include <sbx/types.h>$|#include <sbx/provider.h>|' "$src/host/include/sbx/sbx.h" \
    >"$work/bad/sbx/sbx.h"
! cmp -s "$work/bad/sbx/sbx.h" "$src/host/include/sbx/sbx.h" ||
    fail "the edit no longer applies to host/include/sbx/sbx.h"
if build "$work/bad" 2>"$work/bad.log"; then
    fail "a sbx.h that includes sbx/provider.h was not caught"
fi
echo "ok: a sbx.h including sbx/provider.h is refused"
echo "PASS"
