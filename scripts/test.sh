#!/usr/bin/env bash
# Build everything and run every test: once with -Werror, once under
# AddressSanitizer + UndefinedBehaviorSanitizer, then fuzz. Starts the real
# services the tests need (dockerd on a private socket, a throwaway
# PostgreSQL) and stops them on exit.
#
# By default the work overlaps (most tests wait on daemons, fakes and
# child processes rather than use the CPU; docs/TESTING.md):
#   1. the gcc build, with the services starting beside it;
#   2. the gcc tests (ctest -j$SBX_TEST_JOBS), and beside them the ASan +
#      UBSan build and the fuzzers' build at niceness $SBX_BUILD_NICE, on
#      the CPU the waiting tests leave idle;
#   3. the ASan tests once their build has ended; the fuzzers when the
#      first test pass has ended, beside the other's last tests.
# Sharing the CPU, the time bounds are scaled in both passes
# (SBX_CONFORMANCE_TIME_SCALE 2 and 3), never dropped. SBX_TEST_SERIAL=1
# runs the phases one after another: gcc build and tests, ASan build and
# tests, fuzzing.
# Each pass writes its own log, printed whole when the pass ends (so the
# CI log reads pass by pass). In each pass the longest tests start first
# (COST, tests/costs.txt). The slowest ten of each build are listed at the
# end, and so is any test that failed at first and passed when run once
# more.
#
# env: SBX_TEST_JOBS     tests at a time per pass (default twice the cores)
#      SBX_FUZZ_SECONDS  seconds per fuzz harness (default 10)
#      SBX_TEST_SERIAL=1 one phase after another (default 0: overlapped)
#      SBX_BUILD_NICE    niceness of the builds beside the tests (default 10)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/deps.sh test

jobs=$(nproc)
test_jobs=${SBX_TEST_JOBS:-$((jobs * 2))}
fuzz_seconds=${SBX_FUZZ_SECONDS:-10}
serial=${SBX_TEST_SERIAL:-0}
start=$(date +%s)
logs=$(mktemp -d /tmp/sbx-test-logs.XXXXXX)
svc=$(mktemp -d /tmp/sbx-test.XXXXXX)
chmod 755 "$svc"
pids=()
stop_services() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # Interrupted before the logs were printed: print what there is.
  if [ ! -e "$logs/shown" ]; then
    for f in "$logs"/*.out; do
      [ -f "$f" ] && { echo "== $(basename "$f" .out) (interrupted) =="; tail -200 "$f"; }
    done
  fi
  [ -x scripts/services/dockerd.sh ] && scripts/services/dockerd.sh stop "$svc/docker" || true
  [ -x scripts/services/dockerd.sh ] && [ -d "$svc/docker-asan" ] &&
    scripts/services/dockerd.sh stop "$svc/docker-asan" || true
  [ -x scripts/services/postgres.sh ] && scripts/services/postgres.sh stop "$svc/pg" || true
  rm -rf "$svc" "$logs"
}
trap stop_services EXIT

# phase NAME CMD...: run CMD with its output in $logs/NAME.out, its exit
# status in $logs/NAME.rc and its seconds in $logs/NAME.time.
phase() {
  local name=$1 t rc=0
  shift
  t=$(date +%s)
  "$@" >"$logs/$name.out" 2>&1 || rc=$?
  echo $rc >"$logs/$name.rc"
  echo $(( $(date +%s) - t )) >"$logs/$name.time"
  echo $(( $(date +%s) - start )) >"$logs/$name.end"
  return $rc
}
# show NAME TITLE: print a finished phase's output and time; fails when it did.
show() {
  [ -f "$logs/$1.rc" ] || { echo "== $2: did not run =="; return 1; }
  echo "== $2 =="
  cat "$logs/$1.out"
  echo "== $2 took $(cat "$logs/$1.time") s (ended at +$(cat "$logs/$1.end") s) =="
  return "$(cat "$logs/$1.rc")"
}

# The services start while the builds run (they are idle until the
# tests; dockerd builds its test image meanwhile). Each pass has a Docker
# daemon of its own: tests that count a daemon's containers see only
# their own pass's neighbours, as when the passes ran one after another.
start_services() {
  if [ -x scripts/services/postgres.sh ]; then
    scripts/services/postgres.sh start "$svc/pg" >"$svc/pg.dsn"
  fi
  if [ -x scripts/services/dockerd.sh ]; then
    scripts/services/dockerd.sh start "$svc/docker" >"$svc/docker.addr"
    if [ "$serial" != 1 ]; then
      scripts/services/dockerd.sh start "$svc/docker-asan" >"$svc/docker-asan.addr"
    fi
  fi
}
phase services start_services &
services_pid=$!
pids+=("$services_pid")

status=0
cmake -S . -B build/ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_WERROR=ON -DSBX_TEST_HOOKS=ON >/dev/null
t=$(date +%s)
cmake --build build/ci -j"$jobs"
echo "== build (gcc) took $(( $(date +%s) - t )) s (ended at +$(( $(date +%s) - start )) s) =="
wait "$services_pid" || { cat "$logs/services.out"; echo "== services did not start =="; exit 1; }
cat "$logs/services.out"
if [ -s "$svc/pg.dsn" ]; then
  SBX_TEST_PG_DSN=$(cat "$svc/pg.dsn")
  export SBX_TEST_PG_DSN
fi
if [ -s "$svc/docker.addr" ]; then
  SBX_TEST_DOCKER_HOST=$(cat "$svc/docker.addr")
  export SBX_TEST_DOCKER_HOST SBX_TEST_DOCKER_IMAGE=sbx-test:busybox
fi
# Both builds' tests share one install of each npm lockfile
# (tests/support/npm_ci.sh).
export SBX_TEST_NPM_DIR="$root/build/npm"

# Side by side the passes share the 2 cores: the conformance suites' time
# bounds (cancellation within 1 s, ...) are stretched in both, more under
# the instrumented build, which runs slower (cf_bound,
# SBX_CONFORMANCE_TIME_SCALE; the bounds are never dropped).
if [ "$serial" = 1 ]; then
  gcc_scale=1 asan_scale=2 build_nice=0
else
  gcc_scale=2 asan_scale=3 build_nice=${SBX_BUILD_NICE:-10}
fi
# cpu CMD...: CMD, then the CPU seconds it and the children it waited for
# used (the daemons' share is not counted).
cpu() { /usr/bin/time -f "== CPU: %U s user, %S s sys ==" "$@"; }
run_gcc_tests() {
  SBX_CONFORMANCE_TIME_SCALE=$gcc_scale \
    cpu ctest --test-dir build/ci --output-on-failure --timeout 600 -j"$test_jobs" \
      --repeat until-pass:2
}
build_asan() {
  cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DSBX_WERROR=ON -DSBX_TEST_HOOKS=ON \
        -DSBX_SANITIZE=ON -DSBX_BUILD_BENCH=OFF >/dev/null
  nice -n "$build_nice" cmake --build build/asan -j"$jobs"
}
run_asan_tests() {
  if [ -s "$svc/docker-asan.addr" ]; then
    SBX_TEST_DOCKER_HOST=$(cat "$svc/docker-asan.addr")
  fi
  SBX_CONFORMANCE_TIME_SCALE=$asan_scale \
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    cpu ctest --test-dir build/asan --output-on-failure --timeout 900 -j"$test_jobs" \
      --repeat until-pass:2
}
# $fuzz_seconds per harness (a longer run: scripts/fuzz.sh 300).
run_fuzz() { scripts/fuzz.sh "$fuzz_seconds"; }
build_fuzz() { nice -n "$build_nice" scripts/fuzz.sh --build; }
if [ "$serial" = 1 ]; then
  phase gcc run_gcc_tests || true
  phase asan_build build_asan || true
  [ "$(cat "$logs/asan_build.rc")" = 0 ] && { phase asan run_asan_tests || true; }
  phase fuzz run_fuzz || true
else
  # The gcc tests start at once; the ASan build and then the fuzzers'
  # build run beside them at niceness $build_nice, on the CPU the waiting
  # tests leave idle (a compiler at normal priority beside them made the
  # suites miss their time bounds). The ASan tests start when their build
  # has ended; the fuzzers when the first test pass has ended.
  phase gcc run_gcc_tests &
  gcc_pid=$!
  pids+=("$gcc_pid")
  ( phase asan_build build_asan || exit 0
    phase fuzz_build build_fuzz || true ) &
  builds_pid=$!
  pids+=("$builds_pid")
  # Poll for the ASan build's end (a phase in a subshell cannot be waited
  # for on its own).
  while [ ! -f "$logs/asan_build.rc" ] && kill -0 "$builds_pid" 2>/dev/null; do sleep 1; done
  if [ "$(cat "$logs/asan_build.rc" 2>/dev/null)" = 0 ]; then
    phase asan run_asan_tests &
    asan_pid=$!
    pids+=("$asan_pid")
  fi
  # The fuzzers start when the first pass has ended (and their build), beside
  # the other's last (longest) tests, when fewer tests are left running.
  if [ -n "${asan_pid:-}" ]; then
    wait -n "$gcc_pid" "$asan_pid" || true
  else
    wait "$gcc_pid" || true
  fi
  wait "$builds_pid" || true
  if [ "$(cat "$logs/fuzz_build.rc" 2>/dev/null)" = 0 ]; then
    phase fuzz run_fuzz || true
  elif [ -f "$logs/fuzz_build.rc" ]; then
    cp "$logs/fuzz_build.out" "$logs/fuzz.out"
    cp "$logs/fuzz_build.rc" "$logs/fuzz.rc"; cp "$logs/fuzz_build.time" "$logs/fuzz.time"
    cp "$logs/fuzz_build.end" "$logs/fuzz.end"
  fi
  wait || true
fi
pids=()
: >"$logs/shown"

# The ASan build's output only when it failed.
if [ "$(cat "$logs/asan_build.rc" 2>/dev/null)" = 0 ]; then
  echo "== build (ASan + UBSan) took $(cat "$logs/asan_build.time") s (ended at +$(cat "$logs/asan_build.end") s) =="
else
  show asan_build "build (ASan + UBSan)" || status=1
fi
[ -f "$logs/fuzz_build.time" ] &&
  echo "== build (fuzzers) took $(cat "$logs/fuzz_build.time") s (ended at +$(cat "$logs/fuzz_build.end") s) =="
show gcc "tests (gcc, -Werror; ctest -j$test_jobs)" || status=1
if [ -f "$logs/asan.rc" ]; then
  show asan "tests (ASan + UBSan; ctest -j$test_jobs)" || status=1
fi
show fuzz "fuzzing (libFuzzer, clang, ASan + UBSan; $fuzz_seconds s per harness)" || status=1

# slowest LOG: the ten longest tests of a ctest log, longest first. awk
# reads to the end: `head` would close the pipe early and, with pipefail,
# sort's SIGPIPE would fail the run.
slowest() {
  [ -f "$1" ] || return 0
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*[^0-9]*([0-9.]+) sec$/\2 \1/p' "$1" |
    sort -rn | awk 'NR <= 10 { printf "  %8.2f s  %s\n", $1, $2 }'
}
# A test that fails is run once more (--repeat until-pass:2) and its first
# failure stays in the log above; they are named here, so a flaky test is
# seen and fixed rather than hidden.
for b in gcc asan; do
  [ -f "$logs/$b.out" ] || continue
  reran=$(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*\*\*\*(Failed|Timeout).*/\1/p' "$logs/$b.out" | sort -u)
  [ -n "$reran" ] && echo "== failed at first, run again ($b): $(echo $reran) =="
done
echo "== slowest tests (gcc) =="
slowest "$logs/gcc.out"
echo "== slowest tests (ASan + UBSan) =="
slowest "$logs/asan.out"
echo "== scripts/test.sh took $(( $(date +%s) - start )) s =="
exit $status
