#!/bin/sh
# call_rules_catch.sh PYTHON CC NM - call_rules.py passes on objects whose
# calls go down the layers, and fails on a call up a layer, on two files
# of one folder that call each other (tiny objects built here) and on an
# object list that misses a layer.
set -eu
py=$1 cc=$2 nm=$3
check=$(dirname "$0")/call_rules.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sbx-call-rules.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0

# obj LAYER/FILE SOURCE: compile SOURCE into $tmp/LAYER/FILE.c.o
obj() {
    mkdir -p "$tmp/$(dirname "$1")"
    printf '%s\n' "$2" > "$tmp/$1.c"
    "$cc" -c -o "$tmp/$1.c.o" "$tmp/$1.c"
}
expect() {
    want=$1 text=$2
    shift 2
    if out=$("$py" "$check" "$nm" "$@" 2>&1); then got=pass; else got=fail; fi
    case "$got:$out" in
    "$want:"*"$text"*) echo "$want as expected: $text" ;;
    *) echo "FAIL: expected $want with \"$text\", got $got:"; echo "$out"; status=1 ;;
    esac
}

obj base/low 'int sbxh_low(void) { return 1; }'
obj sessions/high 'int sbxh_low(void); int sbxh_high(void) { return sbxh_low(); }'
expect pass 'calls go one way' "$tmp/base/low.c.o" "$tmp/sessions/high.c.o"

obj base/up 'int sbxh_high(void); int sbxh_up(void) { return sbxh_high(); }'
expect fail 'base/up.c calls sessions/high.c of host/sessions, which host/base may not use: sbxh_high' \
    "$tmp/base/low.c.o" "$tmp/sessions/high.c.o" "$tmp/base/up.c.o"

obj store/a 'int sbxh_b(void); int sbxh_a(void) { return sbxh_b(); }'
obj store/b 'int sbxh_a(void); int sbxh_b(void) { return sbxh_a(); }'
expect fail 'these files call each other: store/a.c -> store/b.c (sbxh_b); store/b.c -> store/a.c (sbxh_a)' \
    "$tmp/store/a.c.o" "$tmp/store/b.c.o"

# an object list missing a layer does not pass in silence
if out=$("$py" "$check" --every-layer "$nm" "$tmp/base/low.c.o" "$tmp/sessions/high.c.o" 2>&1); then
    echo "FAIL: --every-layer passed without objects of config, registry, api, store"
    status=1
else
    case $out in
    *"no object of host/config was given"*) echo "fail as expected: no object of host/config" ;;
    *) echo "FAIL: --every-layer: unexpected output:"; echo "$out"; status=1 ;;
    esac
fi

[ $status = 0 ] && echo "every planted violation was caught"
exit $status
