#!/usr/bin/env bash
# A hot standby of the server scripts/provision-postgres.sh provisions, streaming from it, in the same
# Debian root; prints its DSN on the last line of stdout.
#
#   scripts/provision-standby.sh          # MEMPALACE_PG_STACK=trixie (default) or sid, as the primary
#   scripts/provision-standby.sh stop     # stop it (the next start copies the primary again)
#
# How: pg_basebackup -R (streaming replication, the replication settings written for us) of the running
# primary into a second data directory of the root, then pg_ctl start on its own port. The primary's
# configuration lives in its data directory (initdb, not pg_createcluster), so the copy carries it; only
# the port differs. A standby that already answers is left running; one that does not is copied anew.
#
# Settings (environment): MEMPALACE_PG_STACK, MEMPALACE_PG_ROOT_BASE as for the primary;
#   MEMPALACE_PG_STANDBY_PORT  TCP port on 127.0.0.1 (default 15427 trixie, 15428 sid; a free port near
#                              it when another program holds the default)
set -euo pipefail
action="${1:-start}"
case "$action" in start|stop) ;; *) echo "usage: $0 [start|stop]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."

log() { printf '[standby] %s\n' "$*" >&2; }
die() { printf '[standby] ERROR: %s\n' "$*" >&2; exit 1; }

source scripts/stack-root.sh
port="${MEMPALACE_PG_STANDBY_PORT:-$(stack_port 15427 15428)}"
standby=/var/lib/mempalace-pg/standby       # inside the root

if [[ "$action" == stop ]]; then
    [[ -f "$root$standby/PG_VERSION" ]] || die "no standby in $root$standby"
    as_pg "$pgbin/pg_ctl" -D "$standby" -m fast -w stop >&2
    exit 0
fi

primary
dsn="postgresql://postgres:${pw}@127.0.0.1:${port}/postgres"

in_recovery() {   # "t" when a standby answers on the port
    chroot "$root" /usr/bin/env -i PATH=/usr/bin PGPASSWORD="$pw" PGCONNECT_TIMEOUT=3 \
        "$pgbin/psql" -h 127.0.0.1 -p "$1" -U postgres -d postgres -qAtX -c "SELECT pg_is_in_recovery()" \
        2>/dev/null || true
}

receiving() {   # the standby's WAL receiver state: "streaming" when it follows the primary
    chroot "$root" /usr/bin/env -i PATH=/usr/bin PGPASSWORD="$pw" PGCONNECT_TIMEOUT=3 \
        "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAtX \
        -c "SELECT status FROM pg_stat_wal_receiver" 2>/dev/null || true
}

# This root's standby may serve on the port it moved to earlier (below): find it there first.
conf_port=$(sed -n 's/^port = \([0-9]\+\)$/\1/p' "$root$standby/conf.d/mempalace-pg.conf" 2>/dev/null || true)
if [[ -z "${MEMPALACE_PG_STANDBY_PORT:-}" && -n "$conf_port" && "$conf_port" != "$port" \
      && "$(in_recovery "$conf_port")" == t ]]; then
    port=$conf_port
    dsn="postgresql://postgres:${pw}@127.0.0.1:${port}/postgres"
fi

if [[ "$(in_recovery "$port")" == t ]]; then
    if [[ "$(receiving)" == streaming ]]; then
        log "standby already running on 127.0.0.1:$port"
        printf '%s\n' "$dsn"
        exit 0
    fi
    log "the standby on 127.0.0.1:$port does not follow the primary (WAL gone?): stopping it to copy anew"
    as_pg "$pgbin/pg_ctl" -D "$standby" -m fast -w stop >&2
fi
[[ "$(in_recovery "$port")" == "" ]] || die "127.0.0.1:$port answers but is not a standby"
if port_taken "$port"; then
    # another program (another checkout's standby, say) holds it: go elsewhere, as the primary does
    [[ -n "${MEMPALACE_PG_STANDBY_PORT:-}" ]] \
        && die "127.0.0.1:$port (MEMPALACE_PG_STANDBY_PORT) is in use by another program"
    taken=$port
    port=$(free_port_near "$(stack_port 15427 15428)")
    [[ -n "$port" ]] || die "127.0.0.1:$taken is in use by another program and no free port was found near it"
    log "127.0.0.1:$taken is in use by another program; the standby moves to port $port"
    dsn="postgresql://postgres:${pw}@127.0.0.1:${port}/postgres"
fi

# The same data directory may still serve on the port an earlier default gave it; it is copied over below.
old_port=$(sed -n 's/^port = \([0-9]\+\)$/\1/p' "$root$standby/conf.d/mempalace-pg.conf" 2>/dev/null || true)
if [[ -n "$old_port" && "$old_port" != "$port" && "$(in_recovery "$old_port")" == t ]]; then
    log "stopping the standby of $root$standby on its earlier port $old_port"
    as_pg "$pgbin/pg_ctl" -D "$standby" -m fast -w stop >&2
fi
# A standby that is not running is made afresh: without a replication slot the primary keeps no WAL for
# it, so one stopped while the primary went on writing could never catch up. A copy takes seconds here.
log "pg_basebackup of 127.0.0.1:$primary_port into $root$standby"
rm -rf "$root$standby"
mkdir -p "$root$standby"
chroot "$root" chown postgres:postgres "$standby"
chmod 700 "$root$standby"
as_pg env PGPASSWORD="$pw" "$pgbin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres \
    -D "$standby" -R -X stream -c fast >&2 || die "pg_basebackup failed"
# the copy is the primary's configuration; a standby differs in its port (and keeps no pid file)
sed -i "s/^port = .*/port = $port/" "$root$standby/conf.d/mempalace-pg.conf"
rm -f "$root$standby/postmaster.pid"
log "starting the standby on 127.0.0.1:$port"
as_pg "$pgbin/pg_ctl" -D "$standby" -l "$standby/server.log" -w -t 60 start >&2 \
    || { tail -n 30 "$root$standby/server.log" >&2; die "pg_ctl start failed"; }
[[ "$(in_recovery "$port")" == t ]] || die "the standby started but does not answer as one on 127.0.0.1:$port"
printf '%s\n' "$dsn"
