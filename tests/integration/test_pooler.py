"""The plugin through a real PgBouncer in transaction pooling mode (scripts/provision-pgbouncer.sh, 1.24
from the Debian root, three server connections for all its clients), in front of the test server.

Transaction pooling hands each transaction to whichever server connection is free, so session state
neither survives between statements nor stays put: it leaks to the pooler's other clients. These tests
check that the plugin recognises the pooler, leaves no state behind on the server connections, keeps a
unit of work one transaction under concurrent writer processes, sends what needs a session (the index
folder, bulk loads) to MEMPALACE_PG_SESSION_DSN, and says what it needs when that is not set. The
contract, graph and retrieval tests also run whole through this pooler (scripts/test.sh, its pooler
tier).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from run_cli import run_cli

from palace_pair import Palace

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "corpus"
SETTINGS = ("search_path", "statement_timeout", "hnsw.ef_search", "hnsw.iterative_scan")


def _provision_env(**env) -> dict:
    """The environment for scripts/provision-*.sh: the stack's own server, provisioned or reused as its
    superuser, whatever MEMPALACE_PG_TEST_DSN names (the application role, maybe: scripts/as_app_role.py)."""
    stack = os.environ.get("MEMPALACE_PG_TEST_STACK", "")
    assert stack in ("trixie", "sid"), "needs the provisioned server (PgBouncer runs from its root)"
    clean = {k: v for k, v in os.environ.items() if k != "MEMPALACE_PG_TEST_DSN"}
    return {**clean, "MEMPALACE_PG_STACK": stack, **env}


def _pgbouncer(dsn: str, action: str = "start", **env) -> str:
    """PgBouncer in front of the test server; the test's own ``dsn`` (its role, database and password)
    pointed at it. It reaches every database of the server as any role (its ``auth_user`` looks them up)."""
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "provision-pgbouncer.sh"), action],
        env=_provision_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    if action != "start":
        return ""
    pooler = conninfo_to_dict(proc.stdout.strip().splitlines()[-1])
    dsn = make_conninfo(dsn, host=pooler["host"], port=pooler["port"])
    with psycopg.connect(dsn, autocommit=True) as conn:
        # a pooler answers the handshake itself: the process id it gives is not the server's
        assert conn.info.backend_pid != conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    return dsn


@pytest.fixture(scope="module")
def pooler_dsn(pg_dsn):
    return _pgbouncer(pg_dsn)


@pytest.fixture(scope="module")
def unprepared_pooler_dsn(pg_dsn):
    """A second PgBouncer that does not carry prepared statements (max_prepared_statements = 0, as every
    PgBouncer before 1.21): a psycopg client that prepares through it fails once a statement it prepared
    on one server connection is run on another."""
    port = {"trixie": "15537", "sid": "15538"}[os.environ.get("MEMPALACE_PG_TEST_STACK", "")]
    settings = {"MEMPALACE_PG_POOLER_PORT": port, "MEMPALACE_PG_POOLER_PREPARED": "0"}
    yield _pgbouncer(pg_dsn, **settings)
    _pgbouncer(pg_dsn, "stop", **settings)


@pytest.fixture
def through_pooler(pooler_dsn, pg_dsn, monkeypatch):
    """The plugin's DSN is the pooler; work that needs a session goes to the server itself."""
    from mempalace_pg.db import pool

    monkeypatch.setenv("MEMPALACE_PG_DSN", pooler_dsn)
    monkeypatch.setenv("MEMPALACE_PG_SESSION_DSN", pg_dsn)
    pool.close_all()
    yield pooler_dsn
    pool.close_all()


def _server_settings(pooler_dsn: str) -> list[dict]:
    """The settings of every server connection the pooler holds: three clients in open transactions at
    once take the pool's three server connections."""
    conns = [psycopg.connect(pooler_dsn) for _ in range(3)]
    try:
        seen = []
        for conn in conns:  # each holds its server connection until the rollback below
            row = conn.execute(
                "SELECT pg_backend_pid(), " + ", ".join("current_setting(%s, true)" for _ in SETTINGS),
                SETTINGS,
            ).fetchone()
            seen.append({"pid": row[0], **dict(zip(SETTINGS, row[1:]))})
        return seen
    finally:
        for conn in conns:
            conn.rollback()
            conn.close()


WRITER = r"""
import json, sys
from mempalace_pg import unit_of_work
from mempalace_pg.retrieval import PalaceSearch
from mempalace_pg.db import pool

worker, rounds = sys.argv[1], int(sys.argv[2])
found = 0
for i in range(rounds):
    with unit_of_work(palace_key="pooled") as uow:
        drawer, note = f"w{worker}-{i}", f"Note {worker}-{i}"
        text = f"note {i} of writer {worker}"
        uow.add_drawers(ids=[drawer], documents=[text], embeddings=[[1.0, float(i)]])
        uow.add_triple(f"Writer {worker}", "wrote", note, source_drawer_id=drawer)
        uow.add_triple("Shared Shelf", "holds", note, source_drawer_id=drawer)
    search = PalaceSearch(palace_key="pooled")
    around = search.around_entity(f"Writer {worker}", [1.0, float(i)], n_results=50)
    found = max(found, len(around["hits"]))
pool.close_all()
print(json.dumps({"worker": worker, "found": found}))
"""


def test_writers_through_the_pooler_keep_units_whole_and_leave_no_state(through_pooler, pg_dsn, pg_schema):
    from mempalace_pg.atomic import open_drawers
    from mempalace_pg.config import Settings
    from mempalace_pg.db import pool
    from mempalace_pg.db.pool import Database

    # Processes of their own, as MemPalace's mine and MCP servers are: 6 writers over 3 server connections.
    env = dict(os.environ)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(w), "15"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(6)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-3000:]
        results.append(json.loads(out))
    assert all(r["found"] == 15 for r in results), results  # each writer's drawers, found around its entity

    assert Database.get(Settings.load()).behind_pooler
    pool.close_all()
    os.environ["MEMPALACE_PG_DSN"] = pg_dsn  # counted on the server itself (monkeypatch restores it)
    drawers, kg = open_drawers(palace_key="pooled", create=False)
    try:
        assert drawers.count() == 90  # every unit whole, none twice
        shelf = kg.query_entity("Shared Shelf")
        assert len(shelf) == 90 and len({f["object"] for f in shelf}) == 90  # one shared entity, 90 facts
        assert all(len(kg.query_entity(f"Writer {w}")) == 15 for w in range(6))
    finally:
        kg.close()
        pool.close_all()

    # Nothing the plugin set is left on the pooler's server connections for its other clients: the
    # server's defaults (pgvector's when it is loaded there), not the plugin's ef_search 150 and
    # relaxed_order iterative scans.
    with psycopg.connect(pg_dsn) as fresh:
        path, timeout = fresh.execute(
            "SELECT current_setting('search_path'), current_setting('statement_timeout')"
        ).fetchone()
    seen = _server_settings(through_pooler)
    assert len({s["pid"] for s in seen}) == 3
    for server in seen:
        assert (server["search_path"], server["statement_timeout"]) == (path, timeout), server
        assert server["hnsw.ef_search"] in (None, "40") and server["hnsw.iterative_scan"] in (None, "off"), (
            server
        )


def test_a_unit_of_work_is_one_transaction_through_the_pooler(through_pooler, pg_dsn, pg_schema):
    from mempalace_pg import unit_of_work

    marker = uuid.uuid4().hex
    with pytest.raises(ValueError):
        with unit_of_work(palace_key="pooled-atomic") as uow:
            uow.add_drawers(ids=[marker], documents=["half a unit"], embeddings=[[0.5, 0.5]])
            uow.add_triple("Half", "of", "Unit", source_drawer_id=marker)
            raise ValueError("the caller fails after two writes")
    from mempalace_pg.atomic import open_drawers

    drawers, kg = open_drawers(palace_key="pooled-atomic", create=False)
    try:
        assert drawers.get(ids=[marker]).ids == [] and kg.query_entity("Half") == []
    finally:
        kg.close()


def test_mine_and_search_through_the_pooler_with_the_folder_direct(
    embedding_url, tmp_path, through_pooler, pg_dsn
):
    """A user's path: `mempalace mine` through PgBouncer, the folder it starts indexes the rows over the
    session DSN, and `mempalace search` from another process finds them through PgBouncer, and directly."""
    from mempalace_pg.atomic import open_drawers

    palace = Palace(tmp_path, "postgres", embedding_url)
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    palace.init_and_mine(corpus)
    drawers, kg = open_drawers(str(palace.path), create=False)
    try:
        layout = drawers.partition.index.settle(timeout=120)
        assert layout.segments and not layout.has_tail  # the folder ran, over the direct connection
    finally:
        kg.close()
    found = palace.cli("search", "what happens when the power goes out", "--results", "2")
    assert found["rc"] == 0 and "power.md" in found["out"], found["out"]
    # The marker names the pooler's address; the server itself holds the palace, so it opens there too
    # (a pooler added in front of a palace later, or taken away, changes nothing for it).
    direct = palace.cli(
        "search",
        "what happens when the power goes out",
        "--results",
        "2",
        env={**palace.env, "MEMPALACE_PG_DSN": pg_dsn},
    )
    assert direct == found

    doctor = run_cli("doctor", "--json", env={**palace.env})
    report = json.loads(doctor.stdout)
    [pooler] = [c for c in report["checks"] if c["name"] == "pooler"]
    assert pooler["status"] == "ok" and "transaction pooling" in pooler["finding"], pooler
    with psycopg.connect(pg_dsn) as conn:  # the DSN's password, or its passfile's
        password = conn.info.password
    assert password and password not in json.dumps(report)


def test_without_a_session_dsn_searches_stay_exact_and_bulk_work_says_what_it_needs(
    pooler_dsn, monkeypatch, caplog, make_collection
):
    from mempalace_pg.config import ConfigError
    from mempalace_pg.db import pool

    monkeypatch.setenv("MEMPALACE_PG_DSN", pooler_dsn)
    monkeypatch.delenv("MEMPALACE_PG_SESSION_DSN", raising=False)
    pool.close_all()
    try:
        col = make_collection(name=f"nosession-{uuid.uuid4().hex[:6]}")
        with caplog.at_level(logging.WARNING, logger="mempalace_pg.engine.indexing"):
            col.upsert(ids=["a", "b"], documents=["alpha", "beta"], embeddings=[[1.0, 0.0], [0.0, 1.0]])
        assert "MEMPALACE_PG_SESSION_DSN is not set" in caplog.text
        # no folder: the rows wait, searched exactly
        assert col.partition.index.layout(fresh=True, start_folder=True).has_tail
        assert col.query(query_embeddings=[[0.0, 1.0]], n_results=1).ids == [["b"]]
        with pytest.raises(ConfigError) as refused:
            col.run_maintenance("reindex")
        message = str(refused.value)
        assert "MEMPALACE_PG_SESSION_DSN" in message and "connection pooler" in message
        assert "password=***" in message or ":***@" in message or "@" not in message

        doctor = run_cli("doctor", "--json", env={**os.environ})
        [pooler] = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "pooler"]
        assert pooler["status"] == "warn" and "MEMPALACE_PG_SESSION_DSN" in pooler["fix"], pooler
    finally:
        pool.close_all()


def test_through_a_pooler_that_carries_no_prepared_statements_none_are_made(
    unprepared_pooler_dsn, pooler_dsn, pg_dsn, monkeypatch
):
    """psycopg prepares a statement run five times; a pooler that passes the name through would then be
    asked to run it on a server connection that never saw it. The plugin checks once per connection and
    prepares nothing there, and six writers with their searches run clean; doctor says what to set."""
    from mempalace_pg.db import pool
    from mempalace_pg.db.pool import pooler_carries_prepared_statements

    with (
        psycopg.connect(unprepared_pooler_dsn, autocommit=True) as bare,
        psycopg.connect(pooler_dsn, autocommit=True) as carrying,
    ):
        assert not pooler_carries_prepared_statements(bare)
        assert pooler_carries_prepared_statements(carrying)
        # the probe left no statement of ours behind on the server connection for the next client
        names = [r[0] for r in bare.execute("SELECT name FROM pg_prepared_statements")]
        assert not [n for n in names if n.startswith("_pg3_")], names

    # The control: plain psycopg clients, preparing as psycopg does, fail through this pooler.
    failures: list[str] = []

    def naive():
        with psycopg.connect(unprepared_pooler_dsn, autocommit=True) as conn:
            for i in range(30):
                try:
                    conn.execute("SELECT %s::int + 1", (i,)).fetchone()
                except psycopg.Error as exc:
                    failures.append(type(exc).__name__)

    threads = [threading.Thread(target=naive) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {"InvalidSqlStatementName", "DuplicatePreparedStatement"} & set(failures), failures

    monkeypatch.setenv("MEMPALACE_PG_DSN", unprepared_pooler_dsn)
    monkeypatch.setenv("MEMPALACE_PG_SESSION_DSN", pg_dsn)
    pool.close_all()
    key = f"unprepared-{uuid.uuid4().hex[:6]}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER.replace('"pooled"', repr(key)), str(w), "12"],
            env=dict(os.environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for w in range(6)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-3000:]
        assert json.loads(out)["found"] == 12

    doctor = run_cli("doctor", "--json", env=dict(os.environ))
    checks = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "pooler"]
    assert any(c["status"] == "warn" and "max_prepared_statements" in (c["fix"] or "") for c in checks), (
        checks
    )
    pool.close_all()
