#!/bin/sh
# cxx_provider.sh - the C++ providers export exactly the unmangled entry
# point and pass the host's handshake.
#
# usage: cxx_provider.sh LOAD_PROBE DIR...
# Each DIR holds a cxx_provider.so (one per C++ standard it was built as).
set -eu

probe=$1
shift

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

[ $# -gt 0 ] || fail "no provider directories given"
for dir in "$@"; do
    so=$dir/cxx_provider.so
    [ -f "$so" ] || fail "$so was not built"
    syms=$(nm -D --defined-only "$so") || fail "nm -D $so failed"
    # Exactly one line: a defined function named sbx_provider_describe, not
    # a mangled _Z... name and nothing else leaking out of the C++ code.
    [ "$(echo "$syms" | wc -l)" -eq 1 ] ||
        fail "$so must export one symbol, exports: $syms"
    echo "$syms" | grep -q ' T sbx_provider_describe$' ||
        fail "$so does not export sbx_provider_describe unmangled: $syms"
    out=$("$probe" "$dir" cxx_provider) || fail "$so refused by the host: $out"
    case $out in
    "ok cxx_provider abi 1."*) ;;
    *) fail "unexpected handshake result for $so: $out" ;;
    esac
    echo "ok: $so: $syms; $out"
done
echo "PASS"
