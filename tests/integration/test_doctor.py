"""`mempalace-pg doctor` against the real server: healthy, a database without AGE, a schema behind the
code, an unreachable server, a non-superuser role."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from run_cli import run_cli


def doctor(*args, env=None):
    proc = run_cli("doctor", *args, env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout + proc.stderr


def checks(output: str) -> dict:
    return {c["name"]: c for c in json.loads(output)["checks"]}


def with_db(dsn: str, **changes) -> str:
    params = conninfo_to_dict(dsn)
    params.update(changes)
    return make_conninfo(**params)


def test_healthy_database(pg_env, pg_dsn, make_collection):
    make_collection().add(
        ids=["a"], documents=["x"], embeddings=[[1.0, 0.0]]
    )  # schema at head, one collection
    code, out = doctor("--json")
    assert code == 0, out
    found = checks(out)
    for name in ("connect", "postgresql", "vector", "age", "age load", "schema", "pool", "palace"):
        assert name in found, name
    assert found["schema"]["status"] == "ok" and found["vector"]["status"] == "ok"
    assert all(c["status"] != "fail" for c in found.values())
    # the test server: its superuser over TCP on loopback, with scram-sha-256 for host connections
    assert found["role"]["status"] == "warn" and "superuser" in found["role"]["finding"]
    assert "db bootstrap --app-role" in found["role"]["fix"]
    assert found["encryption"]["status"] == "ok" and "stays on this machine" in found["encryption"]["finding"]
    assert found["authentication"] == {
        "name": "authentication",
        "status": "ok",
        "finding": f"the server asks {conninfo_to_dict(pg_dsn)['user']} for a password at 127.0.0.1",
        "fix": None,
    }
    password = conninfo_to_dict(pg_dsn).get("password")
    assert password and password not in out
    code, text = doctor()
    assert code == 0 and "mempalace-pg doctor:" in text and "***" in text and password not in text


def test_database_without_age_says_what_to_run(pg_dsn, pg_env):
    name = f"doctor_noage_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        dsn = with_db(pg_dsn, dbname=name)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
        code, out = doctor("--json", env={"MEMPALACE_PG_DSN": dsn})
        assert code == 1
        found = checks(out)
        assert found["age"]["status"] == "fail"
        assert "CREATE EXTENSION age" in found["age"]["fix"] and name in found["age"]["fix"]
        assert found["schema"]["status"] == "warn" and "mempalace-pg db upgrade" in found["schema"]["fix"]
        code, text = doctor(env={"MEMPALACE_PG_DSN": dsn})
        assert code == 1 and "[FAIL] age" in text and "fix:" in text
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_schema_behind_the_code(pg_dsn, pg_env, make_collection):
    make_collection()
    schema = os.environ["MEMPALACE_PG_SCHEMA"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        head = conn.execute(f'SELECT version_num FROM "{schema}".alembic_version').fetchone()[0]
        conn.execute(f'UPDATE "{schema}".alembic_version SET version_num = %s', ("0002_knowledge_graph",))
    try:
        code, out = doctor("--json")
        assert code == 1
        assert checks(out)["schema"]["fix"] == "mempalace-pg db upgrade"
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'UPDATE "{schema}".alembic_version SET version_num = %s', (head,))


def test_unreachable_server(pg_env):
    dsn = "postgresql://someone:hunter2secret@127.0.0.1:1/nowhere"
    code, out = doctor("--json", env={"MEMPALACE_PG_DSN": dsn})
    assert code == 1
    found = checks(out)
    assert found["connect"]["status"] == "fail" and "127.0.0.1:1/nowhere" in found["connect"]["finding"]
    assert "hunter2secret" not in out
    assert set(found) <= {"connect", "palace"}  # nothing else is attempted without a connection


def test_non_superuser_role(pg_dsn, pg_env, make_collection):
    make_collection()
    role, password = f"doc_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}' NOSUPERUSER")
    try:
        code, out = doctor("--json", env={"MEMPALACE_PG_DSN": with_db(pg_dsn, user=role, password=password)})
        found = checks(out)
        assert found["connect"]["status"] == "ok" and role in found["connect"]["finding"]
        # a plain role cannot LOAD 'age'; the provisioned server has AGE under $libdir/plugins
        assert found["age load"]["status"] == "ok" and "plugins" in found["age load"]["finding"]
        assert found["role"] == {
            "name": "role",
            "status": "ok",
            "finding": f"{role} is not a superuser",
            "fix": None,
        }
        assert password not in out
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_palace_marker_pointing_elsewhere(pg_env, make_collection, tmp_path):
    col = make_collection("elsewhere")
    palace = col._palace.local_path
    code, out = doctor("--json", "--palace", palace)
    assert checks(out)["palace"]["status"] == "ok" and code == 0
    code, out = doctor("--json", "--palace", palace, env={"MEMPALACE_PG_SCHEMA": "some_other_schema"})
    assert code == 1 and checks(out)["palace"]["status"] == "fail"


def test_graph_left_behind_by_a_dropped_schema(pg_dsn, pg_env):
    schema = f"doc_left_{uuid.uuid4().hex[:6]}"
    env = {"MEMPALACE_PG_SCHEMA": schema}
    subprocess.run(
        [sys.executable, "-m", "mempalace_pg.cli", "db", "upgrade"],
        check=True,
        capture_output=True,
        env={**os.environ, **env},
    )
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')  # the graph's own schema and AGE's catalog row stay
    try:
        code, out = doctor("--json", env=env)
        found = checks(out)
        assert code == 1 and found["schema"]["status"] == "fail"
        assert f"drop_graph('{schema}_kg', true)" in found["schema"]["fix"]
        # following the fix makes the schema creatable again
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("SELECT ag_catalog.drop_graph(%s, true)", (f"{schema}_kg",))
        subprocess.run(
            [sys.executable, "-m", "mempalace_pg.cli", "db", "upgrade"],
            check=True,
            capture_output=True,
            env={**os.environ, **env},
        )
        code, out = doctor("--json", env=env)
        assert checks(out)["schema"]["status"] == "ok"
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
                (f"{schema}_kg",),
            )


def test_a_server_that_trusts_connections_is_warned(pg_dsn, pg_env):
    """The provisioned server trusts its Unix socket (initdb --auth-local=trust): doctor, pointed at the
    socket, finds it lets the role in without a password."""
    from pathlib import Path

    stack = os.environ.get("MEMPALACE_PG_TEST_STACK", "")
    assert stack in ("trixie", "sid"), (
        "needs the provisioned server (scripts/provision-postgres.sh), whose socket trusts"
    )
    socket_dir = Path(os.environ.get("MEMPALACE_PG_ROOT_BASE", "/var/tmp/mempalace-pg")) / stack / "tmp"
    port = conninfo_to_dict(pg_dsn)["port"]
    assert (socket_dir / f".s.PGSQL.{port}").exists(), socket_dir
    code, out = doctor("--json", env={"MEMPALACE_PG_DSN": with_db(pg_dsn, host=str(socket_dir))})
    found = checks(out)
    assert found["authentication"]["status"] == "warn", found["authentication"]
    assert "without a password (trust authentication)" in found["authentication"]["finding"]
    assert "scram-sha-256" in found["authentication"]["fix"]
    assert found["encryption"]["status"] == "ok" and str(socket_dir) in found["encryption"]["finding"]
    assert conninfo_to_dict(pg_dsn)["password"] not in out
