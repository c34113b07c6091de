#!/usr/bin/env bash
# dockerd.sh - a private Docker engine for the tests and benchmarks.
#
#   scripts/services/dockerd.sh start DIR   start dockerd with all state under
#                                           DIR, build the offline test image,
#                                           print the daemon address
#   scripts/services/dockerd.sh stop DIR    stop that daemon, its containerd and
#                                           its containers; unmount leftovers
#
# `start` prints exactly one line on stdout, `unix://DIR/docker.sock`, for the
# caller to export as SBX_TEST_DOCKER_HOST; the test image is
# $SBX_TEST_DOCKER_IMAGE (default sbx-test:busybox). Everything else goes to
# stderr and to DIR/dockerd.log.
#
# Works on a fresh Debian 12 as root without systemd: docker.io and
# busybox-static are installed with apt-get when missing. Nothing is pulled
# from a registry: the image is a busybox-static root filesystem imported
# from a tar stream.
set -euo pipefail

IMAGE="${SBX_TEST_DOCKER_IMAGE:-sbx-test:busybox}"
READY_TIMEOUT_S="${SBX_DOCKERD_READY_TIMEOUT:-30}"

log() { printf 'dockerd.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    echo "usage: $0 start|stop DIR" >&2
    exit 2
}

# Install the engine and busybox-static when missing. The package scripts
# must not try to start a system-wide daemon, so a temporary policy-rc.d
# refuses service starts during the install (removed only if we made it).
ensure_packages() {
    local need=()
    command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
    [ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 &&
        file_is_static /bin/busybox || need+=(busybox-static)
    command -v curl >/dev/null 2>&1 || need+=(curl)
    [ ${#need[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || die "missing ${need[*]} and not root: install them first"
    log "installing ${need[*]}"
    local made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    local rc=0
    {
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            -o DPkg::Lock::Timeout=600 "${need[@]}" >&2 ||
        { apt-get update -q -o DPkg::Lock::Timeout=600 >&2 &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
            -o DPkg::Lock::Timeout=600 "${need[@]}" >&2; }
    } || rc=$?
    [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    [ "$rc" = 0 ] || die "apt-get install ${need[*]} failed (exit $rc)"
}

# busybox from the busybox package is dynamically linked; the image needs the
# static one (no libc inside the image).
file_is_static() {
    ! LC_ALL=C ldd "$1" >/dev/null 2>&1
}

# overlay2 needs a filesystem that supports overlay mounts under DIR; probe
# it instead of letting dockerd fail halfway.
pick_storage_driver() {
    local dir="$1" probe="$1/overlay-probe"
    rm -rf "$probe"
    mkdir -p "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
    if mount -t overlay overlay \
        -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" \
        "$probe/merged" 2>/dev/null; then
        umount "$probe/merged"
        rm -rf "$probe"
        echo overlay2
    else
        rm -rf "$probe"
        echo vfs
    fi
}

ping_daemon() {
    curl -sf --max-time 2 --unix-socket "$1/docker.sock" \
        http://localhost/_ping >/dev/null 2>&1
}

pid_alive() {
    [ -n "$1" ] && kill -0 "$1" 2>/dev/null
}

start_daemon() {
    local dir="$1" driver="$2"
    : >"$dir/dockerd.log"
    # setsid: the daemon outlives this script and ignores the caller's
    # terminal signals. --shutdown-timeout keeps `stop` fast: test containers
    # run a shell that ignores SIGTERM as PID 1. Without iptables, a
    # published port (the docker provider's exposed ports) reaches its
    # container only through docker-proxy, the userland proxy (it dies
    # with the daemon).
    setsid dockerd \
        --host "unix://$dir/docker.sock" \
        --data-root "$dir/data" \
        --exec-root "$dir/exec" \
        --pidfile "$dir/docker.pid" \
        --storage-driver "$driver" \
        --iptables=false --ip6tables=false --ip-masq=false --bridge=none \
        --userland-proxy=true \
        --shutdown-timeout 2 \
        --log-level warn \
        </dev/null >>"$dir/dockerd.log" 2>&1 &
    echo $! >"$dir/dockerd.launch.pid"
}

wait_ready() {
    local dir="$1" pid="$2" i
    for ((i = 0; i < READY_TIMEOUT_S * 10; i++)); do
        ping_daemon "$dir" && return 0
        pid_alive "$pid" || return 1
        sleep 0.1
    done
    return 1
}

# A busybox-static root filesystem: /bin/busybox plus one relative symlink per
# applet, the account files, and a world-writable /tmp.
build_image() {
    local dir="$1" host="unix://$1/docker.sock"
    if DOCKER_HOST="$host" docker image inspect "$IMAGE" >/dev/null 2>&1; then
        return 0
    fi
    local root="$dir/image-root"
    rm -rf "$root"
    mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/root" \
        "$root/usr/bin" "$root/workspace" "$root/proc" "$root/sys" "$root/dev"
    chmod 1777 "$root/tmp"
    cp /bin/busybox "$root/bin/busybox"
    local applet
    for applet in $(/bin/busybox --list); do
        [ "$applet" = busybox ] && continue
        ln -sf busybox "$root/bin/$applet"
    done
    ln -sf ../../bin/busybox "$root/usr/bin/env"
    cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
sbx:x:1000:1000:sbx:/workspace:/bin/sh
EOF
    cat >"$root/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
sbx:x:1000:
EOF
    tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
        DOCKER_HOST="$host" docker import -c 'ENV PATH=/bin' - "$IMAGE" >/dev/null
    rm -rf "$root"
    log "built $IMAGE"
}

cmd_start() {
    local dir="$1"
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd -P)"
    # The daemon and containerd sockets must fit in sun_path (108 bytes).
    [ ${#dir} -le 60 ] || die "DIR is too long for unix sockets: $dir"
    ensure_packages
    if [ -f "$dir/docker.pid" ] && pid_alive "$(cat "$dir/docker.pid")" &&
        ping_daemon "$dir"; then
        log "dockerd already running in $dir"
    else
        cmd_stop "$dir" 2>/dev/null || true
        mkdir -p "$dir/data" "$dir/exec"
        local driver
        driver="$(pick_storage_driver "$dir")"
        start_daemon "$dir" "$driver"
        if ! wait_ready "$dir" "$(cat "$dir/dockerd.launch.pid")"; then
            if [ "$driver" = overlay2 ]; then
                log "dockerd did not start with overlay2; retrying with vfs"
                cmd_stop "$dir" 2>/dev/null || true
                mkdir -p "$dir/data" "$dir/exec"
                start_daemon "$dir" vfs
                wait_ready "$dir" "$(cat "$dir/dockerd.launch.pid")" || {
                    tail -n 30 "$dir/dockerd.log" >&2
                    die "dockerd did not become ready (log: $dir/dockerd.log)"
                }
            else
                tail -n 30 "$dir/dockerd.log" >&2
                die "dockerd did not become ready (log: $dir/dockerd.log)"
            fi
        fi
    fi
    build_image "$dir"
    echo "unix://$dir/docker.sock"
}

# Engine helpers (containerd, shims) whose command line names a path under
# DIR: only this daemon's helpers match, never another engine's.
helper_pids_under() {
    local dir="$1" p exe cmd
    for p in /proc/[0-9]*; do
        exe="$(readlink "$p/exe" 2>/dev/null)" || continue
        case "${exe##*/}" in
        dockerd | containerd | containerd-shim*) ;;
        *) continue ;;
        esac
        cmd="$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)" || continue
        case "$cmd" in
        *"$dir/"*) echo "${p#/proc/}" ;;
        esac
    done
}

wait_gone() {
    local pid="$1" i
    for ((i = 0; i < 100; i++)); do
        pid_alive "$pid" || return 0
        sleep 0.1
    done
    return 1
}

cmd_stop() {
    local dir="$1"
    [ -d "$dir" ] || return 0
    dir="$(cd "$dir" && pwd -P)"
    local pid=""
    [ -f "$dir/docker.pid" ] && pid="$(cat "$dir/docker.pid" 2>/dev/null || true)"
    [ -z "$pid" ] && [ -f "$dir/dockerd.launch.pid" ] &&
        pid="$(cat "$dir/dockerd.launch.pid" 2>/dev/null || true)"
    if pid_alive "$pid"; then
        # Kill the containers first so that shutdown does not wait for
        # processes that ignore SIGTERM.
        if ping_daemon "$dir"; then
            local ids
            ids="$(DOCKER_HOST="unix://$dir/docker.sock" docker ps -q 2>/dev/null || true)"
            [ -n "$ids" ] && DOCKER_HOST="unix://$dir/docker.sock" \
                docker kill $ids >/dev/null 2>&1 || true
        fi
        kill -TERM "$pid" 2>/dev/null || true
        if ! wait_gone "$pid"; then
            log "dockerd $pid did not stop; killing it"
            kill -KILL "$pid" 2>/dev/null || true
            wait_gone "$pid" || true
        fi
    fi
    # Leftover containerd, shims and container processes started from DIR.
    local p
    for p in $(helper_pids_under "$dir"); do
        kill -KILL "$p" 2>/dev/null || true
    done
    # Mounts under DIR, deepest first.
    local m
    for m in $(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' \
        /proc/self/mountinfo | sort -r); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
    rm -f "$dir/docker.pid" "$dir/dockerd.launch.pid" "$dir/docker.sock"
}

[ $# -eq 2 ] || usage
case "$1" in
start) cmd_start "$2" ;;
stop) cmd_stop "$2" ;;
*) usage ;;
esac
