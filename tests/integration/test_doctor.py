"""`mempalace-pg doctor` against the real server: healthy, a database without AGE, a schema behind the
code, an unreachable server, a non-superuser role."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
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
    # a test palace's indexes fit the server's shared_buffers; the migration or the bootstrap made
    # pg_prewarm, which warms each new segment
    with psycopg.connect(pg_dsn) as conn:
        shared = conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()[0]
    assert found["memory"]["status"] == "ok"
    assert found["memory"]["finding"].endswith(f"fit in shared_buffers ({shared // 2**20:,} MB)")
    assert found["prewarm"]["status"] == "ok", found["prewarm"]
    # the provisioned servers and the Docker image preload pg_prewarm, whose worker any role sees
    assert found["autoprewarm"]["status"] == "ok", found["autoprewarm"]
    assert found["autoprewarm"]["finding"].startswith("autoprewarm reads"), found["autoprewarm"]
    # the test server over TCP on loopback, with scram-sha-256 for host connections, as its superuser (a
    # warning, and how to make an application role) or as such a role (scripts/as_app_role.py)
    with psycopg.connect(pg_dsn) as conn:
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]
        password = conn.info.password  # the DSN's, or its passfile's
    if superuser:
        assert found["role"]["status"] == "warn" and "superuser" in found["role"]["finding"]
        assert "db bootstrap --app-role" in found["role"]["fix"]
    else:
        assert found["role"]["status"] == "ok" and "is not a superuser" in found["role"]["finding"]
    assert found["encryption"]["status"] == "ok" and "stays on this machine" in found["encryption"]["finding"]
    assert found["authentication"] == {
        "name": "authentication",
        "status": "ok",
        "finding": f"the server asks {conninfo_to_dict(pg_dsn)['user']} for a password at 127.0.0.1",
        "fix": None,
    }
    assert password and password not in out
    code, text = doctor()
    assert code == 0 and "mempalace-pg doctor:" in text and password not in text
    assert "***" in text or "password" not in conninfo_to_dict(pg_dsn)  # a password in the DSN shows as ***


def test_database_without_age_says_what_to_run(pg_dsn, pg_admin_dsn, pg_env):
    name = f"doctor_noage_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        dsn = with_db(pg_dsn, dbname=name)
        with psycopg.connect(with_db(pg_admin_dsn, dbname=name), autocommit=True) as conn:
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
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
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


def test_non_superuser_role(pg_dsn, pg_admin_dsn, pg_env, make_collection):
    make_collection()
    role, password = f"doc_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
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
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
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
    with psycopg.connect(pg_dsn) as conn:  # the DSN's password, or its passfile's
        assert conn.info.password and conn.info.password not in out


def test_palace_check_after_init_backend_postgres(pg_env, tmp_path):
    """What `mempalace --backend postgres init` leaves the palace check to say: a config.json MemPalace
    3.11 wrote without the hooks (only the backend: the palace is named nowhere), and one written with
    them (the palace named, not created until its first write)."""
    config = Path(os.environ["MEMPALACE_CONFIG_DIR"]) / "config.json"
    config.write_text(json.dumps({"backend": "postgres"}))
    code, out = doctor("--json")
    found = checks(out)["palace"]
    assert found["status"] == "warn" and "names no palace_path" in found["finding"], found
    assert str(config) in found["fix"] and "mempalace serve --palace" in found["fix"]

    palace = tmp_path / "palace"
    palace.mkdir()
    config.write_text(json.dumps({"palace_path": str(palace), "backend": "postgres"}))
    code, out = doctor("--json")
    found = checks(out)["palace"]
    assert found["status"] == "warn" and "is set to the postgres backend" in found["finding"], found
    assert "Backend open failed" in found["finding"] and found["fix"].startswith("mempalace mine")


#: The known defects by version, written out here on their own (not read from mempalace_pg.db.defects),
#: so that the test says which versions doctor must name them for: (extension, key) -> fixed in.
FIXED_IN = {
    ("vector", "parallel-hnsw-build-overflow"): (0, 8, 2),
    ("vector", "hnsw-vacuum-corruption"): (0, 8, 4),
    ("age", "merge-bugs"): (1, 6, 0),
    ("age", "no-row-level-security-in-cypher"): (1, 7, 0),
    ("age", "load-from-file-unchecked"): (1, 7, 0),
    ("age", "no-merge-on-create-set"): (1, 8, 0),
    ("age", "vle-fails-on-standby"): (1, 8, 0),
}
OVERFLOW = "vector: parallel-hnsw-build-overflow"


def server_versions(dsn: str) -> dict:
    """The extension libraries the server has: pg_available_extensions.default_version (the installed
    package's, which is the code the server runs; extversion may lag behind it)."""
    with psycopg.connect(dsn) as conn:
        return dict(
            conn.execute(
                "SELECT name, default_version FROM pg_available_extensions WHERE name IN ('vector', 'age')"
            ).fetchall()
        )


def as_tuple(version: str) -> tuple:
    return tuple(int(p) for p in version.split("~")[0].split("."))


def test_doctor_names_the_defects_of_the_versions_found(pg_env, pg_dsn, make_collection):
    make_collection().add(ids=["a"], documents=["x"], embeddings=[[1.0, 0.0]])
    versions = server_versions(pg_dsn)
    expected = {
        f"{ext}: {key}"
        for (ext, key), fixed in FIXED_IN.items()
        if ext in versions and as_tuple(versions[ext]) < fixed
    }
    code, out = doctor("--json")
    found = checks(out)
    named = {name for name, c in found.items() if "defect" in c}
    assert named == expected, (versions, named)
    for name in named:
        check, (ext, key) = found[name], name.split(": ")
        defect = check["defect"]
        assert defect["key"] == key and defect["extension"] == ext and defect["version"] == versions[ext]
        assert defect["fixed_in"] == ".".join(map(str, FIXED_IN[(ext, key)]))
        assert defect["what"] and defect["consequence"] and defect["reference"]
        assert defect["fix"] == check["fix"] and check["fix"].startswith("upgrade ")
        assert versions[ext] in check["finding"] and f"fixed in {defect['fixed_in']}" in check["finding"]
        # a warning, but for the overflow once two palace roles share the server (the next test)
        assert check["status"] == ("fail" if name == OVERFLOW and len(defect["palace_roles"]) > 1 else "warn")
    assert all("defect" not in c for n, c in found.items() if n not in named)  # the other checks as they were
    for ext in ("vector", "age"):
        count = sum(n.startswith(f"{ext}: ") for n in named)
        tail = f"{count} known defect(s) of {versions[ext]}, below" if count else "no known defects"
        assert found[ext]["status"] == "ok" and found[ext]["finding"].endswith(tail), found[ext]
    if OVERFLOW in named:
        assert "CVE-2026-3172" in found[OVERFLOW]["finding"] and "0.8.2" in found[OVERFLOW]["fix"]
    code, text = doctor()
    for name in named:
        assert f"] {name}: " in text
    if not named:  # a server with fixed extensions (Debian sid's): nothing of the kind is said
        assert "known defect" not in text.replace("no known defects", "")


def test_two_palace_roles_fail_where_pgvector_overflows(pg_env, pg_dsn, pg_admin_dsn, make_collection):
    """A palace role: no superuser, tagged by `db bootstrap --app-role` (a comment on the role) or owning
    a schema with mempalace-pg's tables. Two of them beside pgvector < 0.8.2 make doctor fail, naming
    them and what to upgrade, also when it runs as one of them; with a fixed pgvector that is no failure."""
    from mempalace_pg.db.defects import PALACE_ROLE_TAG, palace_roles

    make_collection().add(ids=["a"], documents=["x"], embeddings=[[1.0, 0.0]])
    unsafe = as_tuple(server_versions(pg_dsn)["vector"]) < (0, 8, 2)
    tag = uuid.uuid4().hex[:6]
    tagged, owner, password = f"doc_tagged_{tag}", f"doc_owner_{tag}", uuid.uuid4().hex
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        before = palace_roles(conn)
    try:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            # the first: as the bootstrap tags its roles (sql/bootstrap/02_app_role.sql)
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER PASSWORD {}").format(
                    sql.Identifier(tagged), sql.Literal(password)
                )
            )
            conn.execute(
                sql.SQL("COMMENT ON ROLE {} IS {}").format(
                    sql.Identifier(tagged), sql.Literal(f"{PALACE_ROLE_TAG}: made by a test")
                )
            )
        code, out = doctor("--json")
        one = checks(out).get(OVERFLOW)
        if unsafe:
            assert tagged in one["defect"]["palace_roles"], one
            assert one["status"] == ("fail" if before else "warn"), one
            if not before:
                assert f"the one palace role here is {tagged}" in one["finding"]
                assert "refuses a second" in one["finding"] and code == 0
        else:
            assert one is None and code == 0, out

        # the second: owns a palace schema (made here by the superuser, in a schema that is the role's)
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN NOSUPERUSER").format(sql.Identifier(owner)))
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                    sql.Identifier(owner), sql.Identifier(owner)
                )
            )
        subprocess.run(
            [sys.executable, "-m", "mempalace_pg.cli", "db", "upgrade"],
            check=True,
            capture_output=True,
            env={**os.environ, "MEMPALACE_PG_DSN": pg_admin_dsn, "MEMPALACE_PG_SCHEMA": owner},
        )
        with psycopg.connect(pg_dsn) as conn:
            assert {tagged, owner} <= set(palace_roles(conn))
        as_tagged = {"MEMPALACE_PG_DSN": with_db(pg_dsn, user=tagged, password=password)}
        for env in ({}, as_tagged):  # as the superuser, and as a palace role (no superuser)
            code, out = doctor("--json", env=env)
            found = checks(out)
            if unsafe:
                check = found[OVERFLOW]
                assert code == 1 and check["status"] == "fail", check
                assert {tagged, owner} <= set(check["defect"]["palace_roles"])
                assert tagged in check["finding"] and owner in check["finding"]
                assert "palace roles share this server" in check["finding"]
                assert "CVE-2026-3172" in check["finding"] and "read the other's drawers" in check["finding"]
                assert "upgrade pgvector to 0.8.2 or newer" in check["fix"]
                assert "postgresql-18-pgvector" in check["fix"]
            else:
                assert OVERFLOW not in found
                assert not [c for c in found.values() if "defect" in c and c["status"] == "fail"]
                if not env:
                    assert code == 0, out
        if unsafe:
            code, text = doctor()
            assert code == 1 and f"[FAIL] {OVERFLOW}: " in text and tagged in text
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(owner)))
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
                (f"{owner}_kg",),
            )
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            for role in (tagged, owner):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
