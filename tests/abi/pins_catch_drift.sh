#!/bin/sh
# pins_catch_drift.sh - test_abi_frozen_pins fails when the live header
# breaks a frozen promise.
#
# Builds the pins test from source the way tests/abi/CMakeLists.txt does
# (frozen_pins.c against each frozen copy and against the live header,
# test_frozen_pins.c comparing them), once unchanged, which must pass, and
# once per perturbation of a scratch copy of the live header, which must
# fail and name the broken pin: a retyped member of the same size, an op
# inserted before the 1.1 ops, a renumbered capability bit, a changed op
# signature, a retyped host-table member, a shrunk member of a 1.1 struct,
# a changed flag value and a retyped 1.0 member.
#
# usage: pins_catch_drift.sh SOURCE_DIR CC
set -eu

src=$1 cc=$2
abi=$src/tests/abi

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-pins-drift-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

crit_cflags=$(pkg-config --cflags criterion) || fail "pkg-config criterion"
crit_libs=$(pkg-config --libs criterion) || fail "pkg-config criterion"
cflags="-std=c11 -Wall -Wextra -Werror"

# pins OBJECT FN MINOR INCLUDE_DIR
pins() {
    # shellcheck disable=SC2086 # cflags is a list of flags
    "$cc" $cflags -DABI_PINS_FN="$2" -DABI_PINS_MINOR="$3" -I"$4" \
        -c "$abi/frozen_pins.c" -o "$1"
}

pins "$work/frozen_1_0.o" abi_pins_frozen_1_0 0 "$abi/frozen/1.0" || fail "frozen 1.0 pins"
pins "$work/frozen_1_1.o" abi_pins_frozen_1_1 1 "$abi/frozen/1.1" || fail "frozen 1.1 pins"
# shellcheck disable=SC2086
"$cc" $cflags $crit_cflags -c "$abi/test_frozen_pins.c" -o "$work/test.o" ||
    fail "test_frozen_pins.c"

# check LABEL EXPECT SED: build the live tables from the live headers
# (sbx/provider.h and the sbx/types.h it includes) edited by SED (none for
# the control run) and run the test. EXPECT empty: it must pass; else it
# must fail with EXPECT in its output.
check() {
    label=$1 expect=$2 edit=$3
    d=$work/$label
    mkdir -p "$d/sbx"
    changed=0
    for h in provider.h types.h; do
        if [ -n "$edit" ]; then
            sed "$edit" "$src/abi/sbx/$h" >"$d/sbx/$h"
            cmp -s "$d/sbx/$h" "$src/abi/sbx/$h" || changed=1
        else
            cp "$src/abi/sbx/$h" "$d/sbx/$h"
        fi
    done
    [ -z "$edit" ] || [ "$changed" = 1 ] ||
        fail "$label: the edit no longer applies to abi/sbx/provider.h or types.h"
    pins "$d/live_1_0.o" abi_pins_live_1_0 0 "$d" || fail "$label: live 1.0 pins"
    pins "$d/live_1_1.o" abi_pins_live_1_1 1 "$d" || fail "$label: live 1.1 pins"
    # shellcheck disable=SC2086
    "$cc" "$work/test.o" "$work/frozen_1_0.o" "$work/frozen_1_1.o" "$d/live_1_0.o" \
        "$d/live_1_1.o" $crit_libs -o "$d/test" || fail "$label: link"
    if "$d/test" --jobs 1 >"$d/out" 2>&1; then
        [ -z "$expect" ] || fail "$label: the pins test passed on a broken header"
    else
        [ -n "$expect" ] || { cat "$d/out" >&2; fail "$label: the pins test fails"; }
        grep -qF -- "$expect" "$d/out" || {
            cat "$d/out" >&2
            fail "$label: failed, but without \"$expect\""
        }
    fi
    echo "ok: $label"
}

check unchanged "" ""
check gid_signed "type of sbx_group_spec.gid is uint32_t no longer holds" \
    's/^    uint32_t gid;$/    int32_t gid;/'
check op_inserted "offsetof(sbx_provider_ops, memory_load): live " \
    '/^    int (\*memory_load)(sbx_sandbox/i\
    void (*inserted)(void);'
check cap_users_renumbered "SBX_CAP_USERS: live 128, frozen 64" \
    's/^#define SBX_CAP_USERS         (UINT64_C(1) << 6)$/#define SBX_CAP_USERS (UINT64_C(1) << 7)/'
check memory_diff_signature "type of sbx_provider_ops.memory_diff is memory_diff_fn" \
    's/^                       uint32_t flags, const struct sbx_memory_changes \*out);$/                       uint64_t flags, const struct sbx_memory_changes *out);/'
check call_user_retyped "type of sbx_host.call_user is call_user_fn" \
    's/const char \*(\*call_user)(/char *(*call_user)(/'
check egress_action_shrunk "sizeof(sbx_egress_policy.default_action): live 2, frozen 4" \
    's/^    uint32_t default_action;     \/\* enum sbx_egress_action;/    uint16_t default_action;     \/* enum sbx_egress_action;/'
check diff_all_changed "SBX_MEMORY_DIFF_ALL: live 2, frozen 1" \
    's/^#define SBX_MEMORY_DIFF_ALL 1u$/#define SBX_MEMORY_DIFF_ALL 2u/'
check timed_out_retyped "1.0: live header: type of sbx_exec_result.timed_out is int" \
    's/^    int timed_out;      \/\*/    unsigned timed_out; \/*/'
echo "PASS"
