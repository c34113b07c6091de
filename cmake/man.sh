#!/bin/sh
# man.sh - write the man pages of `sbx` from its --help texts with help2man:
# sbx.1 and one sbx-COMMAND.1 per command listed by `sbx --help`, each
# compressed with gzip -9n (reproducible: no name or time in the header).
#
# usage: man.sh SBX_BINARY OUTDIR
set -eu
sbx=$1 out=$2
mkdir -p "$out"
rm -f "$out"/*.1 "$out"/*.1.gz
# No configuration of this machine may leak into the texts.
export SBX_CONFIG=/dev/null SBX_PLUGIN_PATH=/nonexistent
unset SBX_PROVIDER
commands=$("$sbx" --help | awk '/^Commands:/ { on = 1; next }
                                on && /^$/ { exit }
                                on { print $1 }')
[ -n "$commands" ] || { echo "man.sh: no commands in 'sbx --help'" >&2; exit 1; }
see=""
for c in $commands; do see="$see sbx-$c(1),"; done
see=${see%,}
include=$(mktemp)
trap 'rm -f "$include"' EXIT
{
    echo "[SEE ALSO]"
    echo "$see"
    echo
    echo "The documentation in /usr/share/doc/sbx."
} >"$include"
help2man -N -n "run commands in sandboxes served by provider plugins" \
    -i "$include" -o "$out/sbx.1" "$sbx"
for c in $commands; do
    # The first line after the usage is the summary in the name section.
    summary=$("$sbx" --help | awk -v c="$c" '$1 == c { $1 = ""; sub(/^ +/, ""); print; exit }')
    printf '[SEE ALSO]\nsbx(1)\n' >"$include"
    help2man -N -n "$summary" -i "$include" --help-option="$c --help" \
        --version-option=--version -o "$out/sbx-$c.1" "$sbx"
    # help2man names the page after the program; it documents `sbx COMMAND`.
    sed -i "s/^\.TH SBX /.TH SBX-$(echo "$c" | tr a-z A-Z) /; s/^sbx \\\\- /sbx-$c \\\\- /" \
        "$out/sbx-$c.1"
done
gzip -9n "$out"/*.1
