"""A folder that dies mid-build stops its build: the server checks that the folder is still there while
the CREATE INDEX runs (client_connection_check_interval), so a folder killed with SIGKILL does not leave
its build running to the end, holding the collection's locks with nobody to register the index."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg

from mempalace_pg.store import indexing
from tests.integration.test_indexing import random_drawers


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
    random_drawers(col, 20_000, 384, seed=11)  # a quiet palace: the folder builds it whole, seconds long
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
