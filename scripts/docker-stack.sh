#!/usr/bin/env bash
# Build and boot the homelab stack (docker/) on this machine, then check it as a MemPalace client would:
# the application role (no superuser), over TCP, with a password (SCRAM) and TLS verify-full.
#
#   scripts/docker-stack.sh [up]          everything below, then leave the stack running; prints the DSN
#   scripts/docker-stack.sh build         steps 1-5's build only: the engine running and the image built,
#                                         nothing started (the test command runs it early, beside other work)
#   scripts/docker-stack.sh test [ARGS]   up, then pytest ARGS (default: the contract, graph and backup
#                                         tests) against the stack as the application role; the tests'
#                                         set-up that needs a superuser (MEMPALACE_PG_TEST_ADMIN_DSN)
#                                         connects as postgres, with TLS and a passfile of its own
#   scripts/docker-stack.sh dsn           the DSN of a running stack (no password in it: PGPASSFILE has it)
#   scripts/docker-stack.sh stop [--engine]   remove the containers, network and volume (and the docker/.env
#                                         it wrote); with --engine also stop the dockerd it started
#
# What `up` does, each step only when needed, with the time of each phase at the end:
#   1. apt-get install docker.io docker-compose (and debootstrap);
#   2. a Docker engine: the one DOCKER_HOST or /var/run/docker.sock points at, or else dockerd started by
#      hand with --iptables=false --bridge=none and its own data root, exec root and socket under
#      $MEMPALACE_PG_DOCKER_STATE (default /var/tmp/mempalace-pg-docker), as deployment-facts.md found works;
#   3. the base image debian:trixie-slim, imported from a `debootstrap --variant=minbase trixie` root (no
#      registry is reachable here); the root's tarball is made once by scripts/debian-minbase.sh, which the
#      trixie server's root (scripts/provision-postgres.sh) starts from too;
#   4. docker/.env with two random passwords when there is none (a docker/.env of yours is used as it is);
#   5. `docker-compose build` and `up -d db`, then waits for the health check to say healthy, and checks the
#      image's packages: the pgvector library and extension are its package's version, with no parallel
#      maintenance workers by default where that version's parallel HNSW build is unsafe (< 0.8.2), and, on
#      trixie, apt sources with trixie-security and trixie-updates;
#   6. copies the CA certificate the container made, writes a libpq password file for the application role,
#      and checks (scripts/docker_smoke.py): TLS verify-full as the application role, no superuser, a
#      password needed (the DSN without one is refused), a drawer and a fact added and found again; then
#      `mempalace-pg doctor`;
#   7. the PgBouncer service (compose profile `pooler`, transaction pooling, port 6432): up, healthy, and the
#      same smoke check and doctor through it, with MEMPALACE_PG_SESSION_DSN at the server's own port.
# Networking: compose's own network (a bridge docker-compose creates; --bridge=none only removes docker0)
# with the port published on 127.0.0.1:5432 by docker-proxy, so docs/docker.md's compose file runs unchanged.
#
# Settings (environment): MEMPALACE_PG_IMAGE_STACK=trixie|sid (the image's Debian stack, default trixie),
# MEMPALACE_PG_DOCKER_STATE, MEMPALACE_PG_MIRROR (Debian mirror for debootstrap; default the host's).
# Passwords are never printed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

action="${1:-up}"
[[ $# -gt 0 ]] && shift
case "$action" in up|build|test|dsn|stop) ;; *) echo "usage: $0 [up|build|test [pytest args]|dsn|stop [--engine]]" >&2; exit 2 ;; esac

state="${MEMPALACE_PG_DOCKER_STATE:-/var/tmp/mempalace-pg-docker}"
project=mempalace-pg
compose_file="$repo/docker/compose.yaml"
env_file="$repo/docker/.env"
export MEMPALACE_PG_IMAGE_STACK="${MEMPALACE_PG_IMAGE_STACK:-trixie}"
port=5432
app_user=mempalace
app_db=mempalace

log() { printf '[docker-stack] %s\n' "$*" >&2; }
die() { printf '[docker-stack] ERROR: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
phases=()
phase_start=0
begin() { phase_start=$(now); log "== $*"; }
end() { phases+=("$(awk -v a="$phase_start" -v b="$(now)" -v n="$1" 'BEGIN { printf "%-28s %7.1f s", n, b - a }')"); }
report() {
    [[ ${#phases[@]} -gt 0 ]] || return 0
    log "timings:"
    for p in "${phases[@]}"; do log "  $p"; done
}
trap report EXIT

[[ "$(id -u)" == 0 ]] || die "run as root (dockerd, debootstrap and apt-get need it)"
mkdir -p "$state"

# Our own engine, when we start one, is reached through its socket; a given DOCKER_HOST is respected.
engine_sock="$state/docker.sock"
if [[ -z "${DOCKER_HOST:-}" && ! -S /var/run/docker.sock && -S "$engine_sock" ]]; then
    export DOCKER_HOST="unix://$engine_sock"
fi
# Debian's CLI (the engine's version) before another one on PATH (a newer CLI here had no daemon)
find_docker() { docker_bin=$(command -v docker || true); [[ ! -x /usr/bin/docker ]] || docker_bin=/usr/bin/docker; }
find_docker
docker_cli() { "$docker_bin" "$@"; }
compose() { docker-compose -p "$project" -f "$compose_file" "$@"; }
engine_answers() { [[ -n "$docker_bin" ]] && timeout 10 "$docker_bin" version >/dev/null 2>&1; }

dsn="postgresql://$app_user@localhost:$port/$app_db?sslmode=verify-full&sslrootcert=$state/ca.crt"
pooler_port=6432
pooler_dsn="postgresql://$app_user@localhost:$pooler_port/$app_db?sslmode=verify-full&sslrootcert=$state/ca.crt"

# ------------------------------------------------------------------ stop
if [[ "$action" == stop ]]; then
    if [[ ! -f "$state/started-stack" ]]; then
        log "no stack started by this script (no $state/started-stack): containers and volume left alone"
    elif command -v docker-compose >/dev/null && engine_answers; then
        begin "compose down (containers, network, volume)"
        # compose needs its env file to read the compose file; an empty one will do for down
        [[ -f "$env_file" ]] || { : >"$env_file"; touch "$state/created-env"; }
        compose --profile pooler down -v --remove-orphans >&2
        rm -f "$state/started-stack"
        end "compose down"
    fi
    if [[ -f "$state/created-env" ]]; then
        rm -f "$env_file" "$state/created-env"
        log "removed docker/.env (written by this script)"
    fi
    rm -f "$state/pgpass" "$state/pgpass-admin" "$state/ca.crt"
    if [[ "${1:-}" == --engine && -f "$state/dockerd.pid" ]]; then
        begin "stop dockerd"
        pid=$(cat "$state/dockerd.pid")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid"
            for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
            kill -0 "$pid" 2>/dev/null && die "dockerd ($pid) did not stop"
        fi
        rm -f "$state/dockerd.pid"
        # dockerd leaves its default network namespace mounted (exec/netns/default): unmount what is
        # left under the state directory, so that it can be removed
        awk -v d="$state/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
            umount "$m" || log "could not unmount $m"
        done
        end "stop dockerd"
    fi
    exit 0
fi

if [[ "$action" == dsn ]]; then
    [[ -f "$state/pgpass" && -f "$state/ca.crt" ]] || die "no stack is up (run $0 up)"
    echo "PGPASSFILE=$state/pgpass $dsn"
    exit 0
fi

# ------------------------------------------------------------------ 1. packages
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [[ ${#missing[@]} -gt 0 ]]; then
    begin "apt-get install ${missing[*]}"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    end "apt-get install"
    find_docker
fi

# ------------------------------------------------------------------ 2. the engine
if ! engine_answers; then
    begin "start dockerd (--iptables=false --bridge=none, state in $state)"
    export DOCKER_HOST="unix://$engine_sock"
    if ! engine_answers; then
        mkdir -p "$state/data" "$state/exec"
        rm -f "$engine_sock"
        # setsid: the engine outlives this script (stop --engine ends it)
        setsid dockerd --data-root "$state/data" --exec-root "$state/exec" -H "$DOCKER_HOST" \
            --pidfile "$state/dockerd.pid" --iptables=false --ip-forward=false --bridge=none \
            >"$state/dockerd.log" 2>&1 </dev/null &
        for _ in $(seq 120); do engine_answers && break; sleep 0.5; done
        engine_answers || { tail -n 30 "$state/dockerd.log" >&2; die "dockerd did not answer (log: $state/dockerd.log)"; }
    fi
    end "start dockerd"
fi
log "engine: $(docker_cli version --format 'server {{.Server.Version}}' 2>/dev/null) at ${DOCKER_HOST:-unix:///var/run/docker.sock}"

# ------------------------------------------------------------------ 3. the base image
if ! docker_cli image inspect debian:trixie-slim >/dev/null 2>&1; then
    # the same minbase root the trixie server's root starts from (scripts/provision-postgres.sh): made once
    begin "trixie's minbase root (scripts/debian-minbase.sh)"
    tarball=$(MEMPALACE_PG_MINBASE_DIR="${MEMPALACE_PG_ROOT_BASE:-/var/tmp/mempalace-pg}/minbase" \
              bash scripts/debian-minbase.sh trixie | tail -n 1)
    end "minbase root"
    begin "docker import $tarball as debian:trixie-slim"
    docker_cli import "$tarball" debian:trixie-slim >&2
    end "docker import"
fi

# ------------------------------------------------------------------ 4. passwords
if [[ ! -f "$env_file" ]]; then
    umask 077
    {
        echo "# Written by scripts/docker-stack.sh (removed by its stop): random passwords"
        echo "POSTGRES_PASSWORD=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
        echo "MEMPALACE_APP_PASSWORD=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')"
    } >"$env_file"
    umask 022
    touch "$state/created-env"
    log "wrote docker/.env with random passwords"
fi
app_password=$(sed -n 's/^MEMPALACE_APP_PASSWORD=//p' "$env_file" | tail -n1)
[[ -n "$app_password" ]] || die "docker/.env has no MEMPALACE_APP_PASSWORD"

# ------------------------------------------------------------------ 5. build, up, healthy
begin "docker-compose build (stack $MEMPALACE_PG_IMAGE_STACK)"
compose build db >"$state/build.log" 2>&1 || { tail -n 40 "$state/build.log" >&2; die "build failed (log: $state/build.log)"; }
end "build"
[[ "$action" != build ]] || exit 0

begin "docker-compose up -d db, wait for healthy"
touch "$state/started-stack"
compose up -d --no-build db >&2
container=$(compose ps -q db)
status=""
for _ in $(seq 180); do
    status=$(docker_cli inspect -f '{{.State.Health.Status}}' "$container" 2>/dev/null || echo gone)
    [[ "$status" == healthy || "$status" == gone ]] && break
    [[ "$(docker_cli inspect -f '{{.State.Running}}' "$container")" == true ]] || break
    sleep 1
done
if [[ "$status" != healthy ]]; then
    compose logs --tail 60 db >&2 || true
    die "the db container is not healthy (health: $status)"
fi
end "boot to healthy"

# What the image promises about its packages (docker/Dockerfile): Debian's pgvector, as the library the
# server loads (default_version) and as the extension the bootstrap created (extversion), made safe where
# it has the parallel HNSW build overflow; and, on trixie, apt sources with trixie-security, so an upgrade
# in the container takes Debian's security fixes.
begin "the image's versions and apt sources"
in_db() {
    docker_cli exec -u postgres "$container" psql -X -qtA -v ON_ERROR_STOP=1 -d "$app_db" -c "$1" \
        || die "psql in the db container failed: $1"
}
server_version=$(in_db "SHOW server_version")
vector_default=$(in_db "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
vector_created=$(in_db "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
age_default=$(in_db "SELECT default_version FROM pg_available_extensions WHERE name = 'age'")
age_created=$(in_db "SELECT extversion FROM pg_extension WHERE extname = 'age'")
pg_major=$(docker_cli exec "$container" cat /etc/mempalace-pg-major)
packages=$(docker_cli exec "$container" dpkg-query -W -f '${Package} ${Version}, ' \
    "postgresql-$pg_major" "postgresql-$pg_major-pgvector" "postgresql-$pg_major-age")
log "PostgreSQL $server_version; pgvector $vector_default (created: $vector_created);" \
    "AGE $age_default (created: $age_created); packages: ${packages%, }"
# The library the server loads is the package's, and the bootstrap created that version.
vector_package=$(docker_cli exec "$container" dpkg-query -W -f '${Version}' "postgresql-$pg_major-pgvector")
[[ -n "$vector_default" && "${vector_package%%-*}" == "$vector_default"* && "$vector_created" == "$vector_default" ]] \
    || die "pgvector: package $vector_package, library '$vector_default', extension '$vector_created' differ"
# Where the parallel HNSW build overflows (before 0.8.2) the server's default runs none (the entrypoint).
workers=$(in_db "SHOW max_parallel_maintenance_workers")
if dpkg --compare-versions "$vector_default" lt 0.8.2; then
    [[ "$workers" == 0 ]] || die "pgvector $vector_default has CVE-2026-3172 but max_parallel_maintenance_workers is $workers"
    log "pgvector $vector_default has known defects (doctor names them): parallel maintenance workers off"
fi
if [[ "$MEMPALACE_PG_IMAGE_STACK" == trixie ]]; then
    suites=$(docker_cli exec "$container" sh -c \
        'cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -v "^[[:space:]]*#"')
    for suite in trixie-security trixie-updates; do
        grep -qE "(^deb |^Suites:).*[[:space:]]$suite([[:space:]]|\$)" <<<"$suites" \
            || die "the image's apt sources have no $suite: $(tr '\n' ' ' <<<"$suites")"
    done
    log "apt sources: $(grep -E '^(deb |Suites:)' <<<"$suites" | tr '\n' ';')"
fi
end "versions and apt sources"

# ------------------------------------------------------------------ 6. check it as MemPalace would
begin "smoke check as $app_user over TLS"
docker_cli cp "$container:/var/lib/postgresql/data/tls/ca.crt" "$state/ca.crt"
escaped=${app_password//\\/\\\\}
escaped=${escaped//:/\\:}
(umask 077; printf 'localhost:%s:*:%s:%s\n' "$port" "$app_user" "$escaped" >"$state/pgpass")
export PGPASSFILE="$state/pgpass"
py="$repo/.venv/bin/python"
[[ -x "$repo/.venv/bin/mempalace-pg" ]] || py=$(bash scripts/setup-venv.sh | tail -n 1)
log "DSN: $dsn (password from PGPASSFILE=$PGPASSFILE)"
smoke_config=$(mktemp -d)
MEMPALACE_PG_DSN="$dsn" MEMPALACE_CONFIG_DIR="$smoke_config" "$py" scripts/docker_smoke.py >&2 \
    || { rm -rf "$smoke_config"; die "the smoke check failed (above)"; }
end "smoke check"
begin "mempalace-pg doctor as $app_user"
MEMPALACE_PG_DSN="$dsn" MEMPALACE_CONFIG_DIR="$smoke_config" "$(dirname "$py")/mempalace-pg" doctor >&2 \
    || { rm -rf "$smoke_config"; die "mempalace-pg doctor found a problem (above)"; }
rm -rf "$smoke_config"
end "doctor"

# ------------------------------------------------------------------ 7. the same through PgBouncer
begin "PgBouncer (profile pooler): up, healthy, smoke check and doctor through it"
(umask 077; printf 'localhost:%s:*:%s:%s\n' "$pooler_port" "$app_user" "$escaped" >>"$state/pgpass")
compose --profile pooler up -d --no-build pgbouncer >&2
bouncer=$(compose --profile pooler ps -q pgbouncer)
status=""
for _ in $(seq 60); do
    status=$(docker_cli inspect -f '{{.State.Health.Status}}' "$bouncer" 2>/dev/null || echo gone)
    [[ "$status" == healthy || "$status" == gone ]] && break
    sleep 1
done
if [[ "$status" != healthy ]]; then
    compose --profile pooler logs --tail 40 pgbouncer >&2 || true
    die "the pgbouncer container is not healthy (health: $status)"
fi
# Transaction pooling: what needs a session of its own (the index folder) goes to the server's own port.
smoke_config=$(mktemp -d)
MEMPALACE_PG_DSN="$pooler_dsn" MEMPALACE_PG_SESSION_DSN="$dsn" MEMPALACE_CONFIG_DIR="$smoke_config" \
    "$py" scripts/docker_smoke.py >&2 || { rm -rf "$smoke_config"; die "the smoke check through PgBouncer failed (above)"; }
MEMPALACE_PG_DSN="$pooler_dsn" MEMPALACE_PG_SESSION_DSN="$dsn" MEMPALACE_CONFIG_DIR="$smoke_config" \
    "$(dirname "$py")/mempalace-pg" doctor >&2 \
    || { rm -rf "$smoke_config"; die "mempalace-pg doctor through PgBouncer found a problem (above)"; }
rm -rf "$smoke_config"
end "PgBouncer"

if [[ "$action" == test ]]; then
    [[ $# -gt 0 ]] || set -- tests/integration/test_contract.py tests/integration/test_graph_integration.py \
        tests/integration/test_backup.py
    # The backup tests want the server's own pg_dump/pg_restore on PATH (Debian 12's are 15, older than
    # the server): these run them in the db container, over its TCP port with TLS verify-full, with libpq's
    # environment passed through and the password put in the environment, never on a command line.
    tool_bin="$state/bin"
    mkdir -p "$tool_bin"
    for tool in pg_dump pg_restore; do
        cat >"$tool_bin/$tool" <<EOF
#!/bin/sh
# Written by scripts/docker-stack.sh: $tool of the db container's PostgreSQL, for the tests.
if [ -z "\${PGPASSWORD:-}" ]; then
    if [ "\${PGUSER:-}" = postgres ]; then var=POSTGRES_PASSWORD; else var=MEMPALACE_APP_PASSWORD; fi
    PGPASSWORD=\$(sed -n "s/^\$var=//p" "$env_file" | tail -n 1)
fi
export PGPASSWORD
# a file argument (pg_restore --jobs reads its dump itself) is copied into the container for the call
n=0
for arg in "\$@"; do
    shift
    case "\$arg" in
        /*) if [ -f "\$arg" ]; then
                n=\$((n + 1))
                $docker_bin cp "\$arg" "$container:/tmp/mempalace-pg-tool-\$\$-\$n" >/dev/null || exit 1
                arg=/tmp/mempalace-pg-tool-\$\$-\$n
            fi ;;
    esac
    set -- "\$@" "\$arg"
done
$docker_bin exec -i \\
    -e PGHOST=localhost -e PGPORT=$port -e PGUSER -e PGDATABASE -e PGSSLMODE -e PGPASSWORD -e PGOPTIONS \\
    -e PGSSLROOTCERT=/var/lib/postgresql/data/tls/ca.crt "$container" $tool "\$@"
status=\$?
[ "\$n" -eq 0 ] || $docker_bin exec "$container" sh -c "rm -f /tmp/mempalace-pg-tool-\$\$-*"
exit \$status
EOF
        chmod +x "$tool_bin/$tool"
    done
    export PATH="$tool_bin:$PATH"
    # Test set-up that needs a superuser (a database, a role: tests/integration/conftest.py's pg_admin_dsn)
    # connects as the container's postgres, over the same TLS, with its password in a passfile of its own
    # named in the DSN; the code under test never sees it (its PGPASSFILE has the application role only).
    pg_password=$(sed -n 's/^POSTGRES_PASSWORD=//p' "$env_file" | tail -n1)
    [[ -n "$pg_password" ]] || die "docker/.env has no POSTGRES_PASSWORD"
    escaped=${pg_password//\\/\\\\}
    escaped=${escaped//:/\\:}
    (umask 077; printf 'localhost:%s:*:postgres:%s\n' "$port" "$escaped" >"$state/pgpass-admin")
    admin_dsn="postgresql://postgres@localhost:$port/$app_db?sslmode=verify-full&sslrootcert=$state/ca.crt"
    admin_dsn+="&passfile=$state/pgpass-admin"
    # MemPalace's own knowledge-graph tests ship in its sdist (as scripts/test.sh does)
    MEMPALACE_SDIST=$(bash scripts/mempalace-sdist.sh "$py" | tail -n 1)
    export MEMPALACE_SDIST
    # The DSNs hold no password (passfiles have them): pytest prints a failing test's arguments, the DSN
    # among them.
    begin "pytest $* (as $app_user over TLS)"
    test_status=0
    MEMPALACE_PG_TEST_DSN="$dsn" MEMPALACE_PG_TEST_ADMIN_DSN="$admin_dsn" \
        MEMPALACE_PG_TEST_STACK="docker-$MEMPALACE_PG_IMAGE_STACK" \
        "$py" -m pytest -p no:cacheprovider "$@" || test_status=$?
    end "pytest"
    log "DSN used: $dsn (PGPASSFILE=$PGPASSFILE)"
    exit $test_status
fi
log "the stack is up. DSN (password in PGPASSFILE=$PGPASSFILE):"
echo "$dsn"
