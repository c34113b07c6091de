#!/bin/sh
# symbols.sh - what a library exports, and the prefixes its objects use.
#
#   symbols.sh exports NM LIB MACRO HEADER...
#     The dynamic symbols LIB defines (nm -D --defined-only, less version
#     nodes) are exactly the names the HEADERs declare with MACRO (SBX_API,
#     SBX_CONFORMANCE_API): none missing, none extra.
#
#   symbols.sh prefixes NM RULES [--api MACRO HEADER... --] FILE...
#     Every global symbol the objects in FILE... (static archives or object
#     files) define matches a rule of RULES for its object. A RULES line is
#     "OBJECT-GLOB PATTERN": OBJECT-GLOB is matched against the object's
#     file name (* and ?), PATTERN is an extended regular expression for
#     the symbol, or @api for "one of the names the HEADERs declare with
#     MACRO" (so a public-looking prefix is allowed only for what is public).
#     "#" starts a comment. A symbol no rule allows is reported with its
#     object and the test fails.
#
# Both exit 0 when everything matches, 1 with a list when not, 2 on a usage
# error or an empty input (a check that saw nothing must not pass). The
# rules are data (tests/abi/prefixes/*.rules), so other libraries and the
# provider modules can reuse the script with rules of their own.
set -eu

usage() {
    echo "usage: $0 exports NM LIB MACRO HEADER... |" >&2
    echo "       $0 prefixes NM RULES [--api MACRO HEADER... --] FILE..." >&2
    exit 2
}

# The names HEADERs declare with MACRO, one a line, sorted: comments and
# preprocessor lines dropped, declarations joined and split at ";", and in
# each one carrying MACRO the identifier before its first "(" (a function)
# or, without one, its last identifier (a variable).
api_names() {
    macro=$1
    shift
    for h in "$@"; do
        [ -r "$h" ] || { echo "$0: cannot read $h" >&2; exit 2; }
    done
    cat "$@" | awk -v macro="$macro" '
        { text = text $0 "\n" }
        END {
            # comments
            out = ""
            while ((i = index(text, "/*")) > 0) {
                out = out substr(text, 1, i - 1) " "
                text = substr(text, i + 2)
                j = index(text, "*/")
                text = (j > 0) ? substr(text, j + 2) : ""
            }
            text = out text
            n = split(text, lines, "\n")
            joined = ""
            for (k = 1; k <= n; k++) {
                if (lines[k] ~ /^[ \t]*#/) {
                    # a directive and its continuation lines
                    while (lines[k] ~ /\\$/ && k < n) k++
                    continue
                }
                joined = joined " " lines[k]
            }
            m = split(joined, decls, /[;{}]/)
            for (k = 1; k <= m; k++) {
                d = decls[k]
                if (d !~ ("(^|[^A-Za-z0-9_])" macro "([^A-Za-z0-9_]|$)")) continue
                gsub(/__attribute__[ \t]*\(\([^()]*(\([^()]*\)[^()]*)*\)\)/, " ", d)
                p = index(d, "(")
                head = (p > 0) ? substr(d, 1, p - 1) : d
                sub(/=.*/, "", head)
                gsub(/\[[^]]*\]/, " ", head)
                if (match(head, /[A-Za-z_][A-Za-z0-9_]*[ \t]*$/)) {
                    name = substr(head, RSTART, RLENGTH)
                    sub(/[ \t]+$/, "", name)
                    if (name != macro) print name
                }
            }
        }' | sort -u
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

[ $# -ge 1 ] || usage
mode=$1
shift
case $mode in
exports)
    [ $# -ge 4 ] || usage
    nm=$1 lib=$2 macro=$3
    shift 3
    api_names "$macro" "$@" > "$tmp/api"
    [ -s "$tmp/api" ] || { echo "$0: no $macro declarations in $*" >&2; exit 2; }
    [ -r "$lib" ] || { echo "$0: cannot read $lib" >&2; exit 2; }
    # "A" entries are version nodes (SBX_1), not symbols.
    "$nm" -D --defined-only "$lib" |
        awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' |
        sort -u > "$tmp/exported"
    status=0
    extra=$(comm -13 "$tmp/api" "$tmp/exported")
    missing=$(comm -23 "$tmp/api" "$tmp/exported")
    if [ -n "$extra" ]; then
        echo "$lib exports what no header declares with $macro:"
        echo "$extra" | sed 's/^/  /'
        status=1
    fi
    if [ -n "$missing" ]; then
        echo "$lib does not export what the headers declare with $macro:"
        echo "$missing" | sed 's/^/  /'
        status=1
    fi
    [ $status -eq 0 ] &&
        echo "$lib exports exactly the $(wc -l < "$tmp/api") names declared with $macro"
    exit $status
    ;;
prefixes)
    [ $# -ge 3 ] || usage
    nm=$1 rules=$2
    shift 2
    [ -r "$rules" ] || { echo "$0: cannot read $rules" >&2; exit 2; }
    : > "$tmp/api"
    if [ "$1" = "--api" ]; then
        shift
        macro=$1
        shift
        headers=""
        while [ $# -gt 0 ] && [ "$1" != "--" ]; do
            headers="$headers $1"
            shift
        done
        [ $# -gt 0 ] || usage
        shift
        # shellcheck disable=SC2086
        api_names "$macro" $headers > "$tmp/api"
        [ -s "$tmp/api" ] || { echo "$0: no $macro declarations in$headers" >&2; exit 2; }
    fi
    [ $# -ge 1 ] || usage
    for f in "$@"; do
        [ -r "$f" ] || { echo "$0: cannot read $f" >&2; exit 2; }
        # nm names each member of an archive ("member.o:"); a lone object
        # file gets its own name. AddressSanitizer gives each global
        # variable an ODR indicator (__odr_asan.NAME with GCC,
        # __odr_asan_gen_NAME with clang): NAME is what is checked.
        "$nm" -g --defined-only "$f" |
            awk -v file="${f##*/}" '
                /:$/ && NF == 1 { file = substr($0, 1, length($0) - 1); next }
                NF >= 3 { name = $NF; sub(/^__odr_asan(\.|_gen_)/, "", name); print file, name }'
    done > "$tmp/symbols"
    [ -s "$tmp/symbols" ] || { echo "$0: no symbols defined in $*" >&2; exit 2; }
    awk -v rulesfile="$rules" -v apifile="$tmp/api" '
        function glob_re(g,   r, i, c) {
            r = "^"
            for (i = 1; i <= length(g); i++) {
                c = substr(g, i, 1)
                if (c == "*") r = r ".*"
                else if (c == "?") r = r "."
                else if (c ~ /[.+^$()|{}\[\]\\]/) r = r "\\" c
                else r = r c
            }
            return r "$"
        }
        BEGIN {
            while ((getline line < apifile) > 0) api[line] = 1
            n = 0
            while ((getline line < rulesfile) > 0) {
                sub(/#.*/, "", line)
                if (split(line, f, " ") < 2) continue
                n++
                obj[n] = glob_re(f[1])
                pat[n] = f[2]
            }
            if (n == 0) { print rulesfile ": no rules" > "/dev/stderr"; norules = 1; exit 2 }
        }
        {
            ok = 0
            for (i = 1; i <= n && !ok; i++) {
                if ($1 !~ obj[i]) continue
                if (pat[i] == "@api") ok = ($2 in api)
                else ok = ($2 ~ pat[i])
            }
            total++
            if (!ok) { bad++; print "  " $1 ": " $2 }
        }
        END {
            if (norules) exit 2
            if (bad) {
                print bad " of " total " symbols match no rule of " rulesfile
                exit 1
            }
            print "all " total " symbols match " rulesfile
        }' "$tmp/symbols"
    ;;
*)
    usage
    ;;
esac
