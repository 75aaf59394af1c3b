#!/usr/bin/env bash
# Run the whole mempalace-pg test suite on a fresh Debian machine, doing all its own set-up:
#   1. provision PostgreSQL with pgvector and Apache AGE (scripts/provision-postgres.sh), for each stack;
#   2. create .venv and install the package with its test dependencies (MemPalace pinned);
#   3. install the real text some tests read (Debian's python3.11-doc and postgresql-doc-15), and fetch
#      MemPalace's sdist, whose own knowledge-graph tests run against the AGE graph;
#   4. run pytest against each server.
#
#   scripts/test.sh                         # both stacks: Debian 13 (PG 17, AGE 1.5) and sid (PG 18, AGE 1.8)
#   MEMPALACE_PG_STACKS=trixie scripts/test.sh     # one stack
#   MEMPALACE_PG_TEST_DSN=postgresql://... scripts/test.sh   # your own server (pgvector + AGE) instead
#   scripts/test.sh -k filters              # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

stacks="${MEMPALACE_PG_STACKS:-trixie sid}"
[[ -n "${MEMPALACE_PG_TEST_DSN:-}" ]] && stacks="given"
py=$(bash scripts/setup-venv.sh | tail -n 1)
bash scripts/real-text.sh python3.11-doc postgresql-doc-15
export MEMPALACE_SDIST=$(bash scripts/mempalace-sdist.sh "$py" | tail -n 1)

status=0
for stack in $stacks; do
    if [[ "$stack" == given ]]; then
        dsn="$MEMPALACE_PG_TEST_DSN"; restart=""
    else
        echo "[test] provisioning PostgreSQL ($stack)"
        dsn=$(MEMPALACE_PG_STACK="$stack" bash scripts/provision-postgres.sh | tail -n 1)
        # The restart test restarts the server when this shell can see its postmaster; a server reused from
        # another PID namespace is not ours to restart, and the test cuts its connections instead.
        restart=""
        if MEMPALACE_PG_STACK="$stack" bash scripts/provision-postgres.sh status >/dev/null 2>&1; then
            restart="env MEMPALACE_PG_STACK=$stack bash scripts/provision-postgres.sh restart"
        fi
    fi
    echo "[test] pytest against the $stack server"
    MEMPALACE_PG_TEST_DSN="$dsn" MEMPALACE_PG_TEST_RESTART="$restart" MEMPALACE_PG_TEST_STACK="$stack" \
        "$py" -m pytest -p no:cacheprovider "$@" || status=$?
done
exit $status
