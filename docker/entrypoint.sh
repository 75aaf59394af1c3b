#!/bin/bash
# The mempalace-pg database container's entrypoint: PostgreSQL + pgvector + AGE from Debian's packages.
#
# On an empty volume (/var/lib/postgresql/data) it
#   1. runs initdb with the superuser `postgres` and its password from POSTGRES_PASSWORD (or the file named
#      by POSTGRES_PASSWORD_FILE); pg_hba: peer on the local socket, scram-sha-256 for every TCP connection;
#   2. turns TLS on with the certificate in $MEMPALACE_PG_TLS_SOURCE (server.crt + server.key, default
#      /etc/mempalace-pg/tls) when one is mounted there, or else one it makes: a self-signed CA and a server
#      certificate for localhost, 127.0.0.1, ::1, db, the container's host name and MEMPALACE_PG_TLS_HOSTNAMES
#      (comma- or space-separated names and addresses). Clients verify against
#      /var/lib/postgresql/data/tls/ca.crt (docker compose cp db:/var/lib/postgresql/data/tls/ca.crt .);
#   3. creates the database POSTGRES_DB (default mempalace) and applies sql/bootstrap/ to it: the extensions
#      and the application role MEMPALACE_APP_USER (default mempalace) with the password from
#      MEMPALACE_APP_PASSWORD (or MEMPALACE_APP_PASSWORD_FILE), which is no superuser;
# all on a server that listens on its socket only, so the health check (TCP) fails until this is done. The
# cluster is made in pgdata.init and renamed to pgdata at the end: an interrupted first start starts over.
# Every start then installs a mounted certificate again (so replacing it works), and execs postgres in the
# foreground as the user postgres with the arguments given (compose's `command:`, e.g. -c settings).
set -Eeuo pipefail

base=/var/lib/postgresql/data
PGDATA="${PGDATA:-$base/pgdata}"
tls_dir="$base/tls"
tls_source="${MEMPALACE_PG_TLS_SOURCE:-/etc/mempalace-pg/tls}"
bootstrap_sql=/mempalace-pg/sql/bootstrap

log() { printf '[mempalace-pg entrypoint] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

as_pg() {
    if [[ "$(id -u)" == 0 ]]; then
        setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    else
        "$@"
    fi
}

# VAR or VAR_FILE (Docker secrets), not both; the value goes into VAR, exported for psql's \getenv.
file_env() {
    local var="$1" file_var="${1}_FILE"
    if [[ -n "${!var:-}" && -n "${!file_var:-}" ]]; then die "set $var or $file_var, not both"; fi
    if [[ -n "${!file_var:-}" ]]; then
        [[ -r "${!file_var}" ]] || die "$file_var: cannot read ${!file_var}"
        export "$var"="$(<"${!file_var}")"
    fi
    unset "$file_var"
}

if [[ "${1:-postgres}" != postgres ]]; then
    exec "$@"   # e.g. `docker compose run db bash`
fi
[[ $# -gt 0 ]] && shift

# ------------------------------------------------------------------ TLS
san_list() {   # the server certificate's subjectAltName
    local names="localhost 127.0.0.1 ::1 db $(cat /proc/sys/kernel/hostname) ${MEMPALACE_PG_TLS_HOSTNAMES:-}" out="" n seen=" "
    for n in ${names//,/ }; do
        [[ "$seen" == *" $n "* ]] && continue
        seen+="$n "
        if [[ "$n" =~ ^[0-9.]+$ || "$n" == *:* ]]; then out+=",IP:$n"; else out+=",DNS:$n"; fi
    done
    printf '%s' "${out#,}"
}

make_certificate() {   # a CA (its key is thrown away afterwards) and a server certificate it signs
    local tmp san
    tmp=$(mktemp -d)
    san=$(san_list)
    cat >"$tmp/openssl.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
CN = mempalace-pg local CA
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
EOF
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/ca.key" 2>/dev/null
    openssl req -config "$tmp/openssl.cnf" -new -x509 -key "$tmp/ca.key" -days 3650 -sha256 \
        -extensions ca -out "$tmp/ca.crt"
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$tmp/server.key" 2>/dev/null
    openssl req -config "$tmp/openssl.cnf" -new -key "$tmp/server.key" -subj "/CN=$(cat /proc/sys/kernel/hostname)" \
        -out "$tmp/server.csr"
    openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
        -days 825 -sha256 -extfile "$tmp/openssl.cnf" -extensions server -out "$tmp/server.crt" 2>/dev/null
    openssl verify -CAfile "$tmp/ca.crt" "$tmp/server.crt" >/dev/null
    install -o postgres -g postgres -m 0644 "$tmp/ca.crt" "$tls_dir/ca.crt"
    install -o postgres -g postgres -m 0644 "$tmp/server.crt" "$tls_dir/server.crt"
    install -o postgres -g postgres -m 0600 "$tmp/server.key" "$tls_dir/server.key"
    rm -rf "$tmp"
    log "TLS: made a CA and a server certificate for $san; clients verify with $tls_dir/ca.crt"
}

setup_tls() {
    mkdir -p "$tls_dir"
    chown postgres:postgres "$tls_dir"
    chmod 0755 "$tls_dir"
    if [[ -f "$tls_source/server.crt" && -f "$tls_source/server.key" ]]; then
        install -o postgres -g postgres -m 0644 "$tls_source/server.crt" "$tls_dir/server.crt"
        install -o postgres -g postgres -m 0600 "$tls_source/server.key" "$tls_dir/server.key"
        if [[ -f "$tls_source/ca.crt" ]]; then
            install -o postgres -g postgres -m 0644 "$tls_source/ca.crt" "$tls_dir/ca.crt"
        fi
        log "TLS: using the certificate mounted in $tls_source"
    elif [[ ! -f "$tls_dir/server.crt" || ! -f "$tls_dir/server.key" ]]; then
        make_certificate
    fi
}

# ------------------------------------------------------------------ the first start
bootstrap() {
    local init="$PGDATA.init" pwfile db app_user
    file_env POSTGRES_PASSWORD
    file_env MEMPALACE_APP_PASSWORD
    [[ -n "${POSTGRES_PASSWORD:-}" ]] || die "the volume is empty: set POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE)"
    [[ -n "${MEMPALACE_APP_PASSWORD:-}" ]] || die "the volume is empty: set MEMPALACE_APP_PASSWORD (or MEMPALACE_APP_PASSWORD_FILE)"
    db="${POSTGRES_DB:-mempalace}"
    app_user="${MEMPALACE_APP_USER:-mempalace}"

    rm -rf "$init"
    mkdir -p "$init"
    chown postgres:postgres "$init"
    chmod 0700 "$init"
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    chown postgres "$pwfile"
    log "initdb: $(postgres --version)"
    as_pg initdb -D "$init" -U postgres --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
        --auth-local=peer --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"

    cat >"$init/pg_hba.conf" <<'EOF'
# Written by mempalace-pg's docker/entrypoint.sh. Every TCP connection needs a password (SCRAM);
# the socket inside the container trusts the operating-system user (docker compose exec db psql -U postgres
# runs as root: use `docker compose exec -u postgres db psql`).
# TYPE  DATABASE     USER  ADDRESS     METHOD
local   all          all               peer
host    all          all   0.0.0.0/0   scram-sha-256
host    all          all   ::/0        scram-sha-256
host    replication  all   0.0.0.0/0   scram-sha-256
host    replication  all   ::/0        scram-sha-256
EOF
    mkdir -p "$init/conf.d"
    echo "include_dir = 'conf.d'" >>"$init/postgresql.conf"
    cat >"$init/conf.d/00-mempalace-pg-docker.conf" <<EOF
# Written by mempalace-pg's docker/entrypoint.sh. compose.yaml's -c settings override these.
listen_addresses = '*'
port = 5432
unix_socket_directories = '/var/run/postgresql'
password_encryption = 'scram-sha-256'
ssl = on
ssl_cert_file = '$tls_dir/server.crt'
ssl_key_file = '$tls_dir/server.key'
ssl_min_protocol_version = 'TLSv1.2'
EOF
    chown -R postgres:postgres "$init"

    log "bootstrap: database $db, application role $app_user (server on its socket only)"
    as_pg pg_ctl -D "$init" -o "-c listen_addresses=''" -w -t 120 start >&2
    local psql=(psql -X -q -v ON_ERROR_STOP=1 -h /var/run/postgresql -U postgres)
    as_pg "${psql[@]}" -d postgres -v db="$db" <<'SQL'
SELECT format('CREATE DATABASE %I', :'db')
WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = :'db') \gexec
SQL
    as_pg "${psql[@]}" -d "$db" -f "$bootstrap_sql/01_extensions.sql"
    # The password reaches psql through its environment (\getenv), never its command line.
    as_pg "${psql[@]}" -d "$db" -v app_role="$app_user" -v app_db="$db" \
        -v app_connection_limit="${MEMPALACE_APP_CONNECTION_LIMIT:-64}" <<SQL
\\getenv app_password MEMPALACE_APP_PASSWORD
\\i $bootstrap_sql/02_app_role.sql
SQL
    as_pg "${psql[@]}" -d "$db" -f "$bootstrap_sql/03_graph_catalog.sql"
    as_pg pg_ctl -D "$init" -m fast -w -t 120 stop >/dev/null
    mv "$init" "$PGDATA"
    log "bootstrap done"
}

# ------------------------------------------------------------------ memory
memory_bytes() {   # the container's memory limit (cgroup v2, then v1), else the machine's memory
    local limit="" f
    for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
        if [[ -r "$f" ]]; then limit="$(<"$f")"; break; fi
    done
    local total=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024 ))
    if [[ "$limit" =~ ^[0-9]+$ ]] && (( limit < total )); then echo "$limit"; else echo "$total"; fi
}

shared_buffers_size() {   # e.g. 512MB
    if [[ -n "${MEMPALACE_PG_SHARED_BUFFERS:-}" ]]; then echo "$MEMPALACE_PG_SHARED_BUFFERS"; return; fi
    local mb=$(( $(memory_bytes) / 4 / 1048576 ))
    (( mb < 128 )) && mb=128
    (( mb > 8192 )) && mb=8192
    echo "${mb}MB"
}

mkdir -p "$base" /var/run/postgresql
chown postgres:postgres "$base" /var/run/postgresql
setup_tls
if [[ ! -s "$PGDATA/PG_VERSION" ]]; then
    bootstrap
fi
unset POSTGRES_PASSWORD MEMPALACE_APP_PASSWORD POSTGRES_PASSWORD_FILE MEMPALACE_APP_PASSWORD_FILE
# A pgvector whose parallel HNSW build overflows a buffer (the image marks it, docker/Dockerfile): no
# parallel maintenance workers unless a session asks (settings given in the command come after and win).
if [[ -f /etc/mempalace-pg/pgvector-defects ]]; then
    log "$(cat /etc/mempalace-pg/pgvector-defects): max_parallel_maintenance_workers = 0"
    set -- -c max_parallel_maintenance_workers=0 "$@"
fi
# pg_prewarm's autoprewarm: the blocks shared_buffers held are saved at shutdown (and every five minutes)
# and read back at start, so after a restart a big palace's vector index segments are in memory again
# instead of being read block by block by its first searches. A -c shared_preload_libraries in the
# command comes after and wins (name pg_prewarm in it too, to keep this).
set -- -c shared_preload_libraries=pg_prewarm "$@"
# shared_buffers from the memory the container is given (its cgroup limit, else the host's): a quarter of
# it, from 128MB to 8GB, or MEMPALACE_PG_SHARED_BUFFERS. It goes first, so a -c shared_buffers in the
# command still wins. The vector index segments searches read should fit in it (`mempalace-pg doctor`).
set -- -c "shared_buffers=$(shared_buffers_size)" "$@"
log "starting $(postgres --version) on port 5432"
if [[ "$(id -u)" == 0 ]]; then
    exec setpriv --reuid=postgres --regid=postgres --init-groups -- postgres -D "$PGDATA" "$@"
fi
exec postgres -D "$PGDATA" "$@"
