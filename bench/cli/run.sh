#!/bin/sh
# bench/cli/run.sh - start-up cost of the sbx command, measured with
# hyperfine against /bin/true in the same run:
#   sbx run -- true    (open config, load only the local provider, create a
#                       workspace, exec, destroy)
#   sbx providers      (load the descriptor of every installed plugin)
# Prints the medians and the ratios to /bin/true. There is no pass/fail
# target; the script fails only when a command or hyperfine fails.
#
# Usage: bench/cli/run.sh [BUILD_DIR] [RUNS]   (default: build, 200 runs)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-"$here/../../build"}
runs=${2:-200}
build=$(cd "$build" && pwd)
sbx="$build/bin/sbx"
providers="$build/providers"

if [ ! -x "$sbx" ]; then
    echo "run.sh: $sbx not found: build the project first" >&2
    exit 2
fi
if ! command -v hyperfine >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get install -y hyperfine >/dev/null
    else
        echo "run.sh: hyperfine is not installed (apt-get install hyperfine)" >&2
        exit 2
    fi
fi
for tool in jq; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "run.sh: $tool is required (apt-get install $tool)" >&2
        exit 2
    }
done

tmp=$(mktemp -d /tmp/sbx-bench-cli-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir "$tmp/ws" "$tmp/state"
cat > "$tmp/sbx.yaml" <<YAML
default_provider: local
providers:
  local:
    root: $tmp/ws
YAML
export SBX_CONFIG="$tmp/sbx.yaml" SBX_PLUGIN_PATH="$providers" XDG_STATE_HOME="$tmp/state"
unset SBX_PROVIDER

nplugins=$(ls "$providers"/*.so 2>/dev/null | wc -l)
echo "sbx: $sbx ($("$sbx" --version))"
echo "plugins installed in $providers: $nplugins"

hyperfine -N --warmup 20 --runs "$runs" --export-json "$tmp/result.json" \
    /bin/true "$sbx run -- true" "$sbx providers" >"$tmp/hyperfine.txt"

median() {
    jq -r --arg c "$1" '.results[] | select(.command == $c) | .median' "$tmp/result.json"
}
base=$(median /bin/true)
echo
printf '%-28s %12s %10s\n' "command" "median (ms)" "ratio"
for c in /bin/true "$sbx run -- true" "$sbx providers"; do
    m=$(median "$c")
    printf '%-28s %12s %10s\n' "$(echo "$c" | sed "s|$build/bin/||")" \
        "$(jq -n --argjson m "$m" '$m * 1000 * 1000 | round / 1000')" \
        "$(jq -n --argjson m "$m" --argjson b "$base" '$m / $b * 100 | round / 100')"
done
[ "$(ls -A "$tmp/ws")" = "" ] || { echo "run.sh: workspaces were left in $tmp/ws" >&2; exit 1; }
