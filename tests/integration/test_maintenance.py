"""Maintenance beside a vector index folder that is building a segment (``CREATE INDEX CONCURRENTLY``).

Such a build waits, before it ends, for every transaction older than its snapshot, and holds a lock on
the collection's table that ANALYZE, ALTER and DROP wait for: maintenance that simply waited would
deadlock with it (issue 25 saw ``deadlock detected`` from ``run_maintenance("analyze")`` right after a
100k upsert). Each pairing here starts the same way, a folder mid-build over every row of a fresh
collection, and checks that the maintenance waits or steps aside, never surfaces a raw psycopg error,
and leaves the collection whole. The build's parallel workers follow the server's pgvector
(mempalace_pg/db/defects.py), shown here on the server the suite runs against.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from mempalace.backends import PalaceRef
from psycopg import sql
from server_tools import server_tool

from mempalace_pg.config import Settings
from mempalace_pg.db import defects, locks, schema
from mempalace_pg.engine import builds, indexing, statistics
from mempalace_pg.store.backend import PostgresBackend
from mempalace_pg.tools.backup import backup

CLI = str(Path(sys.executable).parent / "mempalace-pg")
#: Enough rows that the build of their segment takes a few seconds, so each pairing starts mid-build.
ROWS = 12_000
#: Rows whose heap is above min_parallel_table_scan_size (8MB by default), so that PostgreSQL plans a
#: parallel build: few rows with long documents rather than many short ones, so the build stays short.
PARALLEL_ROWS = 8_000
PARALLEL_TEXT = " ".join(f"word{i % 90}" for i in range(180))
DIM = 64


def library_pgvector(dsn: str) -> tuple:
    with psycopg.connect(dsn) as conn:
        return defects.version_tuple(defects.library_version(conn, "vector"))


class Build:
    """What the test saw of the folder's build: the relation, the folder's backend, parallel workers."""

    def __init__(self, dsn: str, schema_name: str, pk: int):
        self.dsn, self.schema, self.pk = dsn, schema_name, pk
        self.relname = f"records_c{pk}"
        self.folder_pid: int | None = None
        self.workers_seen = 0
        self._stop = threading.Event()
        self._watch: threading.Thread | None = None

    def running(self, conn) -> int | None:
        """The pid of the backend building an index on the collection's table now, if any."""
        row = conn.execute(
            "SELECT p.pid FROM pg_stat_progress_create_index p JOIN pg_class c ON c.oid = p.relid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
            (self.schema, self.relname),
        ).fetchone()
        return row[0] if row else None

    def wait_started(self, timeout: float = 60.0) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            deadline = time.monotonic() + timeout
            while (pid := self.running(conn)) is None:
                assert time.monotonic() < deadline, "the folder did not start building within a minute"
                time.sleep(0.02)
        self.folder_pid = pid
        self._watch = threading.Thread(target=self._count_workers, daemon=True)
        self._watch.start()

    def _count_workers(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                n = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE leader_pid = %s AND backend_type = "
                    "'parallel worker'",
                    (self.folder_pid,),
                ).fetchone()[0]
                self.workers_seen = max(self.workers_seen, n)
                if self.running(conn) is None:
                    return
                time.sleep(0.02)

    def still_building(self) -> bool:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return self.running(conn) is not None

    def finish(self) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.join(timeout=120)


def start_build(backend, path, schema_name: str, dsn: str, monkeypatch, rows: int = ROWS, text: str = ""):
    """A fresh collection of ``rows`` rows (each document ending with ``text``) whose folder is mid-build
    of their one segment: (collection, Build). The rows are written with no folder
    (MEMPALACE_PG_FOLDER=off), then a read starts one, which folds the whole quiet tail in one build."""
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    col = backend.get_collection(
        palace=PalaceRef(id=str(path), local_path=str(path)), collection_name="mempalace_drawers", create=True
    )
    rng = np.random.default_rng(25)
    for start in range(0, rows, 4000):
        ids = range(start, min(rows, start + 4000))
        col.upsert(
            ids=[f"d{i}" for i in ids],
            documents=[f"drawer {i} about topic {i % 50} {text}" for i in ids],
            metadatas=[{"wing": f"w{i % 4}", "room": f"r{i % 7}"} for i in ids],
            embeddings=rng.normal(size=(len(ids), DIM)).astype("float32").tolist(),
        )
    monkeypatch.delenv("MEMPALACE_PG_FOLDER")
    build = Build(dsn, schema_name, col.partition.pk)
    # a collection with a tail and no folder gets one
    col.partition.index.layout(fresh=True, start_folder=True)
    build.wait_started()
    return col, build


@pytest.fixture
def building(pg_env, pg_dsn, pg_schema, tmp_path, monkeypatch):
    """start_build's (collection, Build) for a test, in the session's schema."""
    backend = PostgresBackend()
    col, build = start_build(
        backend, tmp_path / f"palace-{uuid.uuid4().hex[:6]}", pg_schema, pg_dsn, monkeypatch
    )
    yield col, build
    build.finish()
    backend.close()


def assert_whole(col, rows: int = ROWS) -> None:
    """Every row searchable through one valid segment, once the folder (or the maintenance) is done."""
    layout = col.partition.index.settle(timeout=300)
    assert layout.segments and not layout.has_tail
    state = col.maintenance_state()
    assert state["rows"] == rows and state["vector_index_valid"] is True, state
    hits = col.query(query_embeddings=[[1.0] * DIM], n_results=3)
    assert len(hits["ids"][0]) == 3
    # the folder was no victim either: a build cancelled by a deadlock leaves its error here
    db = col.database()
    errors = db.run(
        lambda conn: conn.execute(
            sql.SQL("SELECT last_error FROM {} WHERE collection_pk = %s").format(db.ident("vector_folders")),
            (col.partition.pk,),
        ).fetchall()
    )
    assert errors and errors[0][0] is None, errors


def test_builds_use_parallel_workers_only_where_pgvector_is_fixed(
    pg_env, pg_dsn, pg_schema, tmp_path, monkeypatch
):
    backend = PostgresBackend()
    col, build = start_build(
        backend, tmp_path / "parallel", pg_schema, pg_dsn, monkeypatch, PARALLEL_ROWS, PARALLEL_TEXT
    )
    heap = col.database().run(
        lambda conn: conn.execute(
            "SELECT pg_relation_size(%s::regclass)", (f"{pg_schema}.{build.relname}",)
        ).fetchone()[0]
    )
    assert heap > 8 * 1024 * 1024, f"a heap of {heap} bytes: PostgreSQL would plan no parallel build"
    fixed = library_pgvector(pg_dsn) >= (0, 8, 2)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == (
            str(indexing.BUILD_WORKERS) if fixed else "0"
        )
    col.partition.index.settle(timeout=300)
    build.finish()
    if fixed:
        assert build.workers_seen >= 1, "a fixed pgvector builds with the parallel worker it is given"
    else:
        assert build.workers_seen == 0, "a parallel HNSW build ran on a pgvector with CVE-2026-3172"
    assert_whole(col, PARALLEL_ROWS)
    backend.close()


def analyzed_at(col):
    """When the collection's records partition was last analyzed by hand (maintenance or its folder)."""
    return col.database().run(
        lambda conn: conn.execute(
            "SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
            (col.database().schema, col.partition.table_name),
        ).fetchone()[0]
    )


def analyze_asked_at(col):
    db = col.database()
    return db.run(
        lambda conn: conn.execute(
            sql.SQL("SELECT analyze_asked_at FROM {} WHERE collection_pk = %s").format(
                db.ident("vector_folders")
            ),
            (col.partition.pk,),
        ).fetchone()[0]
    )


def wait_analyzed_after(col, asked, timeout: float = 120.0) -> None:
    """Until the request is cleared and the partition's last ANALYZE is later than ``asked`` (statistics
    reach pg_stat_user_tables up to a second after the statement)."""
    deadline = time.monotonic() + timeout
    while analyze_asked_at(col) is not None or (analyzed_at(col) or asked) <= asked:
        assert time.monotonic() < deadline, (analyze_asked_at(col), analyzed_at(col), asked)
        time.sleep(0.2)


def test_analyze_mid_build_returns_and_the_folder_analyzes_after(building):
    """run_maintenance("analyze") does not wait out the folder's build (minutes on a big palace): it
    analyzes the graph's tables, leaves the partition's ANALYZE to the folder, and the folder runs it
    when the build ends, with no deadlock either way."""
    col, build = building
    result = col.run_maintenance("analyze")
    assert result.status == "ran", result
    assert result.stats["table_analyzed_by"] == "the folder, when its index build ends", result
    asked = analyze_asked_at(col)
    assert asked is not None
    wait_analyzed_after(col, asked)
    assert_whole(col)


def test_a_request_left_after_the_build_is_taken_by_the_idle_folder(building):
    """A request that reaches vector_folders just after the folder's build and its own ANALYZE (the race
    maintenance cannot rule out) is taken at the folder's next look."""
    col, build = building
    col.partition.index.settle(timeout=300)
    db = col.database()
    db.run(lambda conn: statistics.ask_after_build(conn, db.schema, col.partition.pk))
    asked = analyze_asked_at(col)
    wait_analyzed_after(col, asked, timeout=30)
    assert_whole(col)


def test_analyze_waits_for_a_bulk_load_holding_the_segments(pg_env, pg_dsn, tmp_path):
    """Where the segments lock is held by something other than the folder (a bulk load, a reindex), the
    caller wants statistics that include its work: analyze waits for it, then analyzes the partition."""
    backend = PostgresBackend()
    col = backend.get_collection(
        palace=PalaceRef(id=str(tmp_path), local_path=str(tmp_path)),
        collection_name="mempalace_drawers",
        create=True,
    )
    col.upsert(
        ids=["a"], documents=["one drawer"], metadatas=[{"wing": "w", "room": "r"}], embeddings=[[1.0] * DIM]
    )
    key = locks.segments_key(col.database().schema, col.partition.pk)
    with psycopg.connect(pg_dsn, autocommit=True) as holder:
        assert locks.try_acquire(holder, key)
        released = threading.Timer(2.0, lambda: locks.release(holder, key))
        released.start()
        t0 = time.monotonic()
        before = holder.execute("SELECT now()").fetchone()[0]
        result = col.run_maintenance("analyze")
        waited = time.monotonic() - t0
        released.join()
    assert result.status == "ran" and "table_analyzed_by" not in result.stats, result
    assert waited >= 1.5, f"analyze returned after {waited:.2f} s while the segments lock was held"
    wait_analyzed_after(col, before, timeout=10)
    backend.close()


def test_reindex_waits_for_the_build_then_rebuilds(building):
    col, build = building
    result = col.run_maintenance("reindex")
    assert result.status == "ran", result
    assert len(col.partition.index.layout(fresh=True, start_folder=True).segments) == 1
    assert_whole(col)


def test_a_bulk_load_waits_for_the_build_then_loads(building):
    col, build = building
    rng = np.random.default_rng(1)
    with col.bulk_load() as load:
        load(
            ids=[f"bulk{i}" for i in range(3000)],
            documents=[f"bulk drawer {i}" for i in range(3000)],
            metadatas=[{"wing": "w0", "room": "r0"}] * 3000,
            embeddings=rng.normal(size=(3000, DIM)).astype("float32").tolist(),
        )
    assert_whole(col, ROWS + 3000)


@pytest.fixture
def building_alone(pg_env, pg_dsn, pg_schema, tmp_path, monkeypatch):
    """building's (collection, Build), in a schema of its own, dropped afterwards: for a test whose
    maintenance reads the whole schema, which in the session's schema would hold every earlier test's
    collections too (a dump of them all took most of such a test's time)."""
    own = f"{pg_schema}_alone"
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", own)
    backend = PostgresBackend()
    col, build = start_build(backend, tmp_path / "alone", own, pg_dsn, monkeypatch)
    yield col, build
    build.finish()
    backend.close()
    schema.drop(Settings.load())


def test_a_backup_mid_build_holds_every_row_and_the_build_goes_on(building_alone, pg_dsn, tmp_path):
    """`mempalace-pg backup` (pg_dump) while the folder builds: the dump's snapshot holds every row, the
    build waits for the dump's snapshot and then finishes (it takes no lock the build holds)."""
    col, build = building_alone
    pg_schema = Settings.load().schema
    path = tmp_path / "mid-build.dump"
    written = backup(str(path), Settings.load(), pg_dump=server_tool(pg_dsn, "pg_dump"))
    assert written["bytes"] > 0 and written["schema"] == pg_schema
    listing = subprocess.run(
        [*shlex.split(server_tool(pg_dsn, "pg_restore")), "--list"],
        stdin=path.open("rb"),
        capture_output=True,
        check=True,
    ).stdout.decode()
    assert f"TABLE DATA {pg_schema} records_c{col.partition.pk} " in listing
    assert_whole(col)


def test_a_schema_upgrade_waits_for_the_build(building, pg_schema, tmp_path):
    """A revision that alters the records tables (as a real one would), applied mid-build through the
    plugin's own upgrade, to a copy of the migrations with that revision on top."""
    col, build = building
    scripts = tmp_path / "migrations"
    shutil.copytree(schema.migrations_dir(), scripts)
    (scripts / "versions" / "9999_alters_records.py").write_text(
        textwrap.dedent(f"""
            from alembic import op

            revision = "9999_alters_records"
            down_revision = "{schema.head_revision()}"
            branch_labels = None
            depends_on = None


            def upgrade() -> None:
                op.execute("ALTER TABLE records ADD COLUMN upgraded_beside_a_build boolean")


            def downgrade() -> None:
                raise NotImplementedError
        """)
    )
    settings = Settings.load()
    assert schema.upgrade(settings, scripts=scripts) == "9999_alters_records"
    assert not build.still_building()
    with psycopg.connect(settings.dsn) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM information_schema.columns WHERE table_schema = %s AND "
                "table_name = %s AND column_name = 'upgraded_beside_a_build'",
                (pg_schema, f"records_c{col.partition.pk}"),
            ).fetchone()[0]
            == 1
        )
        # the session's schema goes back to the code's head, for the tests after this one
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP COLUMN upgraded_beside_a_build").format(
                sql.Identifier(pg_schema, "records")
            )
        )
        conn.execute(
            sql.SQL("UPDATE {} SET version_num = %s").format(sql.Identifier(pg_schema, "alembic_version")),
            (schema.head_revision(),),
        )
    assert_whole(col)


def test_dropping_the_schema_mid_build_stops_its_folder(pg_env, pg_dsn, pg_schema, tmp_path, monkeypatch):
    """`mempalace-pg db drop` on a schema whose folder is building: the drop waits for the build, the
    schema and graph go, and the folder notices and exits."""
    own = f"{pg_schema}_drop"
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", own)
    backend = PostgresBackend()
    col, build = start_build(backend, tmp_path / "dropped", own, pg_dsn, monkeypatch)
    backend.close()
    run = subprocess.run(
        [CLI, "--schema", own, "db", "drop", "--yes"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    build.finish()
    assert run.returncode == 0, run.stderr
    assert f"dropped schema '{own}' and graph '{own}_kg'" in run.stdout
    assert "Traceback" not in run.stderr and "psycopg" not in run.stderr
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert not conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (own,)).fetchone()[0]
        deadline = time.monotonic() + 30
        while conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (indexing.folder_application_name(own),),
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "the folder outlived its dropped schema by 30 s"
            time.sleep(0.2)
    again = subprocess.run(
        [CLI, "--schema", own, "db", "drop", "--yes"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0 and f"nothing to drop: no schema '{own}'" in again.stdout, again


def test_drop_needs_yes_and_names_what_it_would_drop(pg_env):
    run = subprocess.run([CLI, "db", "drop"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "add --yes" in run.stderr and Settings.load().schema in run.stderr
