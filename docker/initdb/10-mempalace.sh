#!/bin/sh
# Runs once, when the container initialises an empty data directory (docker-entrypoint-initdb.d):
# the extensions, then the least-privilege application role MemPalace connects as. The SQL is the
# repository's sql/bootstrap/, the same files the test suite applies (tests/integration/test_stack.py).
set -eu
: "${MEMPALACE_APP_PASSWORD:?set MEMPALACE_APP_PASSWORD (docker/.env)}"
run() { psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" "$@"; }
run -f /mempalace-pg/sql/bootstrap/01_extensions.sql
run -v app_role="${MEMPALACE_APP_USER:-mempalace}" -v app_password="$MEMPALACE_APP_PASSWORD" \
    -v app_db="$POSTGRES_DB" -f /mempalace-pg/sql/bootstrap/02_app_role.sql
