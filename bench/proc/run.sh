#!/bin/sh
# bench/proc/run.sh - the process benchmarks, side by side with their
# baselines in the same run (results: docs/PERFORMANCE.md):
#   bench_pty keystroke    one byte written, its echo read: sbx vs a raw PTY
#   bench_pty throughput   256 MiB of PTY output: sbx vs a raw PTY, RSS growth
#                          (one static writer, bench_pty_writer, on both sides)
#   exec --yield vs exec   whole CLI invocations of a quick command (hyperfine,
#                          in 5 rounds that alternate which goes first)
# on local, and on docker too when SBX_TEST_DOCKER_HOST is set. Ratios are
# printed, nothing is asserted.
#
# Usage: bench/proc/run.sh [BUILD_DIR] [RUNS] [WHAT]
#   (default: build, 100 runs, WHAT "keystroke throughput yield": any of them)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-"$here/../../build"}
runs=${2:-100}
what=${3:-"keystroke throughput yield"}
has() { case " $what " in *" $1 "*) return 0 ;; esac; return 1; }
build=$(cd "$build" && pwd)
sbx="$build/bin/sbx"
for f in "$sbx" "$build/bench/bench_pty"; do
    [ -x "$f" ] || { echo "run.sh: $f not found: build the project first" >&2; exit 2; }
done
for tool in hyperfine jq; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "run.sh: $tool is required (apt-get install $tool)" >&2
        exit 2
    }
done

providers=local
[ -n "${SBX_TEST_DOCKER_HOST:-}" ] && providers="local docker"

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for p in $providers; do
    if has keystroke; then "$build/bench/bench_pty" keystroke --provider "$p"; fi
    if has throughput; then "$build/bench/bench_pty" throughput --provider "$p"; fi
done
has yield || exit 0

tmp=$(mktemp -d /tmp/sbx-bench-proc-XXXXXX)
cleanup() {
    for p in $providers; do
        SBX_CONFIG="$tmp/$p.yaml" "$sbx" destroy "bench-$p" >/dev/null 2>&1 || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
mkdir "$tmp/ws" "$tmp/state" "$tmp/res"
cat > "$tmp/local.yaml" <<YAML
default_provider: local
providers:
  local:
    root: $tmp/ws
YAML
cat > "$tmp/docker.yaml" <<YAML
default_provider: docker
providers:
  docker:
    host: "${SBX_TEST_DOCKER_HOST:-}"
    image: "${SBX_TEST_DOCKER_IMAGE:-sbx-test:busybox}"
    resource_dir: "$tmp/res"
YAML
export SBX_PLUGIN_PATH="$build/providers" XDG_STATE_HOME="$tmp/state"
unset SBX_PROVIDER
median() {
    jq -r --arg c "$1" '.results[] | select(.command == $c) | .median' "$tmp/result.json"
}
# hyperfine runs one command's runs after the other's: on a shared machine
# the load moves in between. So the runs are split into 5 rounds that
# alternate which goes first; the figure is the median of the rounds'
# ratios (and of their medians).
rounds=5
per=$(( (runs + rounds - 1) / rounds ))
for p in $providers; do
    export SBX_CONFIG="$tmp/$p.yaml"
    "$sbx" exec "bench-$p" -- true
    plain="$sbx exec bench-$p -- true"
    yield="$sbx exec --yield 10000 bench-$p -- true"
    : > "$tmp/rounds"
    for r in $(seq 1 $rounds); do
        if [ $((r % 2)) -eq 1 ]; then first=$plain second=$yield; else first=$yield second=$plain; fi
        hyperfine -N --warmup 5 --runs "$per" --export-json "$tmp/result.json" \
            "$first" "$second" >/dev/null 2>&1
        echo "$(median "$plain") $(median "$yield")" >> "$tmp/rounds"
    done
    jq -R -s -r --arg p "$p" --argjson n "$per" --argjson k "$rounds" '
        def med: sort | if length % 2 == 1 then .[length / 2 | floor]
                        else (.[length / 2 - 1] + .[length / 2]) / 2 end;
        [split("\n")[] | select(length > 0) | split(" ") | map(tonumber)] as $r
        | "exec vs exec --yield (\($p), \($k) alternating rounds of \($n)): exec "
          + ([$r[][0]] | med * 1000 * 100 | round / 100 | tostring) + " ms, exec --yield "
          + ([$r[][1]] | med * 1000 * 100 | round / 100 | tostring) + " ms, ratio "
          + ([$r[] | .[1] / .[0]] | med * 100 | round / 100 | tostring) + " (rounds: "
          + ([$r[] | .[1] / .[0] * 100 | round / 100 | tostring] | join(" ")) + ")"' \
        "$tmp/rounds"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
