#!/usr/bin/env bash
# bench/store/workers.sh - N workers on one PostgreSQL store, each in
# sessions of its own, for N = 1, 2, 8, 32 (NS): sessions/s and commands/s,
# and the scaling against linear up to the machine's cores.
#
# Each worker is a loop of `sbx` processes, as N workers on N machines
# would run them (the local provider, so that the store and the CLI are
# what is measured, not a container runtime):
#   sessions: ROUNDS x `sbx exec KEY-new -- true` (acquire creates the
#             session, then one command);
#   commands: ROUNDS x `sbx exec KEY -- true` in the worker's existing
#             session (acquire attaches, one command);
# and the same N loops as baselines that isolate what is ours:
#   spawn:    ROUNDS x /bin/true (the loop's own fork + exec);
#   psql:     ROUNDS x one psql process making the statements of one
#             `sbx exec` in an existing session (connect, read the
#             binding, touch the activity row, take and drop a session-level
#             advisory lock on a second connection: what the use lock
#             costs).
# Prints per phase the wall time, the throughput, the CPU time of the
# loops and their children per operation (user + sys; the server's CPU is
# not in it), the speed-up against N = 1 and its ratio to linear (speed-up
# / min(N, cores)), and the load average before and after.
#
#   DSN='host=127.0.0.1 port=5432 user=postgres dbname=postgres' \
#   SBX=build/ci/bin/sbx PLUGINS=build/ci/providers bench/store/workers.sh [ROUNDS]
#
# NS (default "1 2 8 32") and PHASES (default "sessions commands spawn
# psql") choose what runs; the speed-up is against the phase's first N.
#
# The DSN names a server the bench may create a database on
# (sbx_bench_workers_<pid>, dropped at the end).
set -euo pipefail
ROUNDS=${1:-20}
NS=${NS:-1 2 8 32}
PHASES=${PHASES:-sessions commands spawn psql}
SBX=$(realpath "${SBX:-build/ci/bin/sbx}")
PLUGINS=$(realpath "${PLUGINS:-build/ci/providers}")
: "${DSN:?set DSN to a PostgreSQL server the bench may create a database on}"
CORES=$(nproc)
db=sbx_bench_workers_$$
work=$(mktemp -d /tmp/sbx-bench-workers.XXXXXX)
cleanup() {
    psql "$DSN" -qAtc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
psql "$DSN" -qAtc "CREATE DATABASE $db" >/dev/null
export SBX_STORE_DSN="$DSN dbname=$db"
export SBX_CONFIG=$work/sbx.yaml
cat > "$SBX_CONFIG" <<YAML
default_provider: local
plugin_dir: $PLUGINS
store: { driver: postgres }
providers:
  local: { root: $work/ws, supervisor_idle_ms: 2000 }
YAML
"$SBX" sessions >/dev/null # migrate the schema outside the timed part

# One worker's loop: $1 phase, $2 worker number, $3 N.
worker() {
    local phase=$1 i=$2 n=$3 r
    case $phase in
    sessions)
        for r in $(seq "$ROUNDS"); do "$SBX" exec "n$n-w$i-r$r" -- true; done ;;
    commands)
        for r in $(seq "$ROUNDS"); do "$SBX" exec "n$n-w$i-r1" -- true; done ;;
    spawn)
        for r in $(seq "$ROUNDS"); do /bin/true; done ;;
    psql)
        for r in $(seq "$ROUNDS"); do
            psql "$SBX_STORE_DSN" -qAt -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT provider, external_id FROM bindings WHERE session_key = 'n$n-w$i-r1';
INSERT INTO session_activity (session_key, last_used_at, paused) VALUES ('n$n-w$i-r1', $r, 0)
  ON CONFLICT (session_key) DO UPDATE SET last_used_at = excluded.last_used_at, paused = 0;
\connect
SELECT pg_try_advisory_lock_shared($((i * 1000 + n)));
SELECT pg_advisory_unlock_shared($((i * 1000 + n)));
SQL
        done ;;
    esac
}

# Every 100 ms, what the server's backends of the bench database do (one
# line per backend: wait event type:event, "CPU" when none, and state).
waits_sql="SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, '-')
  || ' ' || coalesce(state, '-') FROM pg_stat_activity WHERE datname = '$db'
  AND pid <> pg_backend_pid() AND backend_type = 'client backend' \\watch 0.1"

# N loops of a phase at once; prints "wall_s cpu_s".
run_phase() {
    local phase=$1 n=$2 t0 t1 i me=$BASHPID
    psql "$SBX_STORE_DSN" -qAt <<< "$waits_sql" > "$work/waits.$phase.$n" 2>/dev/null &
    local sampler=$!
    t0=$(date +%s.%N)
    local before after
    before=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$me/stat")
    local pids=()
    for i in $(seq "$n"); do worker "$phase" "$i" "$n" & pids+=($!); done
    wait "${pids[@]}"
    t1=$(date +%s.%N)
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    # the children's CPU (cutime + cstime of this shell, in clock ticks)
    after=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$me/stat")
    awk -v a="$t0" -v b="$t1" -v c0="$before" -v c1="$after" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {printf "%.3f %.3f\n", b - a, (c1 - c0) / hz}'
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%-9s %4s %7s %9s %9s %8s %8s\n' phase N wall_s ops/s cpu_ms/op speedup vs_lin
declare -A base
for phase in $PHASES; do
    for n in $NS; do
        read -r wall cpu < <(run_phase "$phase" "$n")
        ops=$((n * ROUNDS))
        tput=$(awk -v o="$ops" -v w="$wall" 'BEGIN {printf "%.1f", o / w}')
        [ "$n" = 1 ] && base[$phase]=$tput
        lin=$((n < CORES ? n : CORES))
        awk -v p="$phase" -v n="$n" -v w="$wall" -v t="$tput" -v c="$cpu" -v o="$ops" \
            -v b="${base[$phase]}" -v l="$lin" \
            'BEGIN {s = t / b; printf "%-9s %4d %7.2f %9.1f %9.2f %8.2f %8.2f\n",
                    p, n, w, t, 1000 * c / o, s, s / l}'
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
# where the server's backends were, at the largest N (samples of 100 ms)
nmax=${NS##* }
for phase in sessions commands psql; do
    f=$work/waits.$phase.$nmax
    [ -s "$f" ] || continue
    echo "backends of the bench database during $phase, N = $nmax ($(grep -c . "$f") backend-samples):"
    grep . "$f" | sort | uniq -c | sort -rn | head -6 | sed 's/^/  /'
done
echo "cores: $CORES; rounds per worker: $ROUNDS; load average before: $load0, after: $load1"
echo "sessions in the store: $(psql "$SBX_STORE_DSN" -qAtc 'SELECT count(*) FROM bindings')"
