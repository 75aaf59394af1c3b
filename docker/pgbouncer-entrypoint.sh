#!/bin/bash
# PgBouncer in front of the db service (compose profile "pooler"): transaction pooling, with
# max_prepared_statements so psycopg's automatic prepared statements work (PgBouncer >= 1.21; Debian 13
# has 1.24.1). It runs the db image and reads the db volume read-only for the TLS files: to the server it
# connects with TLS verify-full against the CA there (the db certificate names the host `db`), and it
# offers clients TLS with the server's own certificate, so the same ca.crt verifies both.
# Clients authenticate with SCRAM as the application role; the role's password (MEMPALACE_APP_PASSWORD or
# MEMPALACE_APP_PASSWORD_FILE) goes into a userlist in a private temporary directory, never the command line.
#
# Per-session state does not survive transaction pooling (deployment-facts.md section 2): the application
# role gets AGE and its search_path from ALTER ROLE ... SET (sql/bootstrap/02_app_role.sql), which every
# server connection applies at its start, so it needs no per-session LOAD or SET.
set -Eeuo pipefail

log() { printf '[mempalace-pg pgbouncer] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [[ -n "${MEMPALACE_APP_PASSWORD_FILE:-}" ]]; then
    MEMPALACE_APP_PASSWORD="$(<"$MEMPALACE_APP_PASSWORD_FILE")"
fi
[[ -n "${MEMPALACE_APP_PASSWORD:-}" ]] || die "set MEMPALACE_APP_PASSWORD (or MEMPALACE_APP_PASSWORD_FILE)"
db="${POSTGRES_DB:-mempalace}"
app_user="${MEMPALACE_APP_USER:-mempalace}"
server_host="${PGBOUNCER_SERVER_HOST:-db}"
tls=/var/lib/postgresql/data/tls
[[ -r "$tls/ca.crt" ]] || die "no $tls/ca.crt: mount the db service's volume (read-only) at /var/lib/postgresql/data"

conf=$(mktemp -d /tmp/pgbouncer.XXXXXX)
# userlist.txt: "user" "password", with " doubled inside the quotes
printf '"%s" "%s"\n' "${app_user//\"/\"\"}" "${MEMPALACE_APP_PASSWORD//\"/\"\"}" >"$conf/userlist.txt"
unset MEMPALACE_APP_PASSWORD MEMPALACE_APP_PASSWORD_FILE
cat >"$conf/pgbouncer.ini" <<EOF
[databases]
$db = host=$server_host port=5432 dbname=$db

[pgbouncer]
listen_addr = *
listen_port = 6432
unix_socket_dir =
auth_type = scram-sha-256
auth_file = $conf/userlist.txt
pool_mode = transaction
max_prepared_statements = ${PGBOUNCER_MAX_PREPARED_STATEMENTS:-200}
default_pool_size = ${PGBOUNCER_DEFAULT_POOL_SIZE:-20}
max_client_conn = ${PGBOUNCER_MAX_CLIENT_CONN:-500}
server_tls_sslmode = ${PGBOUNCER_SERVER_TLS_SSLMODE:-verify-full}
server_tls_ca_file = $tls/ca.crt
client_tls_sslmode = ${PGBOUNCER_CLIENT_TLS_SSLMODE:-allow}
client_tls_cert_file = $tls/server.crt
client_tls_key_file = $tls/server.key
client_tls_ca_file = $tls/ca.crt
ignore_startup_parameters = extra_float_digits
EOF
chown -R postgres:postgres "$conf"
chmod 0700 "$conf"
chmod 0600 "$conf/userlist.txt"
log "$(pgbouncer --version | head -n1): $db -> $server_host:5432, transaction pooling, on port 6432"
exec setpriv --reuid=postgres --regid=postgres --init-groups -- pgbouncer "$conf/pgbouncer.ini"
