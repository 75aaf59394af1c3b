"""The homelab stack (docker/) without a Docker engine: the bootstrap SQL it runs, applied to a fresh
database on the test server, then normal work as its least-privilege role; and the compose file and
Dockerfile checked for what the stack promises."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import psycopg
import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from run_cli import run_cli

from mempalace_pg.db import defects

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"


@pytest.fixture
def fresh_database(pg_admin_dsn):
    """A new database, as the superuser: what the homelab's initdb runs the bootstrap as."""
    name = f"stack_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    params = conninfo_to_dict(pg_admin_dsn)
    params["dbname"] = name
    yield make_conninfo(**params)
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def _as(dsn: str, **changes) -> str:
    params = conninfo_to_dict(dsn)
    params.update(changes)
    return make_conninfo(**params)


def test_bootstrap_then_normal_work_as_the_app_role(fresh_database, tmp_path, monkeypatch):
    role, password = f"mp_app_{uuid.uuid4().hex[:6]}", 'pa\'ss "word" $1 ;--'  # quoting is psql's job
    env = {**os.environ, "MEMPALACE_PG_DSN": fresh_database, "MEMPALACE_APP_PASSWORD": password}

    def run(*a):
        return run_cli(*a, env=env)

    # The test server may hold another palace role (the suite's own, when it runs as the application role:
    # scripts/as_app_role.py); on a server whose defects let palace roles reach each other's palaces the
    # bootstrap then refuses a second one unless told the risk is known, which for a test role it is.
    accept = [a for d in defects.DEFECTS if d.isolation for a in ("--accept-known-defect", d.key)]
    try:
        for _ in range(2):  # idempotent
            proc = run("db", "bootstrap", "--app-role", role, *accept)
            assert proc.returncode == 0, proc.stderr
            assert (
                "01_extensions.sql, 02_app_role.sql" in proc.stdout
                and password not in proc.stdout + proc.stderr
            )
        app = _as(fresh_database, user=role, password=password)
        with psycopg.connect(app, autocommit=True) as conn:
            assert conn.execute(
                "SELECT rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = current_user"
            ).fetchone() == (False, False, False)
            assert {r[0] for r in conn.execute("SELECT extname FROM pg_extension")} >= {"vector", "age"}
            # AGE is preloaded for the role: the Cypher query below runs on a connection that never LOADs it
            settings = conn.execute(
                "SELECT setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole "
                "WHERE r.rolname = current_user"
            ).fetchone()[0]
            assert "session_preload_libraries=age" in settings

        # normal work as the application role: schema and graph made on first use, drawers, facts, Cypher
        monkeypatch.setenv("MEMPALACE_PG_DSN", app)
        monkeypatch.setenv("MEMPALACE_PG_SCHEMA", "mempalace")
        from mempalace_pg import unit_of_work
        from mempalace_pg.db import pool
        from mempalace_pg.retrieval import PalaceSearch

        pool.close_all()
        with unit_of_work(palace_key="homelab") as uow:
            uow.add_drawers(ids=["d1"], documents=["the NAS runs PostgreSQL"], embeddings=[[1.0, 0.0]])
            uow.add_triple("NAS", "runs", "PostgreSQL", source_drawer_id="d1")
        [hit] = PalaceSearch(palace_key="homelab").around_entity("NAS", [1.0, 0.0])["hits"]
        assert hit["id"] == "d1"
        pool.close_all()
        with psycopg.connect(app, autocommit=True) as conn:
            assert (
                conn.execute(
                    "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'mempalace'"
                ).fetchone()[0]
                == role
            )
            rows = conn.execute(
                "SELECT * FROM ag_catalog.cypher('mempalace_kg', $$ MATCH (s:Entity)-[f:Fact]->(o) "
                "RETURN s.name, f.predicate, o.name $$) AS (s agtype, p agtype, o agtype)"
            ).fetchall()
            assert rows == [('"NAS"', '"runs"', '"PostgreSQL"')]
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("CREATE DATABASE not_allowed")
    finally:
        from mempalace_pg.db import pool

        pool.close_all()
        with psycopg.connect(fresh_database, autocommit=True) as conn:
            conn.execute("SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph")
            conn.execute(f"DROP OWNED BY {role} CASCADE")
        with psycopg.connect(_as(fresh_database, dbname="postgres"), autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def test_bootstrap_refuses_bad_input(fresh_database):
    env = {**os.environ, "MEMPALACE_PG_DSN": fresh_database}
    env.pop("MEMPALACE_APP_PASSWORD", None)

    def run(*a):
        return run_cli(*a, env=env)

    proc = run("db", "bootstrap", "--app-role", "mempalace_x")
    assert proc.returncode == 2 and "MEMPALACE_APP_PASSWORD" in proc.stderr
    env["MEMPALACE_APP_PASSWORD"] = "x"
    proc = run("db", "bootstrap", "--app-role", 'bad"; DROP ROLE postgres; --')
    assert proc.returncode == 2 and "not a valid" in proc.stderr.lower()
    proc = run("db", "bootstrap")  # extensions only
    assert proc.returncode == 0 and "02_app_role" not in proc.stdout


def test_trixie_image_takes_security_fixes():
    # debootstrap's trixie lists no -updates or -security suite: the image adds them, then upgrades
    text = (DOCKER / "Dockerfile").read_text()
    script = DOCKER / "apt-sources.sh"
    sources = script.read_text()
    assert '/mempalace-pg/apt-sources.sh "$STACK"' in text and "apt-get full-upgrade -y" in text
    assert "for suite in trixie-updates trixie-security" in sources
    assert "http://deb.debian.org/debian-security" in sources and 'echo "deb $mirror sid main"' in sources
    assert os.access(script, os.X_OK)
    proc = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_an_image_whose_pgvector_has_the_build_overflow_runs_no_parallel_builds_by_default():
    # trixie's postgresql-17-pgvector is 0.8.0 (CVE-2026-3172 in parallel HNSW builds): the image marks it
    # by the installed package's version, and the entrypoint then starts the server with no parallel
    # maintenance workers (a -c given in compose's command still comes after, and wins)
    text = (DOCKER / "Dockerfile").read_text()
    entry = (DOCKER / "entrypoint.sh").read_text()
    assert (
        'dpkg --compare-versions "$vector" lt 0.8.2' in text and "/etc/mempalace-pg/pgvector-defects" in text
    )
    assert 'set -- -c max_parallel_maintenance_workers=0 "$@"' in entry
    assert entry.index("max_parallel_maintenance_workers=0") < entry.index('exec postgres -D "$PGDATA" "$@"')
    assert any(d.key == "parallel-hnsw-build-overflow" for d in defects.defects_of("vector", "0.8.0"))
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "!docker/apt-sources.sh" in ignore


def test_compose_file_promises(pg_dsn):
    compose = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    db = compose["services"]["db"]
    assert (
        db["build"]["context"] == ".." and (ROOT / db["build"]["dockerfile"]).is_file()
    )  # context: the repo
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])
    assert (
        any(v.endswith(":/var/lib/postgresql/data") for v in db["volumes"]) and "pgdata" in compose["volumes"]
    )
    assert db["shm_size"] in ("1gb", "1g") and db["ports"] == ["127.0.0.1:5432:5432"]
    assert (DOCKER / ".env.example").is_file() and db["env_file"] == ".env"
    # every -c setting is a real PostgreSQL setting with a value this server accepts for its kind
    settings = dict(arg.split("=", 1) for arg in db["command"][1:] if arg != "-c")
    assert "maintenance_work_mem" in settings
    # shared_buffers is the entrypoint's, from the container's memory (test_shared_buffers_follow_memory)
    assert "shared_buffers" not in settings
    # the plugin sets a build's parallel workers in that build's session, by the server's pgvector: a
    # server-wide value would only hide what the plugin decides
    assert "max_parallel_maintenance_workers" not in settings
    with psycopg.connect(pg_dsn) as conn:
        for name, value in settings.items():
            row = conn.execute("SELECT vartype, unit FROM pg_settings WHERE name = %s", (name,)).fetchone()
            assert row, f"{name} is not a PostgreSQL setting"
            if row[1] in ("kB", "8kB", "MB"):
                assert conn.execute("SELECT pg_size_bytes(%s) > 0", (value,)).fetchone()[0]
            else:
                int(value)


def test_dockerfile_uses_debian_packages_and_ships_the_bootstrap():
    text = (DOCKER / "Dockerfile").read_text()
    # Debian's own packages, the ones the suite runs against; no registry image but the Debian base, and no
    # syntax directive (it pulls a frontend image)
    assert text.count("FROM debian:trixie-slim") == 1 and ":latest" not in text
    assert not text.lstrip().startswith("# syntax")
    for package in ("postgresql-$pg_major", "postgresql-$pg_major-pgvector", "postgresql-$pg_major-age"):
        assert f'"{package}"' in text
    assert "trixie) pg_major=17" in text and "sid) pg_major=18" in text
    assert "COPY sql/bootstrap/ /mempalace-pg/sql/bootstrap/" in text and "HEALTHCHECK" in text
    entrypoint = DOCKER / "entrypoint.sh"
    script = entrypoint.read_text()
    assert "bootstrap_sql=/mempalace-pg/sql/bootstrap" in script
    for name in ("01_extensions.sql", "02_app_role.sql"):
        assert f"$bootstrap_sql/{name}" in script and (ROOT / "sql" / "bootstrap" / name).is_file()
    assert "scram-sha-256" in script and "ssl = on" in script
    for path in (entrypoint, DOCKER / "pgbouncer-entrypoint.sh"):
        assert os.access(path, os.X_OK)
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_shared_buffers_follow_the_memory_the_container_is_given(tmp_path):
    """The entrypoint's sizing, run by bash on this machine's /proc/meminfo and cgroup files: a quarter of
    the container's limit, else of the machine's memory, from 128MB to 8GB; MEMPALACE_PG_SHARED_BUFFERS
    wins; the setting goes before the command's own -c (which then wins too)."""
    script = (DOCKER / "entrypoint.sh").read_text()
    functions = script[script.index("memory_bytes() {") : script.index('mkdir -p "$base"')]
    total = (
        int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal:")).split()[1]) * 1024
    )

    def size(**env) -> str:
        proc = subprocess.run(
            ["bash", "-c", functions + "shared_buffers_size"],
            capture_output=True,
            text=True,
            env={"PATH": os.environ["PATH"], **env},
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    limit = Path("/sys/fs/cgroup/memory.max")
    given = limit.read_text().strip() if limit.is_file() else "max"
    memory = min(int(given), total) if given.isdigit() else total
    assert size() == f"{min(8192, max(128, memory // 4 // 2**20))}MB"
    assert size(MEMPALACE_PG_SHARED_BUFFERS="3GB") == "3GB"
    assert script.index('set -- -c "shared_buffers=$(shared_buffers_size)" "$@"') < script.index(
        'exec postgres -D "$PGDATA" "$@"'
    )


def test_the_image_and_the_provisioned_servers_preload_pg_prewarm(pg_dsn):
    """autoprewarm brings shared buffers back after a restart (bench_restart): the image's entrypoint puts
    it before the command's -c settings, which still win; the server under test runs its worker (the
    Docker tier's smoke check asks the image's server the same)."""
    script = (DOCKER / "entrypoint.sh").read_text()
    assert script.index('set -- -c shared_preload_libraries=pg_prewarm "$@"') < script.index(
        'exec postgres -D "$PGDATA" "$@"'
    )
    assert (
        "shared_preload_libraries = 'pg_prewarm'" in (ROOT / "scripts" / "provision-postgres.sh").read_text()
    )
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute(
            "SELECT COALESCE(current_setting('pg_prewarm.autoprewarm', true) = 'on', false)"
        ).fetchone()[0]
