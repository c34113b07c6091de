#!/bin/sh
# symbols.sh - the symbol rules of one target: which global symbols its
# objects may define, and exactly what its module exports. Registered by
# sbx_check_symbols in tests/abi/CMakeLists.txt (docs/ARCHITECTURE.md,
# "Symbol prefixes").
#
#   symbols.sh NM LABEL prefixes [ALLOWED...] [--api MACRO HEADER... --] OBJECT...
#     Every global symbol the OBJECTs define (nm -g --defined-only; object
#     files or static archives) is allowed by one of:
#       --prefix P        the symbol starts with P, in any object;
#       --name N          the symbol is N, in any object;
#       --allow GLOB RE   the object's name matches GLOB (* and ?) and the
#                         whole symbol matches the extended regular
#                         expression RE: an exception for some objects;
#       --api ...         the symbol is one of the names the HEADERs declare
#                         with MACRO (so a public-looking prefix is allowed
#                         only for what is public).
#     An object is named by its path below the target's CMakeFiles/<t>.dir/
#     (base/pq_lazy.c.o), an archive member by its member name.
#     AddressSanitizer gives each global variable an ODR indicator
#     (__odr_asan.NAME with GCC, __odr_asan_gen_NAME with clang): NAME is
#     what is checked, and a name is reported once per object.
#
#   symbols.sh NM LABEL exports [--name N...] [--api MACRO HEADER... --] MODULE
#     The dynamic symbols MODULE defines (nm -D --defined-only, less the
#     version nodes and @VERSION) are exactly the --names and the names
#     the HEADERs declare with MACRO: none missing, none extra.
#
# Exit 0 when everything matches, 1 with a list naming each symbol (and
# its object) when not, 2 on a usage error or an empty input: a check that
# saw no symbol, or no declaration, must not pass.
set -eu

usage() {
    echo "usage: $0 NM LABEL prefixes [--prefix P | --name N | --allow GLOB RE]..." >&2
    echo "              [--api MACRO HEADER... --] OBJECT..." >&2
    echo "       $0 NM LABEL exports [--name N]... [--api MACRO HEADER... --] MODULE" >&2
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
        [ -r "$h" ] || { echo "$label: cannot read $h" >&2; exit 2; }
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

[ $# -ge 3 ] || usage
nm=$1 label=$2 mode=$3
shift 3
case $mode in prefixes|exports) ;; *) usage ;; esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# The allowed names and rules, one "KIND<TAB>GLOB<TAB>VALUE" a line, and
# the API names (from --api) in $tmp/api.
: > "$tmp/rules"
: > "$tmp/api"
: > "$tmp/names"
api_from=""
tab=$(printf '\t')
while [ $# -gt 0 ]; do
    case $1 in
    --prefix)
        if [ $# -lt 2 ] || [ "$mode" != prefixes ]; then usage; fi
        printf 'prefix\t*\t%s\n' "$2" >> "$tmp/rules"
        shift 2 ;;
    --name)
        [ $# -ge 2 ] || usage
        printf 'name\t*\t%s\n' "$2" >> "$tmp/rules"
        echo "$2" >> "$tmp/names"
        shift 2 ;;
    --allow)
        if [ $# -lt 3 ] || [ "$mode" != prefixes ]; then usage; fi
        case $2$3 in *"$tab"*) usage ;; esac
        printf 'regex\t%s\t%s\n' "$2" "$3" >> "$tmp/rules"
        shift 3 ;;
    --api)
        [ $# -ge 2 ] || usage
        macro=$2
        shift 2
        headers=""
        while [ $# -gt 0 ] && [ "$1" != "--" ]; do
            headers="$headers $1"
            shift
        done
        [ $# -gt 0 ] || usage
        shift
        # shellcheck disable=SC2086
        api_names "$macro" $headers > "$tmp/api"
        [ -s "$tmp/api" ] || { echo "$label: no $macro declarations in$headers" >&2; exit 2; }
        api_from="the $(wc -l < "$tmp/api") names declared with $macro"
        printf 'api\t*\t%s\n' "$macro" >> "$tmp/rules"
        ;;
    --*) usage ;;
    *) break ;;
    esac
done
[ -s "$tmp/rules" ] || { echo "$label: nothing allowed, nothing to check" >&2; exit 2; }

if [ "$mode" = exports ]; then
    [ $# -eq 1 ] || usage
    lib=$1
    [ -r "$lib" ] || { echo "$label: cannot read $lib" >&2; exit 2; }
    sort -u "$tmp/names" "$tmp/api" > "$tmp/want"
    "$nm" -D --defined-only "$lib" > "$tmp/nm" ||
        { echo "$label: $nm -D --defined-only $lib failed" >&2; exit 2; }
    # "A" entries are version nodes (SBX_1), not symbols.
    awk 'NF >= 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' "$tmp/nm" |
        sort -u > "$tmp/exported"
    [ -s "$tmp/exported" ] || { echo "$label: $lib exports no symbol at all" >&2; exit 2; }
    want=$(sort -u "$tmp/names" | paste -sd, - | sed 's/,/, /g')
    [ -z "$api_from" ] || want="${want:+$want and }$api_from"
    status=0
    extra=$(comm -13 "$tmp/want" "$tmp/exported")
    missing=$(comm -23 "$tmp/want" "$tmp/exported")
    if [ -n "$extra" ]; then
        echo "$label: $lib exports what it must not (it exports exactly $want):"
        echo "$extra" | sed 's/^/  /'
        status=1
    fi
    if [ -n "$missing" ]; then
        echo "$label: $lib does not export (it exports exactly $want):"
        echo "$missing" | sed 's/^/  /'
        status=1
    fi
    [ $status -eq 0 ] &&
        echo "$label: $lib exports exactly the $(wc -l < "$tmp/want") names wanted ($want)"
    exit $status
fi

[ $# -ge 1 ] || usage
for f in "$@"; do
    [ -r "$f" ] || { echo "$label: cannot read $f" >&2; exit 2; }
done
"$nm" -g --defined-only "$@" > "$tmp/nm" ||
    { echo "$label: $nm -g --defined-only failed on $*" >&2; exit 2; }
# nm heads each object ("path:", when given several) and each member of an
# archive ("member.o:"); an object file is named by its path below
# CMakeFiles/<target>.dir/, else by its file name.
awk -v only="$1" '
    function label(f) {
        if (!sub(/^.*\/CMakeFiles\/[^\/]*\.dir\//, "", f)) sub(/^.*\//, "", f)
        return f
    }
    BEGIN { file = label(only) }
    /:$/ && NF == 1 { file = label(substr($0, 1, length($0) - 1)); next }
    NF >= 3 {
        sym = $NF
        sub(/^__odr_asan(\.|_gen_)/, "", sym)
        if (!seen[file "\t" sym]++) print file "\t" sym
    }' \
    "$tmp/nm" > "$tmp/symbols"
[ -s "$tmp/symbols" ] || { echo "$label: no global symbol defined in $*" >&2; exit 2; }

awk -F '\t' -v label="$label" -v rulesfile="$tmp/rules" -v apifile="$tmp/api" '
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
        allowed = ""
        while ((getline line < rulesfile) > 0) {
            split(line, f, "\t")
            n++
            kind[n] = f[1]; obj[n] = glob_re(f[2]); val[n] = f[3]
            if (f[1] == "prefix") what = "prefix " f[3]
            else if (f[1] == "name") what = "name " f[3]
            else if (f[1] == "api") what = "the names declared with " f[3]
            else what = f[3] " in " f[2]
            allowed = allowed (n > 1 ? "; " : "") what
        }
    }
    {
        ok = 0
        for (i = 1; i <= n && !ok; i++) {
            if ($1 !~ obj[i]) continue
            if (kind[i] == "prefix") ok = (substr($2, 1, length(val[i])) == val[i])
            else if (kind[i] == "name") ok = ($2 == val[i])
            else if (kind[i] == "api") ok = ($2 in api)
            else ok = ($2 ~ ("^(" val[i] ")$"))
        }
        total++
        if (!ok) bad[++nbad] = "  " $2 " (" $1 ")"
    }
    END {
        if (nbad) {
            print label ": " nbad " of " total " global symbols are not allowed (" allowed "):"
            for (i = 1; i <= nbad; i++) print bad[i]
            print "Give them the prefix or make them static."
            exit 1
        }
        print label ": all " total " global symbols allowed (" allowed ")"
    }' "$tmp/symbols"
