"""The index folder under faults: killed with SIGKILL mid-build, its backend terminated mid-build, the
server restarted mid-build, killed right after a merge's switch.

A build whose folder is gone stops within seconds (the server checks the client while the CREATE INDEX
runs: client_connection_check_interval) instead of running on holding the collection's locks; a folder
whose connection was cut exits at once. Afterwards, with no new write, the next search (from another
process) starts a folder that sweeps what the dead one left: once the palace is quiet no INVALID or
unregistered index remains, and every drawer is found by its own vector."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time

import psycopg
import pytest
from psycopg import sql

from mempalace_pg.engine import builds, indexing
from tests.integration.conftest import TEST_EF_CONSTRUCTION
from tests.integration.test_indexing import random_drawers, waiting


def _building(conn, schema: str, pk: int) -> tuple[int, float] | None:
    """(pid, seconds it has run) of the folder backend running a CREATE INDEX on collection ``pk``, if
    one is: its leader, not a parallel worker, and not the build of another test's collection (their
    folders may still be rebuilding in the same schema)."""
    return conn.execute(
        "SELECT pid, extract(epoch FROM now() - query_start)::float FROM pg_stat_activity "
        "WHERE application_name = %s AND state = 'active' AND backend_type = 'client backend' "
        "AND query ILIKE 'CREATE INDEX%%' AND query LIKE %s",
        (indexing.folder_application_name(schema), f'%."records_c{int(pk)}" USING%'),
    ).fetchone()


class Reader:
    """A thread searching the collection every 50 ms until :meth:`stop`: how many searches answered
    with the drawer itself, and every error that was not the plugin's (a driver's, raw)."""

    def __init__(self, col, vecs):
        import threading

        from mempalace_pg.errors import BackendError

        self.answers, self.raw, self._plugin_errors = 0, [], BackendError
        self._stop = threading.Event()
        self._col, self._vecs = col, vecs
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.wait(0.05):
            i = (i + 7) % 1000
            try:
                got = self._col.query(query_embeddings=[self._vecs[i].tolist()], n_results=1).ids
                self.answers += got == [[f"d{i}"]]
            except self._plugin_errors:
                pass  # the server restarting: said as the plugin's error, naming the server
            except Exception as exc:  # what the test asserts there is none of
                self.raw.append(f"{type(exc).__module__}.{type(exc).__name__}: {exc}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def _start_folder(pg_session_dsn: str, schema: str, pk: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "MEMPALACE_PG_FOLDER"}
    env[indexing.DSN_VARIABLE] = pg_session_dsn
    return subprocess.Popen(
        [sys.executable, "-m", "mempalace_pg.engine.folder", schema, str(pk)],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _invalid(conn, schema: str, pk: int) -> int:
    """INVALID indexes on collection ``pk``'s table."""
    return conn.execute(
        "SELECT count(*) FROM pg_index i WHERE i.indrelid = to_regclass(%s) AND NOT i.indisvalid",
        (f'"{schema}".records_c{int(pk)}',),
    ).fetchone()[0]


SEARCH = """
import sys
from mempalace.backends import PalaceRef
from mempalace_pg.store.backend import PostgresBackend
path, vector = sys.argv[1], [float(x) for x in sys.argv[2].split(",")]
ref = PalaceRef(id=path, local_path=path)
col = PostgresBackend().get_collection(palace=ref, collection_name="mempalace_drawers", create=False)
print(col.query(query_embeddings=[vector], n_results=1).ids[0][0])
"""


def _quiet(conn, schema: str, pk: int) -> tuple:
    """What keeps the collection from being settled: (rows waiting, unregistered segment indexes, INVALID
    indexes, young segments, a build running); all zero / None once it is."""
    young = conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE collection_pk = %s AND young").format(
            sql.Identifier(schema, "vector_segments")
        ),
        (pk,),
    ).fetchone()[0]
    return (
        waiting(conn, schema, pk)[0],
        len(indexing.orphan_indexes(conn, schema, pk)),
        _invalid(conn, schema, pk),
        young,
        _building(conn, schema, pk),
    )


def _search_then_settle(pg_dsn: str, schema: str, pk: int, palace: str, vecs, fault: float) -> float:
    """A search from a new process (which exits at once), then no write: seconds from ``fault`` until the
    collection is settled (:func:`_quiet`: nothing waits for the index, no INVALID or unregistered index
    remains, no segment is young, no build runs)."""
    env = {k: v for k, v in os.environ.items() if k != "MEMPALACE_PG_FOLDER"}
    vector = ",".join(repr(float(x)) for x in vecs[1])
    done = subprocess.run(
        [sys.executable, "-c", SEARCH, palace, vector], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.split() == ["d1"], done.stderr[-3000:]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        deadline = time.monotonic() + 240
        while True:
            state = _quiet(conn, schema, pk)
            if state == (0, 0, 0, 0, None):
                return time.monotonic() - fault
            assert time.monotonic() < deadline, state
            time.sleep(0.25)


def _restart_or_cut(pg_dsn: str) -> None:
    """Restart the server when the test runner says how (scripts/test.sh does for the servers it
    provisions); otherwise end every session of this database that this role may end."""
    restart = os.environ.get("MEMPALACE_PG_TEST_RESTART")
    if restart:
        started = "SELECT pg_postmaster_start_time()"
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            before = conn.execute(started).fetchone()[0]
        subprocess.run(shlex.split(restart), check=True, capture_output=True, timeout=120)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert conn.execute(started).fetchone()[0] > before, f"{restart!r} did not restart the server"
        return
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND datname = current_database() AND pg_has_role(usesysid, 'USAGE')"
        )


@pytest.mark.parametrize("fault", ["kill", "terminate", "restart"])
def test_a_folder_that_dies_mid_build(
    fault, pg_dsn, pg_session_dsn, pg_schema, make_collection, monkeypatch, tmp_path, full_index_settings
):
    """``kill``: the folder gets SIGKILL; its build stops within seconds. ``terminate``: its backend is
    terminated; ``restart``: the server restarts; the folder exits within seconds either way. Then the
    next search settles the palace."""
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # the test starts the folder itself
    col = make_collection()
    pk = col.partition.pk
    vecs = random_drawers(col, 12_000, 384, seed=11)  # a quiet palace: the folder builds it whole
    reader = Reader(col, vecs)
    restarted = 0.0
    proc = _start_folder(pg_session_dsn, pg_schema, pk)
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 120
            seen = None
            while time.monotonic() < deadline:
                seen = _building(conn, pg_schema, pk)
                if seen and seen[1] >= 1.0:  # a build well under way
                    break
                assert proc.poll() is None, f"the folder ended (exit {proc.returncode}) before a long build"
                time.sleep(0.05)
            assert seen and seen[1] >= 1.0, "no folder build ran for a second"
            fault_at = time.monotonic()
            if fault == "kill":
                os.killpg(proc.pid, signal.SIGKILL)
            elif fault == "terminate":
                conn.execute("SELECT pg_terminate_backend(%s)", (seen[0],))
        if fault == "restart":
            _restart_or_cut(pg_dsn)
            restarted = time.monotonic() - fault_at  # the connection was cut somewhere in there
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (seen[0],)).fetchone():
                assert time.monotonic() - fault_at < 10, "the dead folder's build still runs after 10 s"
                time.sleep(0.05)
            stopped = time.monotonic() - fault_at
        proc.wait(timeout=30)
        exited = time.monotonic() - fault_at
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    # CONNECTION_CHECK_MS apart, plus the build's own interrupt checks (a restart: once it is done)
    stopped, exited = stopped - restarted, exited - restarted
    assert stopped < 5, f"the build ran on {stopped:.1f} s after its folder was killed"
    if fault != "kill":  # a folder whose connection was cut exits at once: it has nothing to tidy
        assert exited < 3, f"the folder took {exited:.1f} s to exit after its connection was cut"
    monkeypatch.delenv("MEMPALACE_PG_FOLDER")
    # The build interrupted was at full length; the one that settles the palace need not be (at full
    # settings it took most of the test's time).
    monkeypatch.setenv("MEMPALACE_PG_EF_CONSTRUCTION", TEST_EF_CONSTRUCTION)
    settled = _search_then_settle(pg_dsn, pg_schema, pk, str(tmp_path / "palace"), vecs, fault_at)
    reader.stop()
    # a reader searching all along saw answers, or (the server restarting) the plugin's own error
    assert reader.raw == [] and reader.answers > 10, (reader.raw[:3], reader.answers)
    print(f"{fault}: build stopped {stopped:.1f} s, settled {settled:.1f} s after the fault")
    for i in range(0, 12_000, 997):  # every drawer of a sample found by its own vector
        assert col.query(query_embeddings=[vecs[i].tolist()], n_results=1).ids == [[f"d{i}"]]


MERGE_THEN_DIE = """
import os, signal, sys
from mempalace_pg.engine import folder
schema, pk, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conn = folder.connect_folder(os.environ["MEMPALACE_PG_FOLDER_DSN"], schema)
f = folder.Folder(conn, schema, pk)
f.merge(f.segment_rows(), dim)  # registered: the replaced segments now wait out their grace
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_folder_killed_right_after_a_merge(
    pg_dsn, pg_session_dsn, pg_schema, make_collection, monkeypatch, tmp_path, full_index_settings
):
    """Killed right after a merge's switch, a folder leaves the segments it replaced (a whole second
    copy of the index) with no folder running and no row waiting; the next search, from a new process,
    starts a folder that sweeps them."""
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    col = make_collection()
    pk = col.partition.pk
    vecs = random_drawers(col, 3000, 16, seed=12)
    from mempalace_pg.engine import folder

    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        f = folder.Folder(conn, pg_schema, pk)
        for _ in range(2):  # two segments of 1,500 rows
            f.fold(indexing.read_layout(conn, pg_schema, pk), 16, 1500)
        assert len(f.segment_rows()) == 2
    env = {k: v for k, v in os.environ.items() if k != "MEMPALACE_PG_FOLDER"}
    env[indexing.DSN_VARIABLE] = pg_session_dsn
    child = subprocess.run(
        [sys.executable, "-c", MERGE_THEN_DIE, pg_schema, str(pk), "16"],
        env=env,
        capture_output=True,
        timeout=120,
    )
    fault_at = time.monotonic()
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-3000:]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert len(indexing.orphan_indexes(conn, pg_schema, pk)) == 2  # the replaced pair, unregistered
        assert waiting(conn, pg_schema, pk)[0] == 0
    monkeypatch.delenv("MEMPALACE_PG_FOLDER")
    settled = _search_then_settle(pg_dsn, pg_schema, pk, str(tmp_path / "palace"), vecs, fault_at)
    print(f"merge then kill: settled {settled:.1f} s after the fault")
    for i in range(0, 3000, 101):
        assert col.query(query_embeddings=[vecs[i].tolist()], n_results=1).ids == [[f"d{i}"]]
