#!/bin/bash
# completion.sh - the bash completion of sbx (etc/completion/sbx.bash)
# offers the commands, a command's options, memory actions and capability
# names, as bash-completion calls it.
set -u
src=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
bc=/usr/share/bash-completion/bash_completion
[ -f "$bc" ] || { echo "skipped: bash-completion is not installed"; exit 77; }
# shellcheck disable=SC1090
. "$bc"
# shellcheck disable=SC1091
. "$src/etc/completion/sbx.bash"

complete_line() { # words...: the completions of the last word
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMP_LINE="${COMP_WORDS[*]}"
    COMP_POINT=${#COMP_LINE}
    COMPREPLY=()
    _sbx sbx "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}

got=$(complete_line sbx cr)
[ "$got" = "create " ] || fail "sbx cr -> '$got'"
got=$(complete_line sbx s)
[ "$got" = "send sessions snapshot stat state " ] || fail "sbx s -> '$got'"
got=$(complete_line sbx exec --d)
[ "$got" = "--detach " ] || fail "exec --d -> '$got'"
got=$(complete_line sbx kill s1 p1 -s TE)
[ "$got" = "TERM " ] || fail "kill -s TE -> '$got'"
got=$(complete_line sbx mv --no)
[ "$got" = "--no-clobber " ] || fail "mv --no -> '$got'"
got=$(complete_line sbx snapshot --)
case $got in *--gzip*--zstd*) ;; *) fail "snapshot options: '$got'" ;; esac
got=$(complete_line sbx create -r out)
[ "$got" = "output_export " ] || fail "create -r out -> '$got'"
got=$(complete_line sbx memory l)
[ "$got" = "list log ls " ] || fail "memory l -> '$got'"
got=$(complete_line sbx --config x.yaml ru)
[ "$got" = "run " ] || fail "after --config: '$got'"
# The zsh function at least parses, and defines _sbx when sourced.
if command -v zsh >/dev/null 2>&1; then
    zsh -n "$src/etc/completion/_sbx" || fail "_sbx does not parse"
    zsh -c "autoload -Uz compinit; compinit -u -D; source '$src/etc/completion/_sbx' 2>/dev/null;
            whence -w _sbx" | grep -q function || fail "_sbx defines no function"
fi
echo PASS
