#!/bin/sh
# bench/snapshot/run.sh - `sbx snapshot` then `sbx create --from-snapshot`
# of a workspace of mixed files (default 1 GiB: 768 files of 1 MiB and
# 16384 of 16 KiB in 64 directories) on the local provider, against
# `tar -c | tar -x` of the same tree on the same disk, in the same run.
# Prints both times, the throughput ratio (target >= 0.5) and the peak RSS
# of each sbx process next to that of `sbx exec -- true` (growth target
# <= 16 MiB). Medians of RUNS runs.
#
# With SBX_BENCH_DOCKER_HOST=unix:///... (and SBX_BENCH_DOCKER_IMAGE) the
# workspace is a docker container's, and the baseline is the same
# `tar -c | tar -x` run inside that container on the same tree.
#
# Usage: bench/snapshot/run.sh [BUILD_DIR] [RUNS] [BIG_FILES] [SMALL_FILES]
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
runs=${2:-3}
big=${3:-768}
small=${4:-16384}
sbx="$build/bin/sbx"
[ -x "$sbx" ] || { echo "run.sh: $sbx not found: build first" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/sbx-bench-snap-XXXXXX")
cleanup() {
    "$sbx" destroy src >/dev/null 2>&1 || true
    "$sbx" destroy dst >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
mkdir "$tmp/ws" "$tmp/state"
if [ -n "${SBX_BENCH_DOCKER_HOST:-}" ]; then
    cat > "$tmp/sbx.yaml" <<YAML
default_provider: docker
store: { driver: sqlite, path: $tmp/state/sbx.db }
providers:
  docker:
    host: "$SBX_BENCH_DOCKER_HOST"
    image: "${SBX_BENCH_DOCKER_IMAGE:-sbx-test:busybox}"
    resource_dir: $tmp/ws
YAML
else
    cat > "$tmp/sbx.yaml" <<YAML
default_provider: local
store: { driver: sqlite, path: $tmp/state/sbx.db }
providers:
  local:
    root: $tmp/ws
YAML
fi
export SBX_CONFIG="$tmp/sbx.yaml" SBX_PLUGIN_PATH="$build/providers"
unset SBX_PROVIDER

# Peak RSS (KiB) and wall time (s) of one command, via python's rusage.
measure() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.monotonic()
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
dt = time.monotonic() - t
if r.returncode != 0:
    sys.exit("failed: %s" % " ".join(sys.argv[1:]))
print("%.3f %d" % (dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
PY
}

"$sbx" create src >/dev/null
"$sbx" exec src -- sh -c "
  i=0; while [ \$i -lt $big ]; do d=d\$((i % 64)); mkdir -p \$d;
    head -c 1048576 /dev/urandom > \$d/big\$i; i=\$((i + 1)); done
  i=0; while [ \$i -lt $small ]; do d=d\$((i % 64)); mkdir -p \$d;
    head -c 16384 /dev/urandom > \$d/small\$i; i=\$((i + 1)); done"
bytes=$("$sbx" exec src -- sh -c 'du -sk . | cut -f1')
bytes=$((bytes * 1024))
echo "workspace: about $bytes bytes ($("$sbx" exec src -- sh -c 'find . -type f | wc -l') files)"

base_rss=$(measure "$sbx" exec src -- true | cut -d' ' -f2)
tt=""; st=""; rt=""; srss=0; rrss=0
n=0
while [ $n -lt "$runs" ]; do
    # the baseline in the sandbox itself, on the workspace's own disk,
    # timed there (the generated tree is d0 .. d63)
    "$sbx" exec src -- sh -c 'rm -rf .copy && mkdir .copy && sync' >/dev/null
    # (/proc/uptime: 10 ms steps, as busybox date has no %N)
    t=$("$sbx" exec src -- sh -c 's=$(cut -d" " -f1 /proc/uptime);
        tar -cf - d* | tar -xf - -C .copy;
        e=$(cut -d" " -f1 /proc/uptime); echo "$s $e"' |
        awk '{ printf "%.3f", $2 - $1 }')
    "$sbx" exec src -- rm -rf .copy
    tt="$tt $t"
    rm -f "$tmp/snap.tar"
    sync
    set -- $(measure "$sbx" snapshot src "$tmp/snap.tar")
    st="$st $1"; [ "$2" -gt "$srss" ] && srss=$2
    "$sbx" destroy dst >/dev/null 2>&1 || true
    sync
    set -- $(measure "$sbx" create dst --from-snapshot "$tmp/snap.tar")
    rt="$rt $1"; [ "$2" -gt "$rrss" ] && rrss=$2
    n=$((n + 1))
done
med() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
T=$(med "$tt"); S=$(med "$st"); R=$(med "$rt")
echo "tar -c | tar -x:            $T s"
echo "sbx snapshot:               $S s"
echo "sbx create --from-snapshot: $R s"
awk -v t="$T" -v s="$S" -v r="$R" -v b="$bytes" 'BEGIN {
  printf "round trip: %.0f MiB/s vs tar %.0f MiB/s: %.2fx (target >= 0.5)\n",
         b / (s + r) / 1048576, b / t / 1048576, t / (s + r) }'
echo "peak RSS KiB: exec true $base_rss, snapshot $srss (+$((srss - base_rss))), restore $rrss (+$((rrss - base_rss))) (growth target <= 16384)"
