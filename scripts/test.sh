#!/usr/bin/env bash
# Build everything and run every test: once with -Werror, once under
# AddressSanitizer + UndefinedBehaviorSanitizer. Starts the real services the
# tests need (dockerd on a private socket, a throwaway PostgreSQL) and stops
# them on exit. Tests run side by side (ctest -j, $SBX_TEST_JOBS, default
# twice the cores: most of them wait on daemons and child processes); the
# slowest ten of each build are listed at the end, and so is any test that
# failed at first and passed when run once more.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/deps.sh test

jobs=$(nproc)
test_jobs=${SBX_TEST_JOBS:-$((jobs * 2))}
start=$(date +%s)
cmake -S . -B build/ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_WERROR=ON -DSBX_TEST_HOOKS=ON >/dev/null
cmake --build build/ci -j"$jobs"
cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DSBX_WERROR=ON -DSBX_TEST_HOOKS=ON \
      -DSBX_SANITIZE=ON -DSBX_BUILD_BENCH=OFF >/dev/null
cmake --build build/asan -j"$jobs"
echo "== builds took $(( $(date +%s) - start )) s =="

svc=$(mktemp -d /tmp/sbx-test.XXXXXX)
chmod 755 "$svc"
stop_services() {
  [ -x scripts/services/dockerd.sh ] && scripts/services/dockerd.sh stop "$svc/docker" || true
  [ -x scripts/services/postgres.sh ] && scripts/services/postgres.sh stop "$svc/pg" || true
  rm -rf "$svc"
}
trap stop_services EXIT

if [ -x scripts/services/postgres.sh ]; then
  SBX_TEST_PG_DSN=$(scripts/services/postgres.sh start "$svc/pg")
  export SBX_TEST_PG_DSN
fi
if [ -x scripts/services/dockerd.sh ]; then
  SBX_TEST_DOCKER_HOST=$(scripts/services/dockerd.sh start "$svc/docker")
  export SBX_TEST_DOCKER_HOST SBX_TEST_DOCKER_IMAGE=sbx-test:busybox
fi

# slowest LOG: the ten longest tests of a ctest log, longest first. awk
# reads to the end: `head` would close the pipe early and, with pipefail,
# sort's SIGPIPE would fail the run.
slowest() {
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*[^0-9]*([0-9.]+) sec$/\2 \1/p' "$1" |
    sort -rn | awk 'NR <= 10 { printf "  %8.2f s  %s\n", $1, $2 }'
}

status=0
logs=$(mktemp -d /tmp/sbx-test-logs.XXXXXX)
echo "== tests (gcc, -Werror; ctest -j$test_jobs) =="
t=$(date +%s)
ctest --test-dir build/ci --output-on-failure --timeout 600 -j"$test_jobs" --repeat until-pass:2 |
  tee "$logs/ci.log" || status=1
echo "== tests (gcc) took $(( $(date +%s) - t )) s =="
t=$(date +%s)
echo "== tests (ASan + UBSan; ctest -j$test_jobs) =="
# Instrumented code runs slower: the conformance suite's time bounds
# (cancellation within 1 s, ...) are doubled there.
SBX_CONFORMANCE_TIME_SCALE=2 \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan --output-on-failure --timeout 900 -j"$test_jobs" --repeat until-pass:2 |
  tee "$logs/asan.log" || status=1
echo "== tests (ASan + UBSan) took $(( $(date +%s) - t )) s =="
# 20 s per harness here (a longer run: scripts/fuzz.sh 300).
fuzz_seconds=${SBX_FUZZ_SECONDS:-20}
echo "== fuzzing (libFuzzer, clang, ASan + UBSan; $fuzz_seconds s per harness) =="
t=$(date +%s)
scripts/fuzz.sh "$fuzz_seconds" || status=1
echo "== fuzzing took $(( $(date +%s) - t )) s =="
# A test that fails is run once more (--repeat until-pass:2) and its first
# failure stays in the log above; they are named here, so a flaky test is
# seen and fixed rather than hidden.
for b in ci asan; do
  reran=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*\*\*\*(Failed|Timeout).*/\1/p' "$logs/$b.log" | sort -u)
  [ -n "$reran" ] && echo "== failed at first, run again ($b): $(echo $reran) =="
done
echo "== slowest tests (gcc) =="
slowest "$logs/ci.log"
echo "== slowest tests (ASan + UBSan) =="
slowest "$logs/asan.log"
rm -rf "$logs"
echo "== scripts/test.sh took $(( $(date +%s) - start )) s =="
exit $status
