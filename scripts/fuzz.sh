#!/usr/bin/env bash
# fuzz.sh - build the libFuzzer harnesses (clang, ASan + UBSan) and run each
# for a bounded time against a copy of its seed corpus.
#
#   scripts/fuzz.sh [SECONDS]     default: $SBX_FUZZ_SECONDS, else 30 per harness
#   scripts/fuzz.sh --build       only build them (scripts/test.sh builds
#                                 before the tests, fuzzes beside them)
#
# Runs as many harnesses at a time as there are cores ($SBX_FUZZ_JOBS), at
# niceness $SBX_FUZZ_NICE (default 0: a run is bounded in time, so a niced
# one on a busy machine makes few executions).
# Prints one line per harness: runs, executions per second, corpus size.
# A crash, leak or timeout fails the run and names the reproducer, which
# belongs in tests/fuzz/corpus/<name>/ with a regression test. Called by
# scripts/test.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build_only=0
if [ "${1:-}" = --build ]; then build_only=1; shift; fi
seconds=${1:-${SBX_FUZZ_SECONDS:-30}}

cc=$(command -v clang-14 || command -v clang || true)
[ -n "$cc" ] || { echo "fuzz.sh: clang is not installed (scripts/deps.sh test)" >&2; exit 1; }

cmake -S . -B build/fuzz -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Debug \
      -DSBX_FUZZ=ON -DBUILD_TESTING=OFF -DSBX_BUILD_BENCH=OFF >/dev/null
harnesses=(config archive demux http sse manifest mcp_message)
cmake --build build/fuzz -j"$(nproc)" --target "${harnesses[@]/#/fuzz_}" >/dev/null
[ "$build_only" = 1 ] && exit 0

work=$(mktemp -d /tmp/sbx-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
fuzz_jobs=${SBX_FUZZ_JOBS:-$(nproc)}
fuzz_nice=${SBX_FUZZ_NICE:-0}

# fuzz_one NAME: run one harness; its summary goes to $work/NAME/result
# when it found nothing.
fuzz_one() {
    local name=$1
    mkdir -p "$work/$name/corpus" "$work/$name/artifacts"
    cp tests/fuzz/corpus/"$name"/* "$work/$name/corpus/"
    local log=$work/$name/log
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1 \
        nice -n "$fuzz_nice" build/fuzz/tests/fuzz/fuzz_"$name" -max_total_time="$seconds" -max_len=65536 \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/$name/artifacts/" "$work/$name/corpus" >"$log" 2>&1; then
        local runs speed size
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
        size=$(ls "$work/$name/corpus" | wc -l)
        echo "fuzz $name: $runs runs in ${seconds}s, $speed exec/s, corpus $size inputs" \
            >"$work/$name/result"
    fi
}

status=0
for name in "${harnesses[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$fuzz_jobs" ]; do
        wait -n || true
    done
    fuzz_one "$name" &
done
wait
for name in "${harnesses[@]}"; do
    if [ -f "$work/$name/result" ]; then
        cat "$work/$name/result"
    else
        echo "fuzz $name: FAILED" >&2
        tail -40 "$work/$name/log" >&2
        for a in "$work/$name/artifacts"/*; do
            [ -f "$a" ] || continue
            mkdir -p build/fuzz-artifacts
            cp "$a" build/fuzz-artifacts/
            echo "fuzz $name: reproducer kept as build/fuzz-artifacts/$(basename "$a")" >&2
        done
        status=1
    fi
done
exit $status
