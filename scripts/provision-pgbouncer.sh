#!/usr/bin/env bash
# PgBouncer in transaction pooling mode in front of the server scripts/provision-postgres.sh provisions,
# run from the same Debian root; prints its DSN on the last line of stdout.
#
#   scripts/provision-pgbouncer.sh          # MEMPALACE_PG_STACK=trixie (default: PgBouncer 1.24) or sid (1.26)
#   scripts/provision-pgbouncer.sh stop     # stop it (through its admin console: SHUTDOWN)
#
# How: apt-get install pgbouncer in the root (once), a configuration of its own under
# /var/lib/mempalace-pg/pgbouncer in the root (Debian's /etc/pgbouncer is left alone), started as the
# postgres user in the background on 127.0.0.1. Every database of the server is reachable through it
# (`* =`), by any role of the server (PgBouncer looks the role's SCRAM secret up there), with the
# password checked by SCRAM. A PgBouncer that already
# answers on the port is left running; stop goes through the admin console, so it works whichever PID
# namespace started it.
#
# The pool is small on purpose (default_pool_size 3 per database and user): the tests' many clients
# then share server connections, which is what transaction pooling does to session state.
#
# Settings (environment): MEMPALACE_PG_STACK, MEMPALACE_PG_ROOT_BASE as for the server;
#   MEMPALACE_PG_POOLER_PORT  TCP port on 127.0.0.1 (default 15437 trixie, 15438 sid; when another program
#                             holds the default, a free port nearby, which start and stop remember); each
#                             port is a PgBouncer of its own (configuration, log and pid file under
#                             pgbouncer-<port>)
#   MEMPALACE_PG_POOLER_PREPARED  its max_prepared_statements (default 200; 0: it does not carry
#                             prepared statements, as PgBouncer before 1.21 did not)
set -euo pipefail
action="${1:-start}"
case "$action" in start|stop) ;; *) echo "usage: $0 [start|stop]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."

log() { printf '[pgbouncer] %s\n' "$*" >&2; }
die() { printf '[pgbouncer] ERROR: %s\n' "$*" >&2; exit 1; }

source scripts/stack-root.sh
default_port=$(stack_port 15437 15438)
# Where this root's default PgBouncer listens when another program held its default port at start.
moved="$root/var/lib/mempalace-pg/pgbouncer.port"
if [[ -n "${MEMPALACE_PG_POOLER_PORT:-}" ]]; then
    port=$MEMPALACE_PG_POOLER_PORT
else
    port=$(cat "$moved" 2>/dev/null || echo "$default_port")
fi
prepared="${MEMPALACE_PG_POOLER_PREPARED:-200}"

primary

dsn() { printf '%s\n' "postgresql://postgres:${pw}@127.0.0.1:${port}/postgres"; }

admin() {   # a command on PgBouncer's admin console (the virtual database "pgbouncer")
    in_root env PGPASSWORD="$pw" PGCONNECT_TIMEOUT=3 "$pgbin/psql" -h 127.0.0.1 -p "$port" -U postgres \
        -d pgbouncer -qAtX -c "$1" 2>/dev/null
}

if [[ "$action" == stop ]]; then
    if admin "SHUTDOWN" >/dev/null || ! admin "SHOW VERSION" >/dev/null; then
        for _ in $(seq 50); do admin "SHOW VERSION" >/dev/null || break; sleep 0.1; done
        log "stopped (or was not running) on 127.0.0.1:$port"
        exit 0
    fi
    die "PgBouncer on 127.0.0.1:$port did not shut down"
fi

if version=$(admin "SHOW VERSION"); then
    log "already running on 127.0.0.1:$port ($version)"
    dsn
    exit 0
fi

if [[ ! -x "$root/usr/sbin/pgbouncer" ]]; then
    log "apt-get install pgbouncer in $root"
    in_root apt-get -o Dpkg::Use-Pty=0 -o APT::Install-Recommends=false -qq update >&2 || true
    in_root env DEBIAN_FRONTEND=noninteractive apt-get -o Dpkg::Use-Pty=0 -o APT::Install-Recommends=false \
        -y -qq install pgbouncer >"$base/apt-pgbouncer-$stack.log" 2>&1 \
        || { tail -n 20 "$base/apt-pgbouncer-$stack.log" >&2; die "apt-get install pgbouncer failed"; }
fi

if [[ -z "${MEMPALACE_PG_POOLER_PORT:-}" ]]; then
    port=$default_port
    if port_taken "$port"; then
        # as the server does: a free port nearby, kept in $moved so that the next start and stop find it
        port=$(free_port_near "$default_port")
        [[ -n "$port" ]] || die "127.0.0.1:$default_port is in use and no free port was found near it"
        log "127.0.0.1:$default_port is in use by another program; this PgBouncer moves to port $port"
    fi
    mkdir -p "$(dirname "$moved")"
    if [[ "$port" == "$default_port" ]]; then rm -f "$moved"; else echo "$port" >"$moved"; fi
fi
port_taken "$port" && die "127.0.0.1:$port is in use by another program; set MEMPALACE_PG_POOLER_PORT"
dir="/var/lib/mempalace-pg/pgbouncer-$port"   # inside the root
mkdir -p "$root$dir"
(
    umask 077
    # The password for clients (checked by SCRAM) and for the server connections PgBouncer opens.
    printf '"postgres" "%s"\n' "$pw" >"$root$dir/userlist.txt"
)
cat >"$root$dir/pgbouncer.ini" <<EOF
; Written by scripts/provision-pgbouncer.sh
[databases]
* = host=127.0.0.1 port=$primary_port

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $dir/userlist.txt
; roles made later (the tests make some) are looked up on the server, as the superuser
auth_user = postgres
auth_dbname = postgres
admin_users = postgres
pool_mode = transaction
max_prepared_statements = $prepared
default_pool_size = 3
max_client_conn = 500
max_db_connections = 0
; a client that waits this long for a server connection gets an error, not a hang
query_wait_timeout = 60
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
EOF
in_root chown -R postgres:postgres "$dir"
rm -f "$root$dir/pgbouncer.pid"
log "starting PgBouncer on 127.0.0.1:$port (transaction pooling) in front of 127.0.0.1:$primary_port"
as_pg /usr/sbin/pgbouncer -d "$dir/pgbouncer.ini" >&2 || die "pgbouncer did not start (log: $root$dir/pgbouncer.log)"
for _ in $(seq 50); do version=$(admin "SHOW VERSION") && break; sleep 0.1; done
[[ -n "${version:-}" ]] || { tail -n 20 "$root$dir/pgbouncer.log" >&2; die "PgBouncer does not answer on 127.0.0.1:$port"; }
log "running: $version, $(admin "SHOW CONFIG" | awk -F'|' '$1 == "max_prepared_statements" {print "max_prepared_statements " $2}')"
dsn
