"""A palace read through a hot standby of its database: a real streaming replica of the test server
(scripts/provision-standby.sh: pg_basebackup -R into the same Debian root, its own port).

MemPalace's `mempalace search`, MemPalace's MCP read tools and this plugin's pg_* tools answer there as
on the primary, for a palace directory whose marker names the primary; nothing is written there (no
schema upgrade, no folder process), and every write is refused with an error that says to use the
primary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from run_cli import run_cli

from mcp_client import mempalace_server, pg_server, stdio_session, text_of
from palace_pair import Palace

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "corpus"


@pytest.fixture(scope="module")
def standby_dsn(pg_dsn):
    stack = os.environ.get("MEMPALACE_PG_TEST_STACK", "")
    assert stack in ("trixie", "sid"), "needs the provisioned server (a standby is made of it in its root)"
    # The script copies the stack's own server as its superuser, whatever MEMPALACE_PG_TEST_DSN names (the
    # application role, maybe: scripts/as_app_role.py); the test reads there as its own role, in its database.
    env = {k: v for k, v in os.environ.items() if k != "MEMPALACE_PG_TEST_DSN"}
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "provision-standby.sh")],
        env={**env, "MEMPALACE_PG_STACK": stack},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    replica = conninfo_to_dict(proc.stdout.strip().splitlines()[-1])
    dsn = make_conninfo(pg_dsn, host=replica["host"], port=replica["port"])
    ident = "SELECT system_identifier FROM pg_control_system()"
    with psycopg.connect(pg_dsn) as primary, psycopg.connect(dsn) as standby:
        assert standby.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
        assert primary.execute(ident).fetchone() == standby.execute(ident).fetchone()  # a copy of this one
    yield dsn
    # A standby left running would outlive the suite (scripts/test.sh stops only what it started).
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "provision-standby.sh"), "stop"],
        env={**env, "MEMPALACE_PG_STACK": stack},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _caught_up(pg_dsn: str, standby_dsn: str, timeout: float = 60) -> None:
    """Wait until the standby has replayed everything the primary has written so far."""
    with psycopg.connect(pg_dsn, autocommit=True) as primary:
        lsn = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    deadline = time.time() + timeout
    with psycopg.connect(standby_dsn, autocommit=True) as standby:
        while not standby.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
            assert time.time() < deadline, "the standby did not catch up"
            time.sleep(0.1)


def test_a_palace_read_through_a_standby(embedding_url, tmp_path, pg_env, pg_dsn, pg_schema, standby_dsn):
    palace = Palace(tmp_path, "postgres", embedding_url)
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    palace.init_and_mine(corpus)
    from mempalace_pg.atomic import open_drawers

    drawers, kg = open_drawers(str(palace.path), create=False)
    rows = drawers.get(include=["metadatas"])
    power = next(i for i, m in zip(rows.ids, rows.metadatas) if m["source_file"].endswith("power.md"))
    kg.add_triple("Homelab NAS", "powered_by", "UPS", source_drawer_id=power)
    kg.close()
    _caught_up(pg_dsn, standby_dsn)

    primary = palace.env
    replica = {**palace.env, "MEMPALACE_PG_DSN": standby_dsn}
    question = "what happens when the power goes out"

    # MemPalace's own search command, in a new process, on each server
    searched = {
        name: palace.cli("search", question, "--results", "2", env=env)
        for name, env in (("primary", primary), ("standby", replica))
    }
    assert searched["standby"]["rc"] == searched["primary"]["rc"] == 0, searched
    assert searched["standby"] == searched["primary"] and "power.md" in searched["standby"]["out"]

    async def reads(env):
        async with stdio_session(pg_server(palace.path), env) as pg:
            around = await pg.call("pg_search_around_entity", entity="Homelab NAS", query=question, hops=2)
            hybrid = await pg.call("pg_hybrid_search", query="pg_dump restore", limit=3)
        async with stdio_session(mempalace_server(palace.path), env) as mp:
            search = await mp.call("mempalace_search", query=question, limit=3)
            facts = await mp.call("mempalace_kg_query", entity="Homelab NAS")
        return around, hybrid, search, facts

    async def writes(env):
        async with stdio_session(pg_server(palace.path), env) as pg:
            filed = await pg.result("pg_file_memory", wing="corpus", room="x", content="filed on a standby?")
        async with stdio_session(mempalace_server(palace.path), env) as mp:
            added = await mp.call(
                "mempalace_add_drawer", wing="corpus", room="x", content="added on a standby?"
            )
        return filed, added

    on_primary = anyio.run(reads, primary)
    on_standby = anyio.run(reads, replica)
    assert on_standby[0] == on_primary[0] and on_standby[1] == on_primary[1]
    assert on_standby[0]["hits"][0]["id"] == power
    assert [h["source_file"] for h in on_standby[2]["results"]] == [
        h["source_file"] for h in on_primary[2]["results"]
    ]
    assert on_standby[3]["count"] == on_primary[3]["count"] == 1

    filed, added = anyio.run(writes, replica)
    refused = text_of(filed)
    assert filed.is_error, refused
    assert (
        "is read-only" in refused
        and "hot standby" in refused
        and "MEMPALACE_PG_DSN at the primary" in refused
    )
    with psycopg.connect(standby_dsn) as conn:  # the DSN's password, or its passfile's
        password = conn.info.password
    assert password and password not in refused
    assert "***" in refused or "password" not in conninfo_to_dict(standby_dsn)  # a DSN's is shown as ***
    assert added.get("success") is False and "MEMPALACE_PG_DSN at the primary" in str(added), added

    with psycopg.connect(standby_dsn) as conn:  # nothing of ours runs there but the reads: no folder at all
        assert not conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'mempalace-pg folder%'"
        ).fetchone()[0]


def test_a_standby_behind_the_code_says_to_upgrade_the_primary(
    pg_env, pg_dsn, pg_schema, standby_dsn, make_collection
):
    make_collection()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        head = conn.execute(f'SELECT version_num FROM "{pg_schema}".alembic_version').fetchone()[0]
        conn.execute(f'UPDATE "{pg_schema}".alembic_version SET version_num = %s', ("0006_words_and_order",))
    try:
        _caught_up(pg_dsn, standby_dsn)
        proc = run_cli(
            "kg", "stats", "--palace-key", "anything", env={**os.environ, "MEMPALACE_PG_DSN": standby_dsn}
        )
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, out
        assert "read-only hot standby" in out and "`mempalace-pg db upgrade` against the primary" in out, out
        assert "Traceback" not in out
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'UPDATE "{pg_schema}".alembic_version SET version_num = %s', (head,))


def test_a_palace_opened_against_another_server_is_told_where_it_lives(
    pg_env, pg_dsn, make_collection, tmp_path, monkeypatch
):
    """Only a standby may stand in for the marker's server: settings pointing at an address where no
    server answers get the marker's own message, not a connection error."""
    from mempalace.backends import PalaceRef
    from mempalace.backends.base import BackendMismatchError

    from mempalace_pg.store.backend import PostgresBackend

    make_collection(name="where")
    palace_dir = str(tmp_path / "where")
    monkeypatch.setenv("MEMPALACE_PG_DSN", make_conninfo(pg_dsn, port="1", connect_timeout="2"))
    backend = PostgresBackend()
    try:
        with pytest.raises(BackendMismatchError, match="lives in PostgreSQL at port=.*point at port="):
            backend.get_collection(
                palace=PalaceRef(id=palace_dir, local_path=palace_dir), collection_name="mempalace_drawers"
            )
    finally:
        backend.close()
