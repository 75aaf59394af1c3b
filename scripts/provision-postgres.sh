#!/usr/bin/env bash
# Provision a local PostgreSQL with pgvector and Apache AGE for mempalace-pg, using nothing but
# Debian's apt archive, and print its DSN on the last line of stdout.
#
#   scripts/provision-postgres.sh            # Debian 13 stack: PostgreSQL 17, pgvector 0.8.0, AGE 1.5.0
#   MEMPALACE_PG_STACK=sid scripts/...       # Debian sid stack: PostgreSQL 18, pgvector 0.8.7, AGE 1.8.0~rc0
#   MEMPALACE_PG_TEST_DSN=postgresql://... scripts/...   # use that server instead; provision nothing
#   scripts/provision-postgres.sh restart   # restart the provisioned server (also: stop, status)
#
# How: Debian 12 ships neither pgvector nor AGE, so the server runs from a debootstrapped Debian root
# (a plain directory, no container engine), started with pg_ctl on 127.0.0.1. A root that is already
# there is reused; a server that is already running is left running. Idempotent and safe to rerun.
#
# Settings (environment):
#   MEMPALACE_PG_STACK      trixie (default) | sid
#   MEMPALACE_PG_ROOT_BASE  where the roots live          (default /var/tmp/mempalace-pg)
#   MEMPALACE_PG_PORT       TCP port on 127.0.0.1         (default 15417 trixie, 15418 sid, below the
#                           kernel's ephemeral range; when another socket holds the default, the
#                           server starts on a free port nearby)
#   MEMPALACE_PG_MIRROR     Debian mirror                 (default: the host's apt mirror)
#   MEMPALACE_PG_SECURITY_MIRROR  Debian security mirror  (default: the host's, else deb.debian.org's);
#                           the trixie root takes trixie-security and trixie-updates from these two
#   MEMPALACE_PG_TEST_DSN   an existing server to use instead
set -euo pipefail
action="${1:-start}"
case "$action" in start|stop|restart|status) ;; *) echo "usage: $0 [start|stop|restart|status]" >&2; exit 2 ;; esac

log() { printf '[provision] %s\n' "$*" >&2; }
die() { printf '[provision] ERROR: %s\n' "$*" >&2; exit 1; }

if [[ -n "${MEMPALACE_PG_TEST_DSN:-}" ]]; then
    log "using MEMPALACE_PG_TEST_DSN as given; nothing provisioned"
    printf '%s\n' "$MEMPALACE_PG_TEST_DSN"
    exit 0
fi

# stack, pgmajor, base, root, pgbin, in_root, as_pg, stack_port, port_taken
source "$(dirname "$0")/stack-root.sh"
suite=$stack
default_port=$(stack_port 15417 15418)
wanted_port="${MEMPALACE_PG_PORT:-$default_port}"   # where a server of this cluster is started
pgdata=/var/lib/mempalace-pg/data          # inside the root
password_file="$root/var/lib/mempalace-pg/superuser-password"

[[ "$(id -u)" == 0 ]] || die "run as root (debootstrap and chroot need it), or set MEMPALACE_PG_TEST_DSN"

source "$(dirname "$0")/debian-mirror.sh"
mirror=$(host_mirror)
security_mirror=$(host_mirror security)
[[ "$suite" == sid ]] && security_mirror=""

apt_opts=(-o Dpkg::Use-Pty=0 -o APT::Install-Recommends=false)
[[ "$suite" == sid ]] && apt_opts+=(-o Acquire::Check-Valid-Until=false)

if [[ "$action" != start ]]; then
    [[ -f "$root$pgdata/PG_VERSION" ]] || die "no provisioned server in $root (run $0 first)"
    case "$action" in
        stop)    as_pg "$pgbin/pg_ctl" -D "$pgdata" -m fast -w stop >&2 ;;
        restart) as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$pgdata/server.log" -m fast -w -t 60 restart >&2 ;;
        status)  as_pg "$pgbin/pg_ctl" -D "$pgdata" status ;;
    esac
    exit $?
fi

# ---------------------------------------------------------------- 1. the root, with the packages
# Debian's security fixes reach a stable suite through <suite>-security and its point-release fixes
# through <suite>-updates; debootstrap configures neither. sid has no such suites: it is updated in place.
updates_list="$root/etc/apt/sources.list.d/mempalace-pg-updates.list"
updates_lines() {
    [[ "$suite" == sid ]] && return 0
    printf 'deb %s %s-updates main
deb %s %s-security main
' "$mirror" "$suite" "$security_mirror" "$suite"
}
if [[ ! -x "$root$pgbin/postgres" || ! -f "$root/usr/share/postgresql/$pgmajor/extension/vector.control" \
      || ! -f "$root/usr/share/postgresql/$pgmajor/extension/age.control" \
      || "$(cat "$updates_list" 2>/dev/null)" != "$(updates_lines)" ]]; then
    if [[ ! -x "$root/usr/bin/apt-get" ]]; then
        # the suite's minbase root, bootstrapped once for this root and the Docker image's base
        minbase=$(MEMPALACE_PG_MIRROR="$mirror" MEMPALACE_PG_MINBASE_DIR="$base/minbase" \
                  bash "$(dirname "$0")/debian-minbase.sh" "$suite" | tail -n 1)
        log "$suite's minbase root ($minbase) into $root"
        rm -rf "$root"
        mkdir -p "$root"
        tar -C "$root" --numeric-owner -xf "$minbase"
    fi
    # Keep maintainer scripts from starting services, and the package from creating its own cluster.
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"; chmod +x "$root/usr/sbin/policy-rc.d"
    mkdir -p "$root/etc/postgresql-common/createcluster.d"
    echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.d/00-no-main-cluster.conf"
    cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
    mounted_proc=0
    if ! mountpoint -q "$root/proc"; then mount -t proc proc "$root/proc" && mounted_proc=1; fi
    trap '[[ $mounted_proc == 1 ]] && umount "$root/proc" || true' EXIT
    updates_lines >"$updates_list"
    log "apt-get upgrade, then install postgresql-$pgmajor postgresql-$pgmajor-pgvector postgresql-$pgmajor-age (in the root, with $suite${security_mirror:+ and its -updates and -security suites})"
    in_root apt-get "${apt_opts[@]}" update -qq >&2
    # Upgrade first: a root made before the update suites were configured takes their fixes now. A
    # server already running keeps its binaries until it restarts (policy-rc.d stops the packages from
    # restarting it underneath the tests).
    { in_root env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" full-upgrade -y -qq \
      && in_root env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y -qq \
        "postgresql-$pgmajor" "postgresql-$pgmajor-pgvector" "postgresql-$pgmajor-age"; } >"$base/apt-$stack.log" 2>&1 \
        || { tail -n 30 "$base/apt-$stack.log" >&2; die "apt-get install in the root failed (log: $base/apt-$stack.log)"; }
    in_root apt-get clean
    if [[ $mounted_proc == 1 ]]; then umount "$root/proc"; mounted_proc=0; fi
    trap - EXIT
fi

# AGE for non-superusers: LOAD '$libdir/plugins/age' needs the library under plugins/.
libdir="$root/usr/lib/postgresql/$pgmajor/lib"
mkdir -p "$libdir/plugins"
[[ -e "$libdir/plugins/age.so" ]] || ln -s ../age.so "$libdir/plugins/age.so"

# ---------------------------------------------------------------- 2. the cluster
if [[ ! -f "$root$pgdata/PG_VERSION" ]]; then
    log "initdb (PostgreSQL $pgmajor) in $root$pgdata"
    mkdir -p "$root$pgdata" "$(dirname "$password_file")"
    head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$password_file"
    chmod 600 "$password_file"
    cp "$password_file" "$root/tmp/pwfile"
    in_root chown postgres:postgres /tmp/pwfile   # the root's postgres uid, not the host's
    in_root chown -R postgres:postgres "$pgdata"
    as_pg "$pgbin/initdb" -D "$pgdata" -U postgres --pwfile=/tmp/pwfile -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >"$base/initdb-$stack.log" 2>&1 \
        || { cat "$base/initdb-$stack.log" >&2; die "initdb failed"; }
    rm -f "$root/tmp/pwfile"
    mkdir -p "$root$pgdata/conf.d"
    echo "include_dir = 'conf.d'" >>"$root$pgdata/postgresql.conf"
    cat >"$root$pgdata/conf.d/mempalace-pg.conf" <<EOF
# Written by mempalace-pg's scripts/provision-postgres.sh
listen_addresses = '127.0.0.1'
port = $wanted_port
unix_socket_directories = '/tmp'
max_connections = 200
shared_buffers = '512MB'
maintenance_work_mem = '1GB'
work_mem = '16MB'
fsync = on
synchronous_commit = on
logging_collector = off
EOF
    in_root chown -R postgres:postgres "$pgdata"
fi

# pgvector before 0.8.2 overflows a buffer in parallel HNSW builds (CVE-2026-3172): on such a root no
# index build gets parallel workers by default (PostgreSQL's default is 2). mempalace-pg's own builds set
# their workers per session whatever this says; this covers everyone else's. Rewritten on every run, so
# an upgraded root loses it.
defects_conf="$root$pgdata/conf.d/pgvector-defects.conf"
pgvector_version=$(in_root dpkg-query -W -f '${Version}' "postgresql-$pgmajor-pgvector")
if in_root dpkg --compare-versions "$pgvector_version" lt 0.8.2; then
    printf '# Written by provision-postgres.sh: pgvector %s has CVE-2026-3172 (parallel HNSW builds)\nmax_parallel_maintenance_workers = 0\n' \
        "$pgvector_version" >"$defects_conf"
else
    rm -f "$defects_conf"
fi

# pg_prewarm's autoprewarm: the blocks shared_buffers held are saved at shutdown (and every five
# minutes) and read back at start, so a big palace's vector index segments are in memory again after a
# restart instead of being read block by block by its first searches. Rewritten on every run; a running
# server without it is restarted below (the setting takes effect only at a start).
preload_conf="$root$pgdata/conf.d/preload.conf"
printf "# Written by provision-postgres.sh\nshared_preload_libraries = 'pg_prewarm'\n" >"$preload_conf"

# ---------------------------------------------------------------- 3. the server
pw=$(cat "$password_file")
conf="$root$pgdata/conf.d/mempalace-pg.conf"
conf_port=$(sed -n 's/^port = \([0-9]\+\)$/\1/p' "$conf")
port="${conf_port:-$wanted_port}"   # where a running server of this cluster listens

# This cluster's identity, to recognise it on a port even when its postmaster's PID is not visible here
# (a server started from another PID namespace sharing this directory, e.g. an earlier session's).
cluster_id=$(as_pg "$pgbin/pg_controldata" "$pgdata" | sed -n 's/^Database system identifier: *//p')
answering_id() {   # the system identifier of the PostgreSQL answering at host $1 (127.0.0.1 or the root's
                   # socket directory /tmp), port $2; nothing when none answers
    in_root env PGPASSWORD="$pw" PGCONNECT_TIMEOUT=3 "$pgbin/psql" -h "$1" -p "$2" -U postgres -d postgres \
        -qAtX -c "SELECT system_identifier FROM pg_control_system()" 2>/dev/null || true
}

if [[ -n "$cluster_id" && "$(answering_id 127.0.0.1 "$port")" == "$cluster_id" ]]; then
    log "server already running on 127.0.0.1:$port"
    # it reads conf.d's settings again (the pgvector defects file may have changed)
    in_root env PGPASSWORD="$pw" "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAtX \
        -c "SELECT pg_reload_conf()" >/dev/null
    preloaded=$(in_root env PGPASSWORD="$pw" "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres \
        -qAtX -c "SHOW shared_preload_libraries")
    if [[ "$preloaded" != *pg_prewarm* ]]; then
        log "restarting it to load pg_prewarm (autoprewarm)"
        as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$pgdata/server.log" -m fast -w -t 120 restart >&2 \
            || { tail -n 30 "$root$pgdata/server.log" >&2; die "pg_ctl restart failed"; }
    fi
elif as_pg "$pgbin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1 \
     || [[ -n "$conf_port" && "$(answering_id /tmp "$conf_port")" == "$cluster_id" ]]; then
    die "the server in $root$pgdata is running but does not answer on 127.0.0.1:$port; stop it with: $0 stop"
else
    port=$wanted_port
    # The port may be held by a server that is shutting down; give it a moment, then go elsewhere.
    for _ in 1 2 3 4 5 6 7 8 9 10; do port_taken "$port" || break; sleep 1; done
    if port_taken "$port"; then
        [[ -n "${MEMPALACE_PG_PORT:-}" ]] && die "127.0.0.1:$port (MEMPALACE_PG_PORT) is in use by another program"
        taken=$port
        port=$(free_port_near "$default_port")
        [[ -n "$port" ]] || die "127.0.0.1:$taken is in use by another program and no free port was found near it"
        log "127.0.0.1:$taken is in use by another program; this server moves to port $port"
    fi
    [[ "$port" == "$conf_port" ]] || sed -i "s/^port = .*/port = $port/" "$conf"
    # A pid file left by a server that is gone (killed with its session) would stop pg_ctl when its PID
    # has been reused. No server of this cluster answers on its port or its socket, so the file is stale.
    rm -f "$root$pgdata/postmaster.pid"
    log "starting PostgreSQL $pgmajor on 127.0.0.1:$port"
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$pgdata/server.log" -w -t 60 start >&2 \
        || { tail -n 30 "$root$pgdata/server.log" >&2; die "pg_ctl start failed"; }
    [[ "$(answering_id 127.0.0.1 "$port")" == "$cluster_id" ]] || die "server started but does not answer on 127.0.0.1:$port"
fi
printf '%s\n' "postgresql://postgres:${pw}@127.0.0.1:${port}/postgres"
