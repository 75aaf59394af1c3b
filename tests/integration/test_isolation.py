"""Each person (or agent) on one database gets a place of their own, kept apart by PostgreSQL itself.

`mempalace-pg db bootstrap --app-role alice --schema alice` makes a login role (no superuser) and, as
that role, its schema and AGE graph: everything in them is alice's. The mechanism, chosen by measurement
on both stacks (AGE 1.5 and 1.8): a schema per person, whose privileges hold for SQL and for Cypher alike
(AGE reads a graph's label tables through the executor, which checks the schema's USAGE), plus row-level
security on AGE's own catalog (sql/bootstrap/03_graph_catalog.sql), since every role that makes its
graph holds INSERT/UPDATE/DELETE on ag_catalog.ag_graph and ag_label. Row-level security on the drawers
themselves is not needed (and AGE 1.5 does not honour it for Cypher).

The test: alice does normal work as herself (mine with the real CLI, search, the knowledge graph, the MCP
tools); bob, with the same privileges on his own schema, cannot read, count, search, alter or delete
anything of hers, through the plugin, plain SQL on every relation and function of her schemas, Cypher,
or AGE's catalog; her palace is intact afterwards. In a database of its own, so the catalog policies
apply there only.

On a server whose pgvector overflows in parallel HNSW builds (before 0.8.2, CVE-2026-3172: any role may
run one on a table of its own and read other relations' data) the bootstrap refuses a second palace role,
saying why and what to upgrade; the tests then make it with `--accept-known-defect`, so that the rest of
the isolation is still proven there. Which branch runs follows the server's own pgvector version.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from run_cli import run_cli

from mcp_client import pg_server, stdio_session, text_of
from palace_pair import Palace

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "corpus"
QUESTION = "what happens when the power goes out"


def _with(dsn: str, **changes) -> str:
    params = conninfo_to_dict(dsn)
    params.update(changes)
    return make_conninfo(**params)


def _bootstrap(admin: str, role: str, schema: str, password: str, *extra: str):
    """`mempalace-pg db bootstrap --app-role ROLE --schema SCHEMA` as the superuser ``admin``."""
    return run_cli(
        "db",
        "bootstrap",
        "--app-role",
        role,
        "--schema",
        schema,
        *extra,
        env={**os.environ, "MEMPALACE_PG_DSN": admin, "MEMPALACE_APP_PASSWORD": password},
    )


OVERFLOW = "parallel-hnsw-build-overflow"


def _parallel_build_unsafe(admin: str) -> bool:
    """Whether the server's pgvector library (the installed package's version) overflows in parallel
    HNSW builds (CVE-2026-3172, fixed in 0.8.2): read from the server, whatever the stack's name."""
    from mempalace_pg.db.defects import version_tuple

    with psycopg.connect(admin) as conn:
        [version] = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    return version_tuple(version) < (0, 8, 2)


def _bootstrap_person(admin: str, role: str, password: str, *extra: str) -> bool:
    """Bootstrap ``role`` with its own schema as a person's palace; returns whether it was refused first.

    On a server whose pgvector overflows in parallel HNSW builds, a role beside another palace role is
    refused, with why and what to upgrade, before anything changes; then made with the override, which
    warns. Elsewhere (or as the first palace role) it is made at once, with no warning."""
    from mempalace_pg.db.defects import palace_roles

    with psycopg.connect(admin) as conn:
        others = [r for r in palace_roles(conn) if r != role]
    refused = _parallel_build_unsafe(admin) and bool(others)
    proc = _bootstrap(admin, role, role, password, *extra)
    if refused:
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        message = proc.stderr
        assert f"refusing to make {role!r} a palace role beside" in message and others[0] in message
        assert "CVE-2026-3172" in message and f"could leak to {role}" in message
        assert "upgrade pgvector to 0.8.2 or newer" in message and "postgresql-18-pgvector" in message
        assert "homelab image" in message and "Nothing was changed" in message
        assert f"--accept-known-defect {OVERFLOW}" in message and "Traceback" not in message
        assert password not in proc.stdout + message and "applied" not in proc.stdout
        with psycopg.connect(admin) as conn:  # nothing was changed: no role, no schema
            assert not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            assert not conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (role,)).fetchone()
        proc = _bootstrap(admin, role, role, password, *extra, "--accept-known-defect", OVERFLOW)
        assert "mempalace-pg: warning:" in proc.stderr and "CVE-2026-3172" in proc.stderr, proc.stderr
        assert "`mempalace-pg doctor` fails until it is fixed" in proc.stderr
    else:
        assert "warning" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert f"belong to {role!r}" in proc.stdout and password not in proc.stdout + proc.stderr
    return refused


@pytest.fixture(scope="module")
def people(pg_admin_dsn):
    tag = uuid.uuid4().hex[:6]
    database = f"iso_{tag}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    admin = _with(pg_admin_dsn, dbname=database)
    who, made = {}, []  # made: every role a test here bootstraps, dropped at the end whatever happened
    try:
        refused = {}
        for person in ("alice", "bob"):
            role, password = f"iso_{person}_{tag}", f"pw {person} {uuid.uuid4().hex}"
            made.append(role)
            refused[person] = _bootstrap_person(admin, role, password, "--connection-limit", "40")
            who[person] = {
                "role": role,
                "schema": role,
                "dsn": _with(admin, user=role, password=password),
                "password": password,
            }
        # bob comes second, beside alice: refused exactly where the server's pgvector has the overflow
        assert refused["bob"] == _parallel_build_unsafe(admin)
        yield {"admin": admin, "made": made, **who}
    finally:
        from mempalace_pg.db import pool

        pool.close_all()
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
            for role in made:  # tagged palace roles left behind would make doctor fail elsewhere
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def _as(monkeypatch, person: dict) -> None:
    from mempalace_pg.db import pool

    pool.close_all()
    monkeypatch.setenv("MEMPALACE_PG_DSN", person["dsn"])
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", person["schema"])


def _denied(conn: psycopg.Connection, statement, params=None) -> str:
    """Run ``statement`` as the connection's role; it must be refused for want of a privilege."""
    try:
        with conn.transaction():
            conn.execute(statement, params)
    except psycopg.errors.InsufficientPrivilege as exc:
        return str(exc)
    raise AssertionError(f"allowed: {statement if isinstance(statement, str) else statement.as_string(conn)}")


def test_the_bootstrap_makes_a_role_that_owns_its_schema_and_graph(people):
    alice = people["alice"]
    with psycopg.connect(people["admin"]) as conn:
        row = conn.execute(
            "SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolconnlimit, "
            "  (SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = %(s)s), "
            "  (SELECT pg_get_userbyid(n.nspowner) FROM ag_catalog.ag_graph g "
            "   JOIN pg_namespace n ON n.oid = g.namespace WHERE g.name = %(g)s), "
            "  (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "   WHERE n.nspname IN (%(s)s, %(g)s) AND pg_get_userbyid(c.relowner) <> %(r)s) "
            "FROM pg_roles r WHERE r.rolname = %(r)s",
            {"s": alice["schema"], "g": alice["schema"] + "_kg", "r": alice["role"]},
        ).fetchone()
    assert row == (False, False, False, 40, alice["role"], alice["role"], 0)
    # both are palace roles, tagged by the bootstrap (counted by doctor from any database)
    from mempalace_pg.db.defects import PALACE_ROLE_TAG, palace_roles

    with psycopg.connect(people["admin"]) as conn:
        assert {alice["role"], people["bob"]["role"]} <= set(palace_roles(conn))
        for person in (alice, people["bob"]):
            comment = conn.execute(
                "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = %s",
                (person["role"],),
            ).fetchone()[0]
            assert comment.startswith(PALACE_ROLE_TAG), comment
    # rerunning it for a role that exists (to set its password again) is never refused, on any server
    again = _bootstrap(people["admin"], alice["role"], alice["schema"], alice["password"])
    assert again.returncode == 0 and "warning" not in again.stderr, again.stderr
    # the override names a known defect, and goes with --app-role
    bogus = _bootstrap(
        people["admin"], alice["role"], alice["schema"], alice["password"], "--accept-known-defect", "x"
    )
    assert bogus.returncode == 2 and "no known defect is called x" in bogus.stderr, bogus.stderr
    alone = run_cli(
        "db",
        "bootstrap",
        "--accept-known-defect",
        OVERFLOW,
        env={**os.environ, "MEMPALACE_PG_DSN": people["admin"]},
    )
    assert alone.returncode == 2 and "goes with the --app-role" in alone.stderr, alone.stderr
    # rerun: the same role and schema are fine; a schema that is someone else's is refused
    again = _bootstrap(people["admin"], people["bob"]["role"], alice["schema"], "x y z")
    assert again.returncode != 0 and f"belongs to {alice['role']!r}" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr
    with psycopg.connect(people["bob"]["dsn"]) as conn:  # refused before anything changed: his password too
        assert conn.execute("SELECT current_user").fetchone()[0] == people["bob"]["role"]


def test_bob_cannot_reach_anything_of_alices(people, monkeypatch, tmp_path, embedding_url):
    from mempalace_pg import unit_of_work
    from mempalace_pg.atomic import open_drawers
    from mempalace_pg.errors import SchemaVersionError

    alice, bob = people["alice"], people["bob"]
    # -- alice works as herself: the real CLI mines her palace, and she adds a fact and searches
    _as(monkeypatch, alice)
    palace = Palace(tmp_path, "postgres", embedding_url)
    palace.env.update(MEMPALACE_PG_DSN=alice["dsn"], MEMPALACE_PG_SCHEMA=alice["schema"])
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    palace.init_and_mine(corpus)
    drawers, kg = open_drawers(str(palace.path), create=False)
    power = next(
        i
        for i, m in zip(*(lambda r: (r.ids, r.metadatas))(drawers.get(include=["metadatas"])))
        if m["source_file"].endswith("power.md")
    )
    kg.add_triple("Homelab NAS", "powered_by", "UPS", source_drawer_id=power)
    kg.close()
    drawn = drawers.count()
    found = palace.cli("search", QUESTION, "--results", "2")
    assert found["rc"] == 0 and "power.md" in found["out"], found["out"]

    async def around(env):
        async with stdio_session(pg_server(palace.path), env) as pg:
            return await pg.result("pg_search_around_entity", entity="Homelab NAS", query=QUESTION)

    answer = anyio.run(around, palace.env)
    assert not answer.is_error and power in text_of(answer), text_of(answer)

    # -- bob, with the same kind of role, through the plugin, MemPalace's CLI and its MCP tools
    _as(monkeypatch, {**bob, "schema": alice["schema"]})
    with pytest.raises(SchemaVersionError, match="may not use schema") as refused:
        with unit_of_work(palace_key="anything"):
            pass
    bob_password = conninfo_to_dict(bob["dsn"])["password"]
    assert "--app-role" in str(refused.value) and bob_password not in str(refused.value)
    as_bob = {**palace.env, "MEMPALACE_PG_DSN": bob["dsn"]}
    searched = palace.cli("search", QUESTION, "--results", "2", env=as_bob)
    assert searched["rc"] != 0 and "power.md" not in searched["out"] and "UPS" not in searched["out"]
    answer = anyio.run(around, as_bob)
    refused_text = text_of(answer)
    assert answer.is_error and power not in refused_text and "UPS" not in refused_text, refused_text

    # -- bob in plain SQL: every relation and function of alice's two schemas, and Cypher
    schemas = (alice["schema"], alice["schema"] + "_kg")
    with psycopg.connect(people["admin"]) as conn:
        relations = conn.execute(
            "SELECT n.nspname, c.relname, c.relkind FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'p', 'v', 'm', 'S')",
            (list(schemas),),
        ).fetchall()
        functions = conn.execute(
            "SELECT n.nspname, p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = ANY(%s)",
            (list(schemas),),
        ).fetchall()
    assert len(relations) > 10 and functions, (relations, functions)
    with psycopg.connect(bob["dsn"], autocommit=True) as conn:
        for nsp, rel, kind in relations:
            name = sql.Identifier(nsp, rel)
            reads = [sql.SQL("SELECT count(*) FROM {}").format(name)]
            if kind == "S":
                reads = [sql.SQL("SELECT nextval({})").format(sql.Literal(f"{nsp}.{rel}"))]
            for statement in reads + [
                sql.SQL("ALTER TABLE {} ADD COLUMN bob int").format(name),
                sql.SQL("DROP TABLE {} CASCADE").format(name),
            ]:
                assert "permission denied" in _denied(conn, statement)
            if kind in ("r", "p"):
                for statement in (
                    sql.SQL("DELETE FROM {}").format(name),
                    sql.SQL("TRUNCATE {}").format(name),
                    sql.SQL("UPDATE {} SET {} = {}").format(name, sql.Identifier("x"), sql.Identifier("x")),
                ):
                    assert "permission denied" in _denied(conn, statement)
        for nsp, fn in functions:
            assert "permission denied" in _denied(
                conn, sql.SQL("SELECT {}()").format(sql.Identifier(nsp, fn))
            )
        graph = sql.Literal(schemas[1])
        for cypher in (
            "MATCH (n) RETURN count(n)",
            "MATCH (n:Entity) RETURN n.name",
            "MATCH (a)-[*1..3]->(b) RETURN b.name",
            "MATCH ()-[f]->() RETURN f",
            "CREATE (:Entity {name: 'bob was here'})",
            "MATCH (n) SET n.name = 'bob'",
            "MATCH (n) DETACH DELETE n",
        ):
            # AGE takes the query only as a dollar-quoted constant (these are the test's own)
            statement = sql.SQL(
                "SELECT * FROM ag_catalog.cypher({}, $$ "
                + cypher.replace("{", "{{").replace("}", "}}")
                + " $$) AS (v ag_catalog.agtype)"
            ).format(graph)
            assert "permission denied" in _denied(conn, statement), cypher
        assert "permission denied" in _denied(
            conn, sql.SQL("SELECT ag_catalog.drop_graph({}, true)").format(graph)
        )
        # AGE's file loaders (before 1.7 they open any file the server can read): the bootstrap revoked
        # them from PUBLIC, so the check of EXECUTE refuses before the function runs
        for loader in ("load_labels_from_file", "load_edges_from_file"):
            assert "permission denied" in _denied(
                conn,
                sql.SQL("SELECT ag_catalog.{}({}, 'Entity', '/nonexistent/mempalace-pg.csv')").format(
                    sql.Identifier(loader), graph
                ),
            )
        # AGE's catalog: bob may register his own graphs there, but change no row of alice's
        mine = "(SELECT graphid FROM ag_catalog.ag_graph WHERE name = %s)"
        assert (
            conn.execute(f"DELETE FROM ag_catalog.ag_label WHERE graph = {mine}", (schemas[1],)).rowcount == 0
        )
        assert (
            conn.execute(
                "UPDATE ag_catalog.ag_graph SET name = 'stolen' WHERE name = %s", (schemas[1],)
            ).rowcount
            == 0
        )
        assert "row-level security" in _denied(
            conn,
            "INSERT INTO ag_catalog.ag_label (name, graph, id, kind, relation, seq_name) "
            "SELECT 'Evil', graphid, 99, 'v', 'pg_class'::regclass, 'x' "
            "FROM ag_catalog.ag_graph WHERE name = %s",
            (schemas[1],),
        )

    # -- backups: alice dumps her own schema and graph; bob cannot dump hers
    major = psycopg.connect(people["admin"]).info.server_version // 10000
    stack = os.environ.get("MEMPALACE_PG_TEST_STACK", "")
    assert stack in ("trixie", "sid"), "needs the provisioned server's own pg_dump (its Debian root)"
    root = Path(os.environ.get("MEMPALACE_PG_ROOT_BASE", "/var/tmp/mempalace-pg")) / stack
    pg_dump = f"chroot {root} /usr/lib/postgresql/{major}/bin/pg_dump"
    dumps = {}
    for name, person in (("alice", alice), ("bob", bob)):
        env = {**os.environ, "MEMPALACE_PG_DSN": person["dsn"], "MEMPALACE_PG_SCHEMA": alice["schema"]}
        dumps[name] = run_cli(
            "backup", str(tmp_path / f"{name}.dump"), "--pg-dump", pg_dump, "--json", env=env
        )
    assert dumps["alice"].returncode == 0, dumps["alice"].stderr
    assert (tmp_path / "alice.dump").stat().st_size > 0
    assert dumps["bob"].returncode != 0 and "may not back up" in dumps["bob"].stderr, dumps["bob"].stderr
    assert "Traceback" not in dumps["bob"].stderr
    assert not (tmp_path / "bob.dump").exists() or (tmp_path / "bob.dump").stat().st_size == 0

    # -- bob's own palace works as alice's does, and alice's is as she left it
    _as(monkeypatch, bob)
    with unit_of_work(palace_key="bob's") as uow:
        uow.add_drawers(ids=["b1"], documents=["bob's own note"], embeddings=[[1.0] * 384])
        uow.add_triple("Bob", "wrote", "Note", source_drawer_id="b1")
    _as(monkeypatch, alice)
    drawers, kg = open_drawers(str(palace.path), create=False)
    try:
        assert drawers.count() == drawn
        assert [f["object"] for f in kg.query_entity("Homelab NAS")] == ["UPS"]
    finally:
        kg.close()
    with psycopg.connect(alice["dsn"]) as conn:
        names = conn.execute(
            sql.SQL(
                "SELECT * FROM ag_catalog.cypher({}, $$ MATCH (n:Entity) RETURN n.name $$) "
                "AS (v ag_catalog.agtype)"
            ).format(sql.Literal(schemas[1]))
        ).fetchall()
    assert '"Homelab NAS"' in {str(v) for (v,) in names} and '"bob was here"' not in {
        str(v) for (v,) in names
    }


def test_a_role_at_its_connection_limit_is_told_so_at_once_without_a_storm(people, monkeypatch):
    """The bootstrap's connection limit holds, and a process that meets it gets the server's reason and
    the fix: at once when it opens the palace, within the pool's wait once the pool is open (which retries
    in the background with growing pauses, not in a loop)."""
    from mempalace_pg import unit_of_work
    from mempalace_pg.config import Settings
    from mempalace_pg.db import pool
    from mempalace_pg.db.pool import Database
    from mempalace_pg.errors import DatabaseUnavailableError

    role, password = f"iso_carol_{uuid.uuid4().hex[:6]}", f"pw {uuid.uuid4().hex}"
    people["made"].append(role)
    # a third palace role: refused like bob on a server with the overflow, then made with the override
    assert _bootstrap_person(people["admin"], role, password, "--connection-limit", "3") == (
        _parallel_build_unsafe(people["admin"])
    )
    carol = {"role": role, "schema": role, "dsn": _with(people["admin"], user=role, password=password)}
    _as(monkeypatch, carol)
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    monkeypatch.setenv("MEMPALACE_PG_POOL_MAX_SIZE", "2")
    monkeypatch.setenv("MEMPALACE_PG_CONNECT_TIMEOUT_S", "2")
    with unit_of_work(palace_key="carol") as uow:
        uow.add_drawers(ids=["c1"], documents=["carol's note"], embeddings=[[1.0, 0.0]])
    pool.close_all()
    held = [psycopg.connect(carol["dsn"]) for _ in range(3)]
    try:
        with pytest.raises(psycopg.OperationalError, match="too many connections for role"):
            psycopg.connect(carol["dsn"])
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError) as refused:
            with unit_of_work(palace_key="carol"):
                pass
        assert time.monotonic() - started < 3
        message = str(refused.value)
        assert "too many connections for role" in message and "CONNECTION LIMIT" in message, message
        assert password not in message
    finally:
        held.pop().close()  # one free: the pool opens its first connection, and the next one is refused
    # the server counts a role's connection until its backend has exited, a moment after the client
    # closed it: wait for that, or the pool's first connection may still meet the limit
    with psycopg.connect(people["admin"], autocommit=True) as admin:
        t0 = time.monotonic()
        while (
            admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s", (role,)).fetchone()[0]
            > 2
        ):
            assert time.monotonic() - t0 < 10, "a closed connection's backend never exited"
            time.sleep(0.05)
    try:
        db = Database.get(Settings.load())
        with db.connection():
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailableError) as refused:
                with db.connection():
                    pass
            waited = time.monotonic() - started
        assert "too many connections for role" in str(refused.value) and 4 < waited < 12, (
            waited,
            refused.value,
        )
        stats = db.pool.get_stats()
        assert stats.get("connections_errors", 0) <= 5, stats  # growing pauses, not a loop
    finally:
        for conn in held:
            conn.close()
        pool.close_all()
    with psycopg.connect(people["admin"], autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(role)))
        conn.execute("SELECT ag_catalog.drop_graph(%s, true)", (f"{role}_kg",))
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
