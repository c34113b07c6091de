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
# and the line. The packager's block (a full package build, minutes) runs
# only with SBX_QUICKSTART_PACKAGER=1; otherwise its syntax is checked and
# every script it calls must exist.
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
mkdir -p "$work/blocks"
awk -v dir="$work/blocks" '
    /^## Quick start/ { on = 1; next }
    on && /^## / { exit }
    on && /^### / { title = substr($0, 5); next }
    on && /^```sh$/ { n++; inblock = 1; print title > (dir "/" n ".title"); next }
    on && inblock && /^```$/ { inblock = 0; close(dir "/" n ".sh"); next }
    on && inblock { print > (dir "/" n ".sh") }
' "$readme"
nblocks=$(ls "$work/blocks"/*.sh 2>/dev/null | wc -l)
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

run_block() { # N: runs block N in a copy of the tree, line by line
    local i=$1 title
    title=$(cat "$work/blocks/$i.title")
    echo "== $title"
    # each line is echoed, then run; -e stops at the first failing one
    local script=$work/blocks/$i.run
    { echo 'set -eo pipefail'
      echo 'trap '"'"'echo "FAIL: this line failed (status $?): $BASH_COMMAND" >&2'"'"' ERR'
      cat "$work/blocks/$i.sh"; } >"$script"
    # a fresh machine per user: its own HOME and state
    rm -rf "$work/home" "$work/state"
    mkdir -p "$work/home" "$work/state"
    # in a session of its own, so that what a failed block left running (a
    # background reconciler) is stopped with it
    (cd "$tree"; exec setsid env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work/home" \
        XDG_STATE_HOME="$work/state" TERM=dumb LANG=C.UTF-8 \
        bash -x "$script" </dev/null) >"$work/block$i.log" 2>&1 &
    local pid=$!
    wait "$pid"
    local rc=$?
    kill -TERM -- "-$pid" 2>/dev/null
    cat "$work/block$i.log"
    [ $rc -eq 0 ] || fail "Quick start '$title' failed (status $rc); output above"
}

run_block 1
run_block 2
if [ "${SBX_QUICKSTART_PACKAGER:-0}" = 1 ]; then
    # a package build needs the whole tree: run it in a copy without builds
    mkdir -p "$tree/src-copy"
    tar -C "$src" --exclude=./build --exclude=./_install --exclude=./.git -cf - . |
        tar -C "$tree/src-copy" -xf - || fail "copying the source tree"
    saved_tree=$tree
    tree=$tree/src-copy
    run_block 3
    tree=$saved_tree
else
    for s in $(grep -o 'scripts/[A-Za-z0-9_./-]*' "$work/blocks/3.sh"); do
        [ -x "$src/$s" ] || fail "Quick start 'Packager': $s does not exist or is not executable"
    done
    echo "== Packager: syntax and scripts checked (SBX_QUICKSTART_PACKAGER=1 runs it)"
fi
run_block 4
echo "PASS: every quick start block ran"
