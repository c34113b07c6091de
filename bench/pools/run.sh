#!/usr/bin/env bash
# bench/pools/run.sh - time to first command on docker, side by side in one
# run: `sbx run -- true` with a warm pool and without one, `docker run --rm
# IMAGE true`, and `sbx exec` in an existing session. Each round refills
# the pool (sbx reconcile) outside the timed part. The warm-pool run is
# timed twice: with the claim's health check (the default) and with
# SBX_POOL_CHECK_FRESH_MS=60000 (a member checked by the reconcile just
# before is only attached). Prints the load average before and after, the
# medians, and the ratios of the medians.
#
#   SBX=build/ci/bin/sbx PLUGINS=build/ci/providers \
#   DOCKER_HOST=unix:///path/docker.sock IMAGE=sbx-test:busybox bench/pools/run.sh [ROUNDS]
set -euo pipefail
ROUNDS=${1:-20}
SBX=${SBX:-build/ci/bin/sbx}
PLUGINS=${PLUGINS:-build/ci/providers}
IMAGE=${IMAGE:-sbx-test:busybox}
: "${DOCKER_HOST:?set DOCKER_HOST to the daemon socket}"
work=$(mktemp -d /tmp/sbx-bench-pools.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/res"
cfg() { # $1: file, $2: pool size (0: no pools)
    cat > "$1" <<YAML
default_provider: docker
plugin_dir: $(realpath "$PLUGINS")
store: { driver: sqlite, path: $work/db }
providers:
  docker: { host: "$DOCKER_HOST", image: "$IMAGE", resource_dir: $work/res }
YAML
    [ "$2" -gt 0 ] && printf 'pools:\n  warm: { provider: docker, size: %s }\n' "$2" >> "$1"
    return 0
}
cfg "$work/pool.yaml" 1
cfg "$work/cold.yaml" 0
here=$(dirname "$0")
# first output byte (the command's result) and exit, in microseconds
ms() { python3 "$here/ttfc.py" "$@"; }
SBX_CONFIG=$work/cold.yaml "$SBX" create bench-existing >/dev/null
: > "$work/pool"; : > "$work/fresh"; : > "$work/cold"; : > "$work/docker"; : > "$work/exec"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for _ in $(seq "$ROUNDS"); do
    SBX_CONFIG=$work/pool.yaml "$SBX" reconcile >/dev/null
    SBX_CONFIG=$work/pool.yaml ms "$SBX" run -- echo x >> "$work/pool"
    SBX_POOL_CHECK_FRESH_MS=60000 SBX_CONFIG=$work/pool.yaml "$SBX" reconcile >/dev/null
    SBX_POOL_CHECK_FRESH_MS=60000 SBX_CONFIG=$work/pool.yaml ms "$SBX" run -- echo x >> "$work/fresh"
    SBX_CONFIG=$work/cold.yaml ms "$SBX" run -- echo x >> "$work/cold"
    ms docker -H "$DOCKER_HOST" run --rm --network none "$IMAGE" echo x >> "$work/docker"
    SBX_CONFIG=$work/cold.yaml ms "$SBX" exec bench-existing -- echo x >> "$work/exec"
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
SBX_CONFIG=$work/cold.yaml "$SBX" destroy bench-existing >/dev/null
SBX_CONFIG=$work/pool.yaml "$SBX" reconcile >/dev/null
cfg "$work/pool.yaml" 0; printf 'pools:\n  warm: { provider: docker, size: 0 }\n' >> "$work/pool.yaml"
SBX_CONFIG=$work/pool.yaml "$SBX" reconcile >/dev/null
# median of column $2 of file $1, in ms
median() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m/1000}'; }
printf '%-36s %14s %10s\n' "median ms, $ROUNDS rounds" "first output" "exit"
echo "load average before: $load0, after: $load1"
for v in "pool:sbx run -- echo x, warm pool" "fresh:same, check skipped (fresh)" "cold:sbx run -- echo x, no pool" \
         "docker:docker run --rm IMAGE echo x" "exec:sbx exec in an existing session"; do
    printf '%-36s %14s %10s\n' "${v#*:}" "$(median "$work/${v%%:*}" 1)" "$(median "$work/${v%%:*}" 2)"
done
r() { awk -v a="$(median "$work/$1" 1)" -v b="$(median "$work/$2" 1)" 'BEGIN{printf "%.2f", a/b}'; }
echo "first output: warm pool / exec $(r pool exec)x, fresh / exec $(r fresh exec)x (target <= 1.5x);" \
     "no pool / docker run $(r cold docker)x (target <= 1.0x)"
