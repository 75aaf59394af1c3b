"""A folder that dies mid-build stops its build: the server checks that the folder is still there while
the CREATE INDEX runs (client_connection_check_interval), so a folder killed with SIGKILL does not leave
its build running to the end, holding the collection's locks with nobody to register the index. The next
search starts a folder that sweeps what the dead one left: no INVALID or unregistered index remains once
the palace is quiet, and every drawer is found by its own vector."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg

from mempalace_pg.store import builds, indexing
from tests.integration.test_indexing import random_drawers, waiting


def _building(conn, schema: str) -> tuple[int, float] | None:
    """(pid, seconds it has run) of the schema's folder backend running a CREATE INDEX, if one is."""
    return conn.execute(
        "SELECT pid, extract(epoch FROM now() - query_start)::float FROM pg_stat_activity "
        "WHERE application_name = %s AND state = 'active' AND query ILIKE 'CREATE INDEX%%'",
        (indexing.folder_application_name(schema),),
    ).fetchone()


def test_a_folder_killed_mid_build_stops_its_build_within_seconds(
    pg_dsn, pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # the test starts the folder itself
    col = make_collection()
    pk = col.partition.pk
    vecs = random_drawers(
        col, 20_000, 384, seed=11
    )  # a quiet palace: the folder builds it whole, seconds long
    env = {k: v for k, v in os.environ.items() if k != "MEMPALACE_PG_FOLDER"}
    env[indexing.DSN_VARIABLE] = pg_session_dsn
    proc = subprocess.Popen(
        [sys.executable, "-m", "mempalace_pg.store.folder", pg_schema, str(pk)],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 120
            seen = None
            while time.monotonic() < deadline:
                seen = _building(conn, pg_schema)
                if seen and seen[1] >= 1.0:  # a build well under way
                    break
                assert proc.poll() is None, f"the folder ended (exit {proc.returncode}) before a long build"
                time.sleep(0.05)
            assert seen and seen[1] >= 1.0, "no folder build ran for a second"
            os.killpg(proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (seen[0],)).fetchone():
                assert time.monotonic() - killed < 10, "the killed folder's build still runs after 10 s"
                time.sleep(0.05)
            stopped = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # CONNECTION_CHECK_MS apart, plus the build's own interrupt checks
    assert stopped < 5, f"the build ran on {stopped:.1f} s after its folder was killed"

    # -- afterwards: a search (from this process, folders on again) starts the next folder ------------
    monkeypatch.delenv("MEMPALACE_PG_FOLDER")
    assert col.query(query_embeddings=[vecs[0].tolist()], n_results=1).ids == [["d0"]]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 180
        while True:
            left = builds.orphan_indexes(conn, pg_schema, pk)
            invalid = conn.execute(
                "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT i.indisvalid",
                (pg_schema,),
            ).fetchone()[0]
            if waiting(conn, pg_schema, pk)[0] == 0 and not left and not invalid:
                break
            assert time.monotonic() < deadline, (waiting(conn, pg_schema, pk), left, invalid)
            time.sleep(0.5)
    for i in range(0, 20_000, 997):  # every drawer of a sample found by its own vector
        assert col.query(query_embeddings=[vecs[i].tolist()], n_results=1).ids == [[f"d{i}"]]
