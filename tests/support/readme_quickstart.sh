#!/usr/bin/env bash
# readme_quickstart.sh - the README's "Quick start" blocks, run as written.
#
# Extracts the fenced ```sh blocks of the "## Quick start" section of
# README.md (one per "### " user), checks that there are the four users
# (agent runtime, operator, packager, backend author), that no block
# exceeds ten lines, and that "## The two commands" still holds exactly its
# two commands. Then it makes a scratch "checkout": this build installed
# into WORK/tree/_install (as scripts/run.sh would), and copies of the
# source folders the blocks use (examples/, scripts/ and the sources a
# package build needs when it runs), and runs each block there line by
# line with `bash -e -o pipefail` under a fresh HOME and XDG_STATE_HOME,
# an environment of only PATH, HOME, XDG_STATE_HOME, TERM and LANG, and
# stdin from /dev/null. A failing line fails the test and names the block
# and the line. The packager's block (a full package build, minutes) is
# run by the test packaging_deb_chroot (tests/packaging/deb_chroot.sh),
# which needs those packages anyway; here its syntax is checked and every
# script it calls must exist.
#
# usage: readme_quickstart.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
readme=$src/README.md
fail() { echo "FAIL: $*" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/sbx-quickstart-XXXXXX")
trap 'rm -rf --one-file-system "$work"' EXIT
trap 'exit 1' INT TERM

# 1. The two commands are kept as they are.
two=$(awk '/^## The two commands/{on=1; next} on && /^## /{exit} on' "$readme")
grep -qxF 'scripts/run.sh -- uname -a    # build everything, install into ./_install, run `sbx run` on the local provider' <<<"$two" ||
    fail "README: the first of the two commands changed"
grep -qxF 'scripts/test.sh               # build twice (-Werror; ASan+UBSan), start dockerd and PostgreSQL, run every test' <<<"$two" ||
    fail "README: the second of the two commands changed"

# 2. The blocks: WORK/blocks/N.sh, WORK/blocks/N.title.
. "$src/tests/support/readme_blocks.sh"
nblocks=$(readme_extract_blocks "$readme" "$work/blocks")
[ "$nblocks" -eq 4 ] || fail "README Quick start: expected 4 sh blocks, found $nblocks"
declare -A want=([1]="Agent runtime" [2]="Operator" [3]="Packager" [4]="Backend author")
for i in 1 2 3 4; do
    title=$(cat "$work/blocks/$i.title")
    [[ $title == "${want[$i]}"* ]] || fail "Quick start block $i is under '$title', expected '${want[$i]}...'"
    lines=$(wc -l <"$work/blocks/$i.sh")
    [ "$lines" -le 10 ] || fail "Quick start '$title': $lines lines (at most 10)"
    [ "$lines" -ge 1 ] || fail "Quick start '$title': empty"
    bash -n "$work/blocks/$i.sh" || fail "Quick start '$title': not valid sh"
    # `a && b` and `a || b` hide a failure of a from -e: one command per
    # line (or `;`), so that every failing command fails the block
    if grep -nE '&&|\|\|' "$work/blocks/$i.sh"; then
        fail "Quick start '$title': && or || in a line above (a failure there would not stop the block)"
    fi
done

# 3. The scratch checkout.
tree=$work/tree
mkdir -p "$tree" "$work/home" "$work/state"
cmake --install "$build" --prefix "$tree/_install" >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; fail "cmake --install $build"; }
cp -r "$src/examples" "$src/scripts" "$tree/"

run_block() { # N: runs block N in the scratch checkout
    echo "== $(cat "$work/blocks/$1.title")"
    readme_run_block "$work/blocks" "$1" "$tree" "$work" ||
        fail "Quick start '$(cat "$work/blocks/$1.title")' failed (status $?); output above"
}

run_block 1
run_block 2
for s in $(grep -o 'scripts/[A-Za-z0-9_./-]*' "$work/blocks/3.sh"); do
    [ -x "$src/$s" ] || fail "Quick start 'Packager': $s does not exist or is not executable"
done
echo "== Packager: syntax and scripts checked (packaging_deb_chroot runs it)"
run_block 4
echo "PASS: every quick start block ran"
