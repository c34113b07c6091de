# readme_blocks.sh - the README's "Quick start" blocks, for tests to run as
# written. Sourced by tests/support/readme_quickstart.sh (the agent runtime,
# operator and backend author blocks) and tests/packaging/deb_chroot.sh (the
# packager's block, whose package build that test needs anyway).
#
# readme_extract_blocks README DIR
#     writes the fenced ```sh blocks of README's "## Quick start" section as
#     DIR/N.sh (N = 1, 2, ... in order) and the "### " title above each as
#     DIR/N.title; prints how many there are.
# readme_block_number README DIR TITLE
#     extracts into DIR and prints the N of the block whose title starts
#     with TITLE (nothing, status 1, when there is none).
# readme_run_block DIR N TREE WORK
#     runs DIR/N.sh in TREE line by line (`bash -x`, stopping at the first
#     failing line, which is named) under a fresh HOME and XDG_STATE_HOME
#     in WORK, with an environment of only PATH, HOME, XDG_STATE_HOME, TERM
#     and LANG, stdin from /dev/null, in a session of its own (what a failed
#     block left running is stopped with it). Its output goes to
#     WORK/blockN.log and is printed; the status is the block's.

readme_extract_blocks() {
    local readme=$1 dir=$2
    mkdir -p "$dir"
    awk -v dir="$dir" '
        /^## Quick start/ { on = 1; next }
        on && /^## / { exit }
        on && /^### / { title = substr($0, 5); next }
        on && /^```sh$/ { n++; inblock = 1; print title > (dir "/" n ".title"); next }
        on && inblock && /^```$/ { inblock = 0; close(dir "/" n ".sh"); next }
        on && inblock { print > (dir "/" n ".sh") }
        END { print n + 0 }
    ' "$readme"
}

readme_block_number() {
    local readme=$1 dir=$2 title=$3 n i
    n=$(readme_extract_blocks "$readme" "$dir")
    for ((i = 1; i <= n; i++)); do
        [[ $(cat "$dir/$i.title") == "$title"* ]] && { echo "$i"; return 0; }
    done
    return 1
}

readme_run_block() {
    local dir=$1 i=$2 tree=$3 work=$4 script pid rc
    script=$dir/$i.run
    # each line is echoed (-x), then run; -e stops at the first failing one
    { echo 'set -eo pipefail'
      echo 'trap '"'"'echo "FAIL: this line failed (status $?): $BASH_COMMAND" >&2'"'"' ERR'
      cat "$dir/$i.sh"; } >"$script"
    rm -rf "$work/home" "$work/state"
    mkdir -p "$work/home" "$work/state"
    (cd "$tree"; exec setsid env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$work/home" \
        XDG_STATE_HOME="$work/state" TERM=dumb LANG=C.UTF-8 \
        bash -x "$script" </dev/null) >"$work/block$i.log" 2>&1 &
    pid=$!
    wait "$pid"
    rc=$?
    kill -TERM -- "-$pid" 2>/dev/null
    cat "$work/block$i.log"
    return $rc
}
