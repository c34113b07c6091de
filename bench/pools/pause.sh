#!/usr/bin/env bash
# bench/pools/pause.sh - the pause + resume round trip through the CLI on
# docker, interleaved in each round with its baseline: `sbx pause S; sbx
# resume S` and `sbx pause S; sbx exec S -- true` (transparent resume) on a
# session, `docker pause C; docker unpause C` and `docker pause C; docker
# unpause C; docker exec C true` on a container of the same image. Prints the
# medians, the ratios of the medians, and the median of the per-round
# ratios, with the load average before and after.
#
#   SBX=build/ci/bin/sbx PLUGINS=build/ci/providers \
#   DOCKER_HOST=unix:///path/docker.sock IMAGE=sbx-test:busybox bench/pools/pause.sh [ROUNDS]
set -euo pipefail
ROUNDS=${1:-20}
SBX=${SBX:-build/ci/bin/sbx}
PLUGINS=${PLUGINS:-build/ci/providers}
IMAGE=${IMAGE:-sbx-test:busybox}
: "${DOCKER_HOST:?set DOCKER_HOST to the daemon socket}"
work=$(mktemp -d /tmp/sbx-bench-pause.XXXXXX)
ctr=
cleanup() {
    [ -n "$ctr" ] && docker -H "$DOCKER_HOST" rm -f "$ctr" >/dev/null 2>&1
    SBX_CONFIG=$work/sbx.yaml "$SBX" destroy bench-pause >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/res"
cat > "$work/sbx.yaml" <<YAML
default_provider: docker
plugin_dir: $(realpath "$PLUGINS")
store: { driver: sqlite, path: $work/db }
providers:
  docker: { host: "$DOCKER_HOST", image: "$IMAGE", resource_dir: $work/res }
YAML
export SBX_CONFIG=$work/sbx.yaml
D() { docker -H "$DOCKER_HOST" "$@"; }
"$SBX" create bench-pause >/dev/null
ctr=$(D run -d --network none "$IMAGE" sleep 1000000)
# wall time of "$@" in microseconds (bash's clock: no extra process)
us() { local t0=$EPOCHREALTIME; "$@" >/dev/null; local t1=$EPOCHREALTIME;
       echo $(( (${t1/./} - ${t0/./}) )); }
sbx_pr() { "$SBX" pause bench-pause && "$SBX" resume bench-pause; }
sbx_pe() { "$SBX" pause bench-pause && "$SBX" exec bench-pause -- true; }
dk_pu() { D pause "$ctr" && D unpause "$ctr"; }
dk_pue() { D pause "$ctr" && D unpause "$ctr" && D exec "$ctr" true; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$work/t"
for _ in 1 2; do sbx_pr >/dev/null; dk_pu >/dev/null; done # warm up
for _ in $(seq "$ROUNDS"); do
    echo "$(us sbx_pr) $(us dk_pu) $(us sbx_pe) $(us dk_pue)" >> "$work/t"
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }
col() { awk -v c="$1" '{print $c/1000}' "$work/t" | median; }
ratio() { awk -v a="$1" -v b="$2" '{print $a/$b}' "$work/t" | median; }
printf 'median ms over %s rounds (interleaved)\n' "$ROUNDS"
printf '  sbx pause; sbx resume           %8s\n' "$(col 1)"
printf '  docker pause; docker unpause    %8s\n' "$(col 2)"
printf '  sbx pause; sbx exec -- true     %8s\n' "$(col 3)"
printf '  docker pause; unpause; exec     %8s\n' "$(col 4)"
printf 'pause+resume: ratio of medians %s, median of per-round ratios %s (target <= 1.1)\n' \
    "$(awk -v a="$(col 1)" -v b="$(col 2)" 'BEGIN{printf "%.2f", a/b}')" "$(ratio 1 2)"
printf 'pause+exec:   ratio of medians %s, median of per-round ratios %s\n' \
    "$(awk -v a="$(col 3)" -v b="$(col 4)" 'BEGIN{printf "%.2f", a/b}')" "$(ratio 3 4)"
