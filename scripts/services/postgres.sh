#!/usr/bin/env bash
# A throwaway PostgreSQL server for tests and benchmarks.
#
#   postgres.sh start DIR   initialize a cluster in DIR/data (DIR is created
#                           if needed and handed to the postgres user), start
#                           it on a free port on 127.0.0.1 with its unix
#                           socket in DIR, and print its DSN on stdout, e.g.
#                           host=127.0.0.1 port=41234 user=postgres dbname=postgres
#                           (export it as SBX_TEST_PG_DSN).
#   postgres.sh dsn DIR     print the DSN of the server started in DIR.
#   postgres.sh stop DIR    stop it and delete what start created in DIR.
#
# The server trusts local connections (no password) and runs with
# fsync=off: it is for tests only. Installs the postgresql package with
# apt-get when no server binaries are present. May also be sourced; it then
# defines pg_service_start, pg_service_dsn and pg_service_stop.

pg_log() { echo "postgres.sh: $*" >&2; }

# The directory holding initdb/pg_ctl (the newest installed major version).
pg_bindir() {
    local d best=""
    for d in /usr/lib/postgresql/*/bin; do
        [[ -x $d/initdb && -x $d/pg_ctl ]] || continue
        best=$d
    done
    # Prefer 15, the version Debian 12 ships, when several are present.
    [[ -x /usr/lib/postgresql/15/bin/initdb ]] && best=/usr/lib/postgresql/15/bin
    [[ -n $best ]] && echo "$best"
}

pg_install() {
    [[ -n $(pg_bindir) ]] && return 0
    if [[ $(id -u) -ne 0 ]]; then
        pg_log "PostgreSQL server binaries are missing and installing them needs root" \
               "(apt-get install postgresql)"
        return 1
    fi
    pg_log "installing postgresql with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends postgresql >&2
    [[ -n $(pg_bindir) ]] || { pg_log "postgresql installed but no initdb found"; return 1; }
}

# Run a command as the user owning the cluster.
pg_as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# A TCP port nobody listens on (checked with bash's /dev/tcp).
pg_free_port() {
    local port _
    for _ in $(seq 1 50); do
        port=$((20000 + RANDOM % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

pg_service_dsn() {
    local dir=${1:?usage: postgres.sh dsn DIR}
    [[ -f $dir/dsn ]] || { pg_log "no server was started in $dir"; return 1; }
    cat "$dir/dsn"
}

pg_service_start() {
    local dir=${1:?usage: postgres.sh start DIR}
    pg_install
    local bin
    bin=$(pg_bindir)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ -f $dir/data/postmaster.pid ]]; then
        pg_log "a server is already running in $dir (stop it first)"
        return 1
    fi
    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || { pg_log "there is no postgres user"; return 1; }
        chown postgres: "$dir"
        chmod 755 "$dir"
        # initdb refuses to run as root; the postgres user must reach DIR.
        if ! runuser -u postgres -- test -w "$dir"; then
            pg_log "the postgres user cannot write to $dir (a parent directory is" \
                   "not searchable by others); use a directory under /tmp"
            return 1
        fi
    fi
    touch "$dir/.sbx-postgres"
    pg_as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 \
        --no-locale --no-sync >"$dir/initdb.log" 2>&1 || {
        pg_log "initdb failed:"; cat "$dir/initdb.log" >&2; return 1; }

    # Settings live in the cluster's own config, so a restart keeps them.
    echo "include_if_exists = 'sbx-test.conf'" >>"$dir/data/postgresql.conf"
    local port attempt
    for attempt in 1 2 3 4 5; do
        port=$(pg_free_port) || { pg_log "no free port found"; return 1; }
        cat >"$dir/data/sbx-test.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
EOF
        [[ $(id -u) -ne 0 ]] || chown postgres: "$dir/data/sbx-test.conf"
        if pg_as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
               start >/dev/null 2>&1; then
            local dsn="host=127.0.0.1 port=$port user=postgres dbname=postgres"
            echo "$dsn" >"$dir/dsn"
            echo "$dsn"
            return 0
        fi
        # Another process took the port between the check and the start.
        pg_log "start on port $port failed (attempt $attempt):"
        tail -n 3 "$dir/server.log" >&2 || true
    done
    pg_log "could not start PostgreSQL; see $dir/server.log"
    return 1
}

pg_service_stop() {
    local dir=${1:?usage: postgres.sh stop DIR}
    [[ -d $dir ]] || return 0
    if [[ ! -f $dir/.sbx-postgres ]]; then
        pg_log "$dir was not set up by postgres.sh start; leaving it alone"
        return 1
    fi
    local bin
    bin=$(pg_bindir) || true
    if [[ -n $bin && -f $dir/data/postmaster.pid ]]; then
        pg_as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop \
            >/dev/null 2>&1 || pg_log "pg_ctl stop failed; see $dir/server.log"
    fi
    rm -rf "${dir:?}/data" "$dir/dsn" "$dir/server.log" "$dir/initdb.log" \
           "$dir/.s.PGSQL."* "$dir/.sbx-postgres"
    rmdir "$dir" 2>/dev/null || true
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    case ${1:-} in
    start) pg_service_start "${2:-}" ;;
    stop) pg_service_stop "${2:-}" ;;
    dsn) pg_service_dsn "${2:-}" ;;
    *)
        echo "usage: $0 start DIR | stop DIR | dsn DIR" >&2
        exit 2
        ;;
    esac
fi
