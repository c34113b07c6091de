#!/bin/sh
# target_minor.sh - SBX_ABI_TARGET_MINOR lets a provider built against a
# newer header load into an older host.
#
# Simulates the next minor: copies abi/sbx/provider.h, bumps SBX_ABI_MINOR
# and appends one op to struct sbx_provider_ops and one member to struct
# sbx_host, as a real minor would. Then builds minor_target.c against it:
#  - with -DSBX_ABI_TARGET_MINOR=0: the current host must accept it;
#  - without: the current host must refuse it, naming both minors;
#  - with a target above the header's minor (or below 0): #error.
# And against the live (1.2) header itself:
#  - with -DSBX_ABI_TARGET_MINOR=1: a 1.1 provider, accepted;
#  - declaring the 1.2 capabilities (-DTARGETED_CAPS_1_2) with their ops:
#    accepted when it targets 2, refused (unknown bits) when it targets 1.
# Loading goes through the host's loader (load_probe).
#
# usage: target_minor.sh SOURCE_DIR CC LOAD_PROBE
set -eu

src=$1 cc=$2 probe=$3

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-target-minor-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

live=$src/abi/sbx/provider.h
major=$(sed -n 's/^#define SBX_ABI_MAJOR \([0-9][0-9]*\)$/\1/p' "$live")
minor=$(sed -n 's/^#define SBX_ABI_MINOR \([0-9][0-9]*\)$/\1/p' "$live")
[ -n "$major" ] && [ -n "$minor" ] || fail "no SBX_ABI_MAJOR/MINOR in $live"
newer=$((minor + 1))
echo "host ABI $major.$minor, simulated header $major.$newer"

# The simulated header. Struct ends are the first "};" after the opening
# line; each edit must happen exactly once or the header's shape changed
# and this script needs a look.
mkdir -p "$work/newer/sbx"
awk -v newer="$newer" '
    /^#define SBX_ABI_MINOR [0-9]+$/ {
        print "#define SBX_ABI_MINOR " newer; bumped++; next
    }
    /^struct sbx_provider_ops \{$/ { in_ops = 1 }
    /^struct sbx_host \{$/ { in_host = 1 }
    in_ops && /^};$/ {
        print "    /* simulated: an op appended by the next minor */"
        print "    int (*simulated_op)(sbx_sandbox *sb, sbx_call *call);"
        in_ops = 0; ops++
    }
    in_host && /^};$/ {
        print "    /* simulated: a host service appended by the next minor */"
        print "    int (*simulated_service)(const struct sbx_host *host);"
        in_host = 0; host++
    }
    { print }
    END { if (bumped != 1 || ops != 1 || host != 1) exit 1 }
' "$live" >"$work/newer/sbx/provider.h" ||
    fail "could not derive a $major.$newer header from $live"
# The shared vocabulary provider.h includes, unchanged.
cp "$src/abi/sbx/types.h" "$work/newer/sbx/types.h"

# build DIR HEADER_DIR [FLAGS...]: compile minor_target.c into
# DIR/targeted.so, compiler output in DIR/cc.log.
build() {
    dir=$1 inc=$2
    shift 2
    mkdir -p "$dir"
    "$cc" -std=c11 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
        -Wl,--no-undefined -Wl,-z,defs -I"$inc" "$@" \
        -o "$dir/targeted.so" "$src/tests/abi/minor_target.c" >"$dir/cc.log" 2>&1
}

# probe DIR: the loader's verdict on DIR/targeted.so.
probe() {
    "$probe" "$1" targeted || true
}

# Baseline: the same source against the live header.
build "$work/live" "$src/abi" || { cat "$work/live/cc.log" >&2; fail "live build"; }
out=$(probe "$work/live")
echo "live header: $out"
case $out in
"ok targeted abi $major.$minor "*) ;;
*) fail "built against the live header: $out" ;;
esac
live_ops=$(echo "$out" | sed -n 's/.* ops_size \([0-9]*\)$/\1/p')

# The live header targeting the previous minor: that minor's provider,
# with the live header's table, loads here.
if [ "$minor" -ge 1 ]; then
    prev=$((minor - 1))
    build "$work/live$prev" "$src/abi" -DSBX_ABI_TARGET_MINOR=$prev ||
        { cat "$work/live$prev/cc.log" >&2; fail "live build, target $prev"; }
    out=$(probe "$work/live$prev")
    echo "live header, SBX_ABI_TARGET_MINOR=$prev: $out"
    case $out in
    "ok targeted abi $major.$prev "*" ops_size $live_ops") ;;
    *) fail "SBX_ABI_TARGET_MINOR=$prev against the live header was not accepted: $out" ;;
    esac
fi

# The 1.2 capabilities: declared with their ops by a descriptor of minor 2
# they load; the same declaration from a descriptor of minor 1 is refused,
# since a 1.1 provider cannot promise what 1.1 did not have.
if [ "$minor" -ge 2 ]; then
    build "$work/caps2" "$src/abi" -DTARGETED_CAPS_1_2 -DSBX_ABI_TARGET_MINOR=2 ||
        { cat "$work/caps2/cc.log" >&2; fail "live build with the 1.2 caps"; }
    out=$(probe "$work/caps2")
    echo "live header, 1.2 caps, SBX_ABI_TARGET_MINOR=2: $out"
    case $out in
    "ok targeted abi $major.2 "*) ;;
    *) fail "a 1.2 provider declaring processes, pty, file_ops and ports was refused: $out" ;;
    esac
    build "$work/caps1" "$src/abi" -DTARGETED_CAPS_1_2 -DSBX_ABI_TARGET_MINOR=1 ||
        { cat "$work/caps1/cc.log" >&2; fail "live build with the 1.2 caps, target 1"; }
    out=$(probe "$work/caps1")
    echo "live header, 1.2 caps, SBX_ABI_TARGET_MINOR=1: $out"
    want="unknown capability bits 0x780: host knows 0x7f (ABI $major.1), plugin declares 0x780"
    case $out in
    "refused 13: "*"$want") ;;
    *) fail "want a refusal ending in \"$want\", got: $out" ;;
    esac
fi

# Targeting 1.0 with the newer header: accepted.
build "$work/target0" "$work/newer" -DSBX_ABI_TARGET_MINOR=0 ||
    { cat "$work/target0/cc.log" >&2; fail "build with SBX_ABI_TARGET_MINOR=0"; }
out=$(probe "$work/target0")
echo "newer header, SBX_ABI_TARGET_MINOR=0: $out"
case $out in
"ok targeted abi $major.0 "*) ;;
*) fail "SBX_ABI_TARGET_MINOR=0 against the $major.$newer header was not accepted: $out" ;;
esac
# It really is the bigger table of the newer header that was accepted.
ops=$(echo "$out" | sed -n 's/.* ops_size \([0-9]*\)$/\1/p')
[ "$ops" -gt "$live_ops" ] ||
    fail "ops_size $ops is not larger than the live header's $live_ops"

# No target: the descriptor claims the newer minor and is refused.
build "$work/default" "$work/newer" ||
    { cat "$work/default/cc.log" >&2; fail "build without SBX_ABI_TARGET_MINOR"; }
out=$(probe "$work/default")
echo "newer header, no target: $out"
want="ABI minor version too new: host supports up to $major.$minor, plugin requires $major.$newer"
case $out in
"refused 13: "*"$want") ;;
*) fail "want a refusal (SBX_E_ABI) ending in \"$want\", got: $out" ;;
esac

# Targets outside 0..SBX_ABI_MINOR do not compile.
for bad in $((newer + 1)) -1; do
    if build "$work/bad$bad" "$work/newer" -DSBX_ABI_TARGET_MINOR=$bad; then
        fail "SBX_ABI_TARGET_MINOR=$bad against the $major.$newer header compiled"
    fi
    grep -q 'SBX_ABI_TARGET_MINOR must be between 0 and SBX_ABI_MINOR' "$work/bad$bad/cc.log" ||
        { cat "$work/bad$bad/cc.log" >&2; fail "SBX_ABI_TARGET_MINOR=$bad failed without the #error"; }
    echo "SBX_ABI_TARGET_MINOR=$bad: #error, as it should"
done
echo "PASS"
