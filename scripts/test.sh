#!/usr/bin/env bash
# Run the whole mempalace-pg test suite on a fresh Debian machine, doing all its own set-up:
#   0. install the host packages every step needs (scripts/host-packages.sh; among them Debian's
#      python3.11-doc and postgresql-doc-15, the real text some tests read), then start, in the
#      background, provisioning each stack's server (step 5) and building the homelab image (step 7),
#      which then run beside steps 1-5 instead of before them;
#   1. create .venv and install the package with its test dependencies (MemPalace and ruff pinned);
#   2. lint: ruff check and ruff format --check over the code, the tests, benchmarks, scripts, migrations;
#   3. the unit tier (tests/unit), once, with no database: with it the layer rules (test_layers.py) and
#      the docs' links, code blocks and benchmark outputs (test_docs.py);
#   4. fetch MemPalace's sdist, whose own knowledge-graph tests run against the AGE graph;
#   5. provision PostgreSQL with pgvector and Apache AGE (scripts/provision-postgres.sh) for each stack,
#      and run the integration tier (tests/integration) against each server, the stacks side by side
#      (MEMPALACE_PG_SIDE_BY_SIDE=off: one after the other): as its superuser on trixie,
#      and on sid as a least-privilege application role (no superuser, CREATEDB or CREATEROLE) that
#      scripts/as_app_role.py makes for the run with `mempalace-pg db bootstrap --app-role`, in a database
#      of its own, both dropped afterwards (the tests' set-up that needs a superuser gets it through
#      MEMPALACE_PG_TEST_ADMIN_DSN); so every run covers both;
#   6. the pooler tier, per stack: PgBouncer in transaction pooling mode in front of that server
#      (scripts/provision-pgbouncer.sh), and the contract, graph, retrieval, unit-of-work and index
#      tests again through it (what needs a session goes to the server: MEMPALACE_PG_SESSION_DSN).
#   6b. the release tier, once: `python -m build`, the sdist's contents, the wheel installed into a clean venv
#      outside the repository beside MemPalace from PyPI, and the demo's smoke run there against the first
#      stack's server (scripts/release-check.sh);
#   7. the docker tier: build and boot the homelab image (docker/, Debian 13 stack) and run the contract,
#      graph and backup tests against it as its application role (no superuser), over TCP with a password
#      and TLS verify-full, after `mempalace-pg doctor` says ok (scripts/docker-stack.sh test); then remove
#      the containers, network and volume, and stop the Docker engine if this run started it
#      (scripts/docker-stack.sh stop). Only when the run has no pytest arguments and no
#      MEMPALACE_PG_TEST_DSN of yours; MEMPALACE_PG_DOCKER=off skips it (e.g. a machine without root).
#   The release and docker tiers start when the first stack's integration tier ends and run beside each
#   other and the pooler tiers (their output follows at the end).
# A failed lint fails the run, after the tests have run, so one finding does not hide their results.
#
#   scripts/test.sh                         # both stacks: Debian 13 (PG 17, AGE 1.5) and sid (PG 18, AGE 1.8)
#   MEMPALACE_PG_STACKS=trixie scripts/test.sh     # one stack
#   MEMPALACE_PG_TEST_DSN=postgresql://... scripts/test.sh   # your own server (pgvector + AGE) instead
#   scripts/test.sh -k filters              # arguments go to pytest, run per stack instead of the tiers
#                                           # (both tiers, or the paths you give); no docker tier
#   MEMPALACE_PG_DOCKER=off scripts/test.sh # without the docker tier
#   MEMPALACE_PG_APP_ROLE_STACKS="trixie sid" scripts/test.sh   # the stacks whose integration tier runs as
#                                           # the application role (default sid; none: every one as the
#                                           # superuser; "given" with MEMPALACE_PG_TEST_DSN, a superuser's)
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's line says when it started, in minutes and seconds since the run began (docs/testing.md says
# where the time goes): "[test] 12:34 ...".
at() { printf '%d:%02d' $((SECONDS / 60)) $((SECONDS % 60)); }

stacks="${MEMPALACE_PG_STACKS:-trixie sid}"
app_role_stacks="${MEMPALACE_PG_APP_ROLE_STACKS:-sid}"
docker_tier="${MEMPALACE_PG_DOCKER:-on}"
case "$docker_tier" in on|off) ;; *) echo "[test] MEMPALACE_PG_DOCKER must be on or off" >&2; exit 2 ;; esac
[[ $# -eq 0 ]] || docker_tier=off
if [[ -n "${MEMPALACE_PG_TEST_DSN:-}" ]]; then
    stacks="given"
    docker_tier=off
fi
# Everything the host needs, in one apt transaction, before any two steps run side by side.
host=(python3.11-doc postgresql-doc-15)   # the real text some tests read
[[ "$stacks" == given ]] || host+=(debootstrap)
[[ "$docker_tier" == off ]] || host+=(docker.io docker-compose)
bash scripts/host-packages.sh "${host[@]}"

# The servers and the image are prepared in the background while the venv is made, the lint and the unit
# tier run and the first stack's tests start: a fresh machine spends minutes in debootstrap and apt, most
# of them waiting on the network. Each step is run again in the foreground when its turn comes (at once
# when the background did it), so a background failure is reported there, in order.
prep_logs=$(mktemp -d /tmp/mempalace-pg-prep-XXXXXX)
declare -A prep=()
docker_state="${MEMPALACE_PG_DOCKER_STATE:-/var/tmp/mempalace-pg-docker}"
stop_args=(--engine)   # stop the engine at the end when this run starts it (none of ours answering yet)
if [[ -f "$docker_state/dockerd.pid" ]] && kill -0 "$(cat "$docker_state/dockerd.pid")" 2>/dev/null; then
    stop_args=()
fi
cleanup() {   # on any exit: what still runs in the background, and the docker stack
    local pids
    pids=$(jobs -pr)
    [[ -z "$pids" ]] || kill $pids 2>/dev/null || true
    [[ "$docker_tier" == off ]] || bash scripts/docker-stack.sh stop "${stop_args[@]}" >/dev/null 2>&1 || true
    rm -rf "$prep_logs"
}
trap cleanup EXIT
for stack in $stacks; do
    [[ "$stack" == given ]] && continue
    # stdout (the DSN, with its password) is not kept: the foreground run prints it again
    MEMPALACE_PG_STACK="$stack" bash scripts/provision-postgres.sh >/dev/null 2>"$prep_logs/provision-$stack.log" &
    prep[$stack]=$!
done
if [[ "$docker_tier" == on ]]; then
    MEMPALACE_PG_IMAGE_STACK=trixie bash scripts/docker-stack.sh build >"$prep_logs/docker-build.log" 2>&1 &
    prep[docker]=$!
fi
prepared() {   # wait for the background preparation of $1 (log file $2), if any, and show its log
    [[ -n "${prep[$1]:-}" ]] || return 0
    local rc=0
    wait "${prep[$1]}" || rc=$?
    unset "prep[$1]"
    echo "[test] prepared in the background ($1, rc=$rc):"
    sed 's/^/    /' "$prep_logs/$2" || true
}

py=$(bash scripts/setup-venv.sh | tail -n 1)
bin=$(dirname "$py")

status=0
lint=(mempalace_pg tests benchmarks scripts migrations)
pooler_tier=(tests/integration/test_contract.py tests/integration/test_graph_integration.py
    tests/integration/test_mempalace_kg_suite.py tests/integration/test_retrieval.py
    tests/integration/test_atomic.py tests/integration/test_indexing.py)
echo "[test] $(at) ruff check and ruff format --check: ${lint[*]}"
lint_status=0
"$bin/ruff" check "${lint[@]}" || lint_status=1
"$bin/ruff" format --check "${lint[@]}" || lint_status=1

tiers=0
if [[ $# -eq 0 ]]; then
    tiers=1
    # The unit tier needs no database: run it once, with no DSN in sight.
    echo "[test] $(at) unit tier (no database)"
    env -u MEMPALACE_PG_TEST_DSN "$py" -m pytest -p no:cacheprovider tests/unit || status=$?
    set -- tests/integration
fi

export MEMPALACE_SDIST=$(bash scripts/mempalace-sdist.sh "$py" | tail -n 1)

# One stack's integration tier, then its pooler tier; non-zero when any failed.
run_stack() {
    local stack=$1 failed=0 dsn restart pooler role
    shift
    if [[ "$stack" == given ]]; then
        dsn="$MEMPALACE_PG_TEST_DSN"; restart=""
    else
        echo "[test] $(at) provisioning PostgreSQL ($stack)"
        if ! dsn=$(MEMPALACE_PG_STACK="$stack" bash scripts/provision-postgres.sh | tail -n 1); then
            echo "[test] FAILED: no $stack server (above)" >&2
            return 1
        fi
        # The restart test restarts the server when this shell can see its postmaster; a server reused from
        # another PID namespace is not ours to restart, and the test cuts its connections instead.
        restart=""
        if MEMPALACE_PG_STACK="$stack" bash scripts/provision-postgres.sh status >/dev/null 2>&1; then
            # (without MEMPALACE_PG_TEST_DSN, which makes the script use that server and touch nothing)
            restart="env -u MEMPALACE_PG_TEST_DSN MEMPALACE_PG_STACK=$stack bash scripts/provision-postgres.sh restart"
        fi
    fi
    local as_role=()   # as the role the DSN names; or as a fresh application role, in a database of its own
    role="the role its DSN names"
    if [[ " $app_role_stacks " == *" $stack "* ]]; then
        as_role=("$py" scripts/as_app_role.py)
        role="a fresh application role (scripts/as_app_role.py)"
    fi
    echo "[test] $(at) pytest against the $stack server as $role: $*"
    local order=("$@")
    if [[ $tiers -eq 1 && "$stack" != "$first" ]]; then
        # The stack run beside the first takes the files in the reverse order: each tier has stretches
        # of waiting (a folder's build, a timeout) and stretches of CPU, and in the same order the two
        # tiers' waits fall together, leaving cores idle.
        mapfile -t order < <(printf '%s\n' tests/integration/test_*.py | sort -r)
    fi
    MEMPALACE_PG_TEST_DSN="$dsn" MEMPALACE_PG_TEST_RESTART="$restart" MEMPALACE_PG_TEST_STACK="$stack" \
        "${as_role[@]}" "$py" -m pytest -p no:cacheprovider --durations=30 "${order[@]}" || failed=1
    [[ "$stack" != "$first" ]] || start_last_tiers   # the release and docker tiers, beside the pooler tiers
    if [[ $tiers -eq 1 && "$stack" != given ]]; then
        echo "[test] $(at) pooler tier ($stack): the same tests through PgBouncer, transaction pooling"
        if pooler=$(MEMPALACE_PG_STACK="$stack" bash scripts/provision-pgbouncer.sh | tail -n 1); then
            MEMPALACE_PG_TEST_DSN="$pooler" MEMPALACE_PG_TEST_SESSION_DSN="$dsn" MEMPALACE_PG_TEST_ADMIN_DSN="$dsn" \
                MEMPALACE_PG_TEST_STACK="$stack" "$py" -m pytest -p no:cacheprovider --durations=15 "${pooler_tier[@]}" || failed=1
        else
            echo "[test] FAILED: no PgBouncer in front of the $stack server (above)" >&2
            failed=1
        fi
        MEMPALACE_PG_STACK="$stack" bash scripts/provision-pgbouncer.sh stop || true
    fi
    return $failed
}

# The release and docker tiers, once each (not per stack): started in the background when the first
# stack's integration tier ends, side by side with each other and with the pooler tiers instead of after
# them; their output follows, in order, at the end. Each needs what only this shell can wait for: the
# first stack's server (up since the integration tiers started) and the image built in the background.
release_pid="" docker_pid=""
start_last_tiers() {
    [[ -z "$release_pid$docker_pid" ]] || return 0   # started already
    if [[ $tiers -eq 1 ]]; then
        release_tier >"$prep_logs/release.log" 2>&1 &
        release_pid=$!
    fi
    if [[ "$docker_tier" == on ]]; then
        prepared docker docker-build.log
        docker_tier_run >"$prep_logs/docker.log" 2>&1 &
        docker_pid=$!
    fi
    [[ -z "$release_pid$docker_pid" ]] \
        || echo "[test] $(at) the release and docker tiers run beside the pooler tiers; their output follows when they end"
}
release_tier() {
    local release_dsn
    # The wheel and sdist a user installs, in a clean venv outside the repository.
    echo "[test] $(at) release tier: python -m build, the wheel in a clean venv, the demo's smoke (scripts/release-check.sh)"
    if [[ "$first" == given ]]; then
        release_dsn="$MEMPALACE_PG_TEST_DSN"
    else
        release_dsn=$(MEMPALACE_PG_STACK="$first" bash scripts/provision-postgres.sh 2>/dev/null | tail -n 1) || release_dsn=""
    fi
    MEMPALACE_PG_PYTHON="$py" bash scripts/release-check.sh "$release_dsn"
}
docker_tier_run() {
    local failed=0
    echo "[test] $(at) docker tier: the homelab image (trixie) as its application role (scripts/docker-stack.sh)"
    MEMPALACE_PG_IMAGE_STACK=trixie bash scripts/docker-stack.sh test || failed=1
    if ! bash scripts/docker-stack.sh stop "${stop_args[@]}"; then
        echo "[test] FAILED: scripts/docker-stack.sh stop did not remove the stack" >&2
        failed=1
    fi
    return $failed
}

# The stacks run side by side (each has its own server and PgBouncer; one pytest spends much of its time
# waiting on its server, so two share the cores well): the first in the foreground, its output live; the
# others in the background, their output shown, in order, when they end. MEMPALACE_PG_SIDE_BY_SIDE=off
# runs them one after the other.
for stack in $stacks; do
    prepared "$stack" "provision-$stack.log"   # a background job of this shell: waited for here
done
joined() {   # wait for background job $1, then show its title $2 and its log $3; status 1 when it failed
    local rc=0
    wait "$1" || rc=$?
    echo "[test] $(at) ---- $2 (rc=$rc) ----"
    cat "$prep_logs/$3" || true
    [[ $rc -eq 0 ]] || status=1
}
declare -A beside=()
first=""
for stack in $stacks; do
    if [[ -z "$first" ]]; then
        first=$stack
    elif [[ "${MEMPALACE_PG_SIDE_BY_SIDE:-on}" == on ]]; then
        run_stack "$stack" "$@" >"$prep_logs/stack-$stack.log" 2>&1 &
        beside[$stack]=$!
        echo "[test] the $stack stack runs beside the $first stack; its output follows when it ends"
    fi
done
for stack in $stacks; do
    if [[ -n "${beside[$stack]:-}" ]]; then
        joined "${beside[$stack]}" "the $stack stack, run beside the $first stack" "stack-$stack.log"
    else
        run_stack "$stack" "$@" || status=1
    fi
done
start_last_tiers   # unless started already (not when the first stack stopped before its tests)
[[ -z "$release_pid" ]] || joined "$release_pid" "the release tier, run beside the pooler tiers" release.log
if [[ -n "$docker_pid" ]]; then
    joined "$docker_pid" "the docker tier, run beside the pooler tiers" docker.log
    docker_tier=off   # stopped and removed by the docker tier: nothing left for cleanup
fi
if [[ $lint_status -ne 0 ]]; then
    echo "[test] FAILED: ruff found problems (above); 'ruff check --fix' and 'ruff format' fix many" >&2
    [[ $status -ne 0 ]] || status=1
fi
echo "[test] $(at) done (exit $status)"
exit $status
