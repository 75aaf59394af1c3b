"""The vector index on MemPalace's write path: a process writes through ``upsert`` and ends (exit, Ctrl-C,
kill -9); the rows get an HNSW segment without anyone asking, and no two folders build the same rows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psycopg
import pytest
from psycopg import sql

from mempalace_pg.db import locks
from mempalace_pg.engine import builds, folder, indexing

# These tests measure the index itself (a row found by its own vector through a segment, the exact
# nearest over several): it is built at the default construction search, as a user's is.
pytestmark = pytest.mark.usefixtures("full_index_settings")

#: A writer: upserts ROWS drawers in batches of 50 into the palace at argv[1], prints "written", then
#: waits on stdin (so the test chooses how it ends).
WRITER = textwrap.dedent("""
    import signal
    import sys
    import numpy as np
    # Ctrl-C as in a terminal's foreground process: a test run started in the background by a shell
    # without job control (nohup cmd &, CI runners) hands its children SIGINT ignored, and Python keeps
    # it ignored, so the writer would never see the test's SIGINT.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from mempalace.backends import PalaceRef
    from mempalace_pg.store.backend import PostgresBackend

    path, rows, start = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    col = PostgresBackend().get_collection(palace=PalaceRef(id=path, local_path=path),
                                           collection_name="mempalace_drawers", create=True)
    rng = np.random.default_rng(start)
    for s in range(start, start + rows, 50):
        vecs = rng.normal(size=(50, 32)).astype("float32")
        col.upsert(ids=[f"d{i}" for i in range(s, s + 50)],
                   documents=[f"drawer {i}" for i in range(s, s + 50)],
                   metadatas=[{"wing": "w", "room": f"r{i % 4}"} for i in range(s, s + 50)],
                   embeddings=vecs.tolist())
    print("written", col.partition.pk, flush=True)
    sys.stdin.read()
""")


def start_writer(path, rows: int, start: int = 0, **env) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(rows), str(start)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **env),
        start_new_session=True,
    )
    line = proc.stdout.readline().split()
    assert line[:1] == ["written"], f"writer failed (exit {proc.poll()})"
    return proc, int(line[1])


def waiting(conn, schema: str, pk: int) -> tuple[int, int]:
    """(rows not in any segment, segments), read with plain SQL: asking through the plugin would itself
    start a folder."""
    top, segments = conn.execute(
        sql.SQL("SELECT COALESCE(max(hi), -1), count(*) FROM {} WHERE collection_pk = %s").format(
            sql.Identifier(schema, "vector_segments")
        ),
        (pk,),
    ).fetchone()
    tail = conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE vector_seq > %s").format(
            sql.Identifier(schema, f"records_c{pk}")
        ),
        (top,),
    ).fetchone()[0]
    return tail, segments


def random_drawers(col, n: int, dim: int, *, seed: int):
    """``n`` drawers d0.. in wing w with random ``dim``-dimension vectors, upserted; the vectors."""
    import numpy as np

    vecs = np.random.default_rng(seed).normal(size=(n, dim)).astype("float32")
    col.upsert(
        ids=[f"d{i}" for i in range(n)],
        documents=[f"drawer {i}" for i in range(n)],
        metadatas=[{"wing": "w"}] * n,
        embeddings=vecs.tolist(),
    )
    return vecs


def wait_indexed(conn, schema: str, pk: int, timeout: float = 60.0) -> float:
    t0 = time.monotonic()
    while waiting(conn, schema, pk)[0]:
        assert time.monotonic() - t0 < timeout, (
            f"rows still waiting after {timeout} s: {waiting(conn, schema, pk)}"
        )
        time.sleep(0.1)
    return time.monotonic() - t0


def test_rows_a_cli_wrote_get_indexed_after_it_exits(pg_dsn, pg_schema, tmp_path):
    proc, pk = start_writer(tmp_path / "palace", 1000)
    proc.communicate("")  # the writer exits normally, straight after its writes
    assert proc.returncode == 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        wait_indexed(conn, pg_schema, pk)
        assert waiting(conn, pg_schema, pk)[1] >= 1
        pid, activity = conn.execute(
            sql.SQL("SELECT pid, activity FROM {} WHERE collection_pk = %s").format(
                sql.Identifier(pg_schema, "vector_folders")
            ),
            (pk,),
        ).fetchone()
        assert pid not in (os.getpid(), proc.pid) and activity


def test_rows_a_writer_stopped_by_ctrl_c_wrote_get_indexed(pg_dsn, pg_schema, tmp_path):
    proc, pk = start_writer(tmp_path / "palace", 600)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends to the foreground process group
    proc.wait(timeout=30)
    assert proc.returncode != 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        wait_indexed(conn, pg_schema, pk)


def test_a_search_starts_the_folder_a_killed_writer_never_did(pg_dsn, pg_schema, tmp_path, make_collection):
    # MEMPALACE_PG_FOLDER=off stands for a writer killed before its folder started
    proc, pk = start_writer(tmp_path / "palace", 500, MEMPALACE_PG_FOLDER="off")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        time.sleep(indexing.QUIET_S + 1)
        assert waiting(conn, pg_schema, pk) == (500, 0)  # nobody folded them
        col = make_collection()
        assert col.partition.pk == pk
        q = col.get(ids=["d7"], include=["embeddings"]).embeddings[0]
        assert col.query(query_embeddings=[list(q)], n_results=1).ids == [["d7"]]  # found exactly, at once
        wait_indexed(conn, pg_schema, pk)  # and that search started a folder
        assert col.query(query_embeddings=[list(q)], n_results=1).ids == [["d7"]]


def test_two_writers_at_once_get_disjoint_segments(pg_dsn, pg_schema, tmp_path, make_collection):
    first, pk = start_writer(tmp_path / "palace", 50)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path / "palace"), "3000", str(start)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for start in (10_000, 20_000)
    ]
    for proc in procs + [first]:
        proc.communicate("")
        assert proc.returncode == 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        wait_indexed(conn, pg_schema, pk, timeout=120)
        segments = conn.execute(
            sql.SQL("SELECT lo, hi FROM {} WHERE collection_pk = %s ORDER BY lo").format(
                sql.Identifier(pg_schema, "vector_segments")
            ),
            (pk,),
        ).fetchall()
        assert all(a[1] <= b[0] for a, b in zip(segments, segments[1:])), segments  # no row in two segments
        # every row is found through the segments, with the exact answer
        col = make_collection()
        q = col.get(ids=["d10007"], include=["embeddings"]).embeddings[0]
        assert col.query(query_embeddings=[list(q)], n_results=1).ids == [["d10007"]]
        assert col.count() == 6050


def test_a_query_over_several_segments_finds_the_exact_nearest(
    pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    import numpy as np

    from mempalace_pg.db import pool

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # the test makes the segments itself
    col = make_collection()
    rng = np.random.default_rng(5)
    vecs = rng.normal(size=(1500, 32)).astype("float32")
    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        for start, stop in ((0, 600), (600, 1100), (1100, 1500)):  # three segments
            col.upsert(
                ids=[f"d{i}" for i in range(start, stop)],
                documents=[f"drawer {i}" for i in range(start, stop)],
                metadatas=[{"wing": f"w{i % 3}", "room": "r"} for i in range(start, stop)],
                embeddings=vecs[start:stop].tolist(),
            )
            folder.Folder(conn, pg_schema, col.partition.pk).fold(
                indexing.read_layout(conn, pg_schema, col.partition.pk), 32, 10**6
            )
    current = col.partition.index.layout(fresh=True, start_folder=True)
    assert len(current.segments) == 3 and not current.has_tail
    assert (
        indexing.search_breadth(current, col.partition.db.settings.ef_search) == indexing.MIN_SEARCH_BREADTH
    )
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    wings = np.array([i % 3 for i in range(1500)])
    for q in rng.normal(size=(10, 32)).astype("float32"):
        order = np.argsort(-(unit @ (q / np.linalg.norm(q))))
        exact = [f"d{i}" for i in order[:10]]
        got = col.query(query_embeddings=[q.tolist()], n_results=10).ids[0]
        assert got == exact
        in_wing = [f"d{i}" for i in order if wings[i] == 1][:10]
        assert col.query(query_embeddings=[q.tolist()], n_results=10, where={"wing": "w1"}).ids[0] == in_wing
    # explain_query runs the same statement under EXPLAIN ANALYZE: one CTE a segment, and the tail
    plan = col.explain_query(query_embedding=vecs[3].tolist(), n_results=10)
    ctes = set()

    def walk(node):
        ctes.add(node.get("Subplan Name"))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["Plan"])
    assert {"CTE segment_0", "CTE segment_1", "CTE segment_2", "CTE tail"} <= ctes
    assert plan["Plan"]["Actual Rows"] == 10 and plan["Execution Time"] > 0
    # the breadth is per statement: the connection goes back to the configured one for the next
    with col.partition.db.connection() as conn:
        pool.use_search_breadth(conn, 60)
        assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] == "60"
        pool.use_search_breadth(conn, None)
        assert conn.execute("SHOW hnsw.ef_search").fetchone()[0] == str(col.partition.db.settings.ef_search)


def test_a_fold_after_a_merge_leaves_the_replaced_segments_their_grace(
    pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """The segments a merge replaced outlive the readers' layout cache (GRACE_S): the fold that follows
    does not sweep them as orphans; drop_retired drops them when their grace is over."""
    import numpy as np

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # the test folds and merges itself
    col = make_collection()
    pk = col.partition.pk
    vecs = np.random.default_rng(9).normal(size=(900, 16)).astype("float32")

    def write(start, stop):
        col.upsert(
            ids=[f"d{i}" for i in range(start, stop)],
            documents=[f"drawer {i}" for i in range(start, stop)],
            metadatas=[{"wing": "w"}] * (stop - start),
            embeddings=vecs[start:stop].tolist(),
        )

    def indexes(conn):
        return set(indexing.orphan_indexes(conn, pg_schema, pk)) | {
            n
            for (n,) in conn.execute(
                f"SELECT index_name FROM {pg_schema}.vector_segments WHERE collection_pk = %s", (pk,)
            )
        }

    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        f = folder.Folder(conn, pg_schema, pk)
        for start, stop in ((0, 300), (300, 600)):
            write(start, stop)
            f.fold(indexing.read_layout(conn, pg_schema, pk), 16, 10**6)
        plan = conn.execute(
            f"SELECT index_name, lo, hi, rows FROM {pg_schema}.vector_segments WHERE collection_pk = %s"
            " ORDER BY lo",
            (pk,),
        ).fetchall()
        replaced = {name for name, *_ in plan}
        f.merge(plan, 16)
        assert {name for _, name in f.retired} == replaced
        write(600, 900)
        f.fold(indexing.read_layout(conn, pg_schema, pk), 16, 10**6)
        assert replaced <= indexes(conn)  # still there for the readers
        f.drop_retired(float("inf"))
        assert not replaced & indexes(conn) and f.retired == []
    assert col.query(query_embeddings=[vecs[700].tolist()], n_results=1).ids == [["d700"]]


def test_segments_built_under_writes_are_young_and_rebuilt_once_writes_pause(
    pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """While writes go on the folder builds with YOUNG_EF_CONSTRUCTION (quick, coarser); once they pause it
    rebuilds that segment with the full options, and the young one goes after its grace."""
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # the test drives the folder itself
    col = make_collection()
    pk = col.partition.pk
    vecs = random_drawers(col, indexing.FOLD_ROWS + 500, 16, seed=11)

    def segments(conn):
        return conn.execute(
            f"SELECT s.index_name, s.young, c.reloptions FROM {pg_schema}.vector_segments s "
            "JOIN pg_class c ON c.relname = s.index_name "
            f"AND c.relnamespace = '{pg_schema}'::regnamespace WHERE s.collection_pk = %s",
            (pk,),
        ).fetchall()

    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        f = folder.Folder(conn, pg_schema, pk)
        assert not f.step(16)  # a first look: whether writes go on is not known yet
        col.upsert(ids=["d-more"], documents=["one more"], metadatas=[{"wing": "w"}], embeddings=[[0.5] * 16])
        assert f.step(16)  # a write while it watched: not quiet, a tail of FOLD_ROWS or more
        [(young_name, young, options)] = segments(conn)
        assert young and "ef_construction=64" in options
        assert indexing.read_layout(conn, pg_schema, pk).young  # searched at the configured breadth
        assert waiting(conn, pg_schema, pk) == (0, 1)
        assert col.query(query_embeddings=[vecs[2100].tolist()], n_results=1).ids == [["d2100"]]
        f.last_change -= 2 * indexing.QUIET_S  # writes paused
        assert f.step(16)
        [(name, young, options)] = segments(conn)
        assert not young and "ef_construction=256" in options and name != young_name
        assert not indexing.read_layout(conn, pg_schema, pk).young
        assert not f.step(16)  # settled: nothing left to rebuild
        f.drop_retired(float("inf"))
        assert indexing.orphan_indexes(conn, pg_schema, pk) == []
    assert col.query(query_embeddings=[vecs[2100].tolist()], n_results=1).ids == [["d2100"]]


def test_a_build_analyzes_every_column_only_when_the_rows_have_grown_enough(
    pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """After each build the planner gets vector_seq's statistics (where the new segment lies); the other
    columns are analyzed too at a folder's first build and once the indexed rows have grown by
    STATISTICS_GROWTH since: a full ANALYZE after every build of a big palace costs the folder too much."""
    import numpy as np

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # the test drives the folder itself
    col = make_collection()
    pk = col.partition.pk
    rng = np.random.default_rng(17)

    def write(start: int, stop: int, wing) -> None:
        col.upsert(
            ids=[f"d{i}" for i in range(start, stop)],
            documents=[f"drawer {i}" for i in range(start, stop)],
            metadatas=[{"wing": wing(i)} for i in range(start, stop)],
            embeddings=rng.normal(size=(stop - start, 16)).tolist(),
        )

    def fold_and_read(conn) -> tuple[set, bool]:
        """Fold the tail; then the wings the statistics know, and whether vector_seq's cover every row."""
        f.fold(indexing.read_layout(conn, pg_schema, pk), 16, 10**6)
        stats = dict(
            conn.execute(
                "SELECT attname, COALESCE(most_common_vals::text, histogram_bounds::text) FROM pg_stats "
                "WHERE schemaname = %s AND tablename = %s AND attname IN ('wing', 'vector_seq')",
                (pg_schema, f"records_c{pk}"),
            ).fetchall()
        )
        newest = conn.execute(f"SELECT max(vector_seq) FROM {pg_schema}.records_c{pk}").fetchone()[0]
        seq_top = max(int(v) for v in stats["vector_seq"].strip("{}").split(","))
        return set(stats["wing"].strip("{}").split(",")), seq_top == newest

    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        f = folder.Folder(conn, pg_schema, pk)
        write(0, 1000, lambda i: f"w{i % 3}")
        assert fold_and_read(conn) == ({"w0", "w1", "w2"}, True)  # the first build: every column
        assert f.analyzed_rows == 1000
        write(1000, 1100, lambda i: "late")  # 10 % more: vector_seq alone
        assert fold_and_read(conn) == ({"w0", "w1", "w2"}, True)
        assert f.analyzed_rows == 1000
        write(1100, 1300, lambda i: "late")  # 30 % more than at the full one: every column again
        assert fold_and_read(conn) == ({"w0", "w1", "w2", "late"}, True)
        assert f.analyzed_rows == 1300


def test_a_folder_started_on_a_quiet_tail_builds_it_once_at_full_settings(
    pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """A folder started long after the rows came (a CLI wrote them and exited, a search starts it) cannot
    tell them from a writer's at work at its first look: it waits QUIET_S for a write, sees none, and
    builds the tail once with the full options, not young and then again."""
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    col = make_collection()
    pk = col.partition.pk
    vecs = random_drawers(col, indexing.FOLD_ROWS + 500, 16, seed=13)
    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        f = folder.Folder(conn, pg_schema, pk)
        assert not f.step(16)  # a first look: it waits
        time.sleep(indexing.QUIET_S)
        assert f.step(16)  # no write came: quiet
        built = conn.execute(
            sql.SQL("SELECT rows, young FROM {} WHERE collection_pk = %s").format(
                sql.Identifier(pg_schema, "vector_segments")
            ),
            (pk,),
        ).fetchall()
        assert built == [(indexing.FOLD_ROWS + 500, False)]
        assert not f.step(16)  # settled: nothing to rebuild
        assert waiting(conn, pg_schema, pk) == (0, 1)
    assert col.query(query_embeddings=[vecs[2100].tolist()], n_results=1).ids == [["d2100"]]


def test_a_folder_builds_nothing_while_a_restore_holds_the_palace(
    pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """A restore in sessions side by side commits the drawers before its post-data section builds their
    indexes: a folder still running on the palace leaves it alone while the restore's lock is held (its
    build beside pg_restore's statements deadlocks), and builds once the restore lets go."""
    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    col = make_collection()
    pk = col.partition.pk
    random_drawers(col, indexing.FOLD_ROWS + 10, 16, seed=17)
    with (
        psycopg.connect(pg_session_dsn, autocommit=True) as conn,
        psycopg.connect(pg_session_dsn, autocommit=True) as restoring,
    ):
        assert locks.try_acquire(restoring, locks.restore_key(pg_schema))
        builds.build_session(conn)
        f = folder.Folder(conn, pg_schema, pk)
        assert not f.step(16)  # a first look: it waits
        time.sleep(indexing.QUIET_S)
        assert not f.step(16)  # quiet, a tail due, and the restore holds the palace
        assert waiting(conn, pg_schema, pk) == (indexing.FOLD_ROWS + 10, 0)
        locks.release(restoring, locks.restore_key(pg_schema))
        assert f.step(16)
        assert waiting(conn, pg_schema, pk) == (0, 1)


def test_an_unfiltered_query_over_a_large_tail_answers_as_an_exact_scan(
    pg_dsn, pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """The tail's first pass (Hamming distance over vector_bits' sign bits, then the exact re-rank of
    the best TAIL_CANDIDATES) returns what an exact scan of the tail returns; vector_bits holds one entry
    a row through rewrites and deletes, and keeps it once the row is in a segment, where a wing's own
    rows are searched through it too."""
    import numpy as np

    from mempalace_pg.engine import nearest

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # no segment: every row is in the tail
    col = make_collection()
    pk = col.partition.pk
    rng = np.random.default_rng(21)
    centres = rng.normal(size=(60, 384)).astype("float32")
    vecs = np.repeat(centres, 100, axis=0) + 0.3 * rng.normal(size=(6000, 384)).astype("float32")
    ids = [f"d{i}" for i in range(6000)]
    for start in range(0, 6000, 1000):
        col.upsert(
            ids=ids[start : start + 1000],
            documents=[f"drawer {i}" for i in range(start, start + 1000)],
            metadatas=[{"wing": "a" if i % 3 else "b", "room": "r"} for i in range(start, start + 1000)],
            embeddings=vecs[start : start + 1000].tolist(),
        )
    # rewritten (new vectors, new vector_seq) and deleted rows
    vecs[:300] = centres[7] + 0.3 * rng.normal(size=(300, 384)).astype("float32")
    col.upsert(
        ids=ids[:300],
        documents=ids[:300],
        metadatas=[{"wing": "a" if i % 3 else "b", "room": "r"} for i in range(300)],
        embeddings=vecs[:300].tolist(),
    )
    col.delete(ids=ids[5800:])
    kept = np.arange(5800)

    def entries(conn):
        return conn.execute(
            f"SELECT count(*), count(DISTINCT vector_seq) FROM {pg_schema}.vector_bits "
            "WHERE collection_pk = %s",
            (pk,),
        ).fetchone()

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert entries(conn) == (5800, 5800) and waiting(conn, pg_schema, pk) == (5800, 0)
    unit = vecs[kept] / np.linalg.norm(vecs[kept], axis=1, keepdims=True)
    assert 5800 > nearest.TAIL_CANDIDATES
    # queries near rows (as a search for something filed is): a query near none ranks rows whose
    # distances nearly tie, whose order the sign bits may not keep
    for q in np.vstack([centres[[7, 12, 33, 57]], vecs[[5, 400, 2500, 5799]]]) + 0.2 * rng.normal(
        size=(8, 384)
    ):
        similarity = unit @ (q / np.linalg.norm(q))
        exact = [ids[kept[i]] for i in np.argsort(-similarity)[:10]]
        got = col.query(query_embeddings=[q.tolist()], n_results=10)
        assert got.ids[0] == exact, (got.distances[0], sorted(1 - similarity)[:10])
        # filtered by wing (and room), as MemPalace filters, matching more rows than an exact scan takes:
        # the first pass takes the wing's rows
        for where in ({"wing": "a"}, {"$and": [{"wing": "a"}, {"room": "r"}]}):
            in_wing = [ids[kept[i]] for i in np.argsort(-similarity) if kept[i] % 3][:10]
            assert col.query(query_embeddings=[q.tolist()], n_results=10, where=where).ids[0] == in_wing

    def first_pass_rows(node) -> int:
        here = node["Actual Rows"] if node.get("Relation Name") == "vector_bits" else 0
        return here + sum(first_pass_rows(child) for child in node.get("Plans", []))

    for where in (None, {"wing": "a"}):
        plan = col.explain_query(query_embedding=centres[7].tolist(), n_results=10, where=where)
        assert first_pass_rows(plan["Plan"]) > nearest.TAIL_CANDIDATES  # the first pass ran
    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        f = folder.Folder(conn, pg_schema, pk)
        f.fold(indexing.read_layout(conn, pg_schema, pk), 384, 10**6)
        assert waiting(conn, pg_schema, pk) == (0, 1)
        # a reader whose layout predates the segment still searches its rows as tail, through their
        # entries, which stay
        stale = indexing.Layout((), 10**12)
        kept_plan = nearest.nearest_sql(
            col.partition.index,
            columns=psycopg.sql.SQL("id"),
            condition=psycopg.sql.SQL("true"),
            params={},
            n=1,
            dim=384,
            filtered=False,
            layout=stale,
        )
        with col.partition.db.connection() as reader:
            assert reader.execute(kept_plan[0], {**kept_plan[1], "q": vecs[2500]}).fetchone()[0] == "d2500"
        assert entries(conn) == (5800, 5800)
    assert col.query(query_embeddings=[vecs[2500].tolist()], n_results=1).ids == [["d2500"]]
    # Now in a segment: a wing of 3,866 rows (more than an exact scan takes, fewer than
    # OWN_ROWS_PER_SEGMENT for the one segment) is searched through its own rows' entries, and a walk
    # of the segment answers when the rule is switched off; both as an exact scan would.
    assert 3866 > nearest.EXACT_SCAN_MAX and 3866 <= nearest.OWN_ROWS_PER_SEGMENT
    q = centres[12] + 0.2 * rng.normal(size=384)
    similarity = unit @ (q / np.linalg.norm(q))
    in_wing = [ids[kept[i]] for i in np.argsort(-similarity) if kept[i] % 3][:10]
    plan = col.explain_query(query_embedding=q.tolist(), n_results=10, where={"wing": "a"})
    assert first_pass_rows(plan["Plan"]) == 3866  # the wing's entries, ranked by their bits
    assert col.query(query_embeddings=[q.tolist()], n_results=10, where={"wing": "a"}).ids[0] == in_wing
    monkeypatch.setattr(nearest, "OWN_ROWS_PER_SEGMENT", 0)
    # (9 results: a statement of its own, not the one kept for 10)
    plan = col.explain_query(query_embedding=q.tolist(), n_results=9, where={"wing": "a"})
    assert first_pass_rows(plan["Plan"]) == 0  # the segment was walked, the tail is empty
    assert col.query(query_embeddings=[q.tolist()], n_results=9, where={"wing": "a"}).ids[0] == in_wing[:9]


def test_a_full_build_yields_to_a_writer(pg_dsn, pg_session_dsn, pg_schema, make_collection, monkeypatch):
    """A quiet pass's full build that a writer comes back during is cancelled once YIELD_ROWS rows are
    written: nothing registered, no index left behind, and the folder goes on folding."""
    import numpy as np

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # the test drives the folder itself
    monkeypatch.setattr(folder, "YIELD_ROWS", 300)
    monkeypatch.setattr(folder, "YIELD_POLL_S", 0.1)
    col = make_collection()
    pk = col.partition.pk
    random_drawers(col, 20_000, 384, seed=3)  # a build of several seconds
    more = np.random.default_rng(4).normal(size=(1000, 384)).astype("float32")

    def writer():
        time.sleep(0.5)
        for start in range(0, 1000, 100):
            col.upsert(
                ids=[f"n{i}" for i in range(start, start + 100)],
                documents=["new"] * 100,
                metadatas=[{"wing": "w"}] * 100,
                embeddings=more[start : start + 100].tolist(),
            )

    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        f = folder.Folder(conn, pg_schema, pk, dsn=pg_dsn)
        top = indexing.read_layout(conn, pg_schema, pk).newest
        thread = threading.Thread(target=writer)
        thread.start()
        f.build(384, -1, top, [])  # full options: watched
        thread.join()
        assert waiting(conn, pg_schema, pk) == (21_000, 0)  # nothing registered
        assert indexing.orphan_indexes(conn, pg_schema, pk) == []  # the cancelled index is gone
        f.last_change, f.saw_writes = time.monotonic(), True  # the writer's: the next step folds young
        assert f.step(384)
        assert conn.execute(
            f"SELECT bool_and(young) FROM {pg_schema}.vector_segments WHERE collection_pk = %s", (pk,)
        ).fetchone()[0]


def test_a_rebuild_makes_as_few_segments_as_one_build_holds(
    pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """A bulk load's or reindex's rebuild never builds a graph past maintenance_work_mem (it would spill to
    disk, several times slower): it splits the rows into equal segments that each fit, and the query
    still finds the exact nearest over them."""
    import numpy as np

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    col = make_collection()
    rng = np.random.default_rng(11)
    vecs = rng.normal(size=(5000, 32)).astype("float32")
    for start in range(0, 5000, 1000):
        col.upsert(
            ids=[f"d{i}" for i in range(start, start + 1000)],
            documents=[f"drawer {i}" for i in range(start, start + 1000)],
            metadatas=[{"wing": "w", "room": "r"} for _ in range(1000)],
            embeddings=vecs[start : start + 1000].tolist(),
        )
    pk = col.partition.pk
    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        assert len(builds.rebuild(conn, pg_schema, pk, 32)) == 1  # the default memory holds them all
        conn.execute("SET maintenance_work_mem = '1MB'")
        capacity = builds.build_capacity(conn, 32)
        assert capacity == indexing.FOLD_ROWS  # 1MB holds fewer; a segment is never smaller than a fold
        names = builds.rebuild(conn, pg_schema, pk, 32)
        rows = [
            r
            for (r,) in conn.execute(
                sql.SQL("SELECT rows FROM {} WHERE collection_pk = %s ORDER BY lo").format(
                    sql.Identifier(pg_schema, "vector_segments")
                ),
                (pk,),
            )
        ]
        indexes = {
            n for (n,) in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = %s", (pg_schema,))
        }
    assert len(names) == 3 and set(names) <= indexes
    assert rows == [1667, 1667, 1666]
    assert not [n for n in indexes if n.startswith(f"records_c{pk}_vec_") and n not in names]
    current = col.partition.index.layout(fresh=True, start_folder=True)
    assert len(current.segments) == 3 and not current.has_tail
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    for q in rng.normal(size=(10, 32)).astype("float32"):
        exact = [f"d{i}" for i in np.argsort(-(unit @ (q / np.linalg.norm(q))))[:10]]
        got = col.query(query_embeddings=[q.tolist()], n_results=10).ids[0]
        assert got == exact


def test_a_bulk_load_into_a_palace_builds_what_it_loads_and_keeps_full_segments(
    pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """A bulk load into a collection that has rows leaves its full segments (settled, at least half a
    build's capacity each) as they are and builds only the rows after them: the loaded ones and any
    smaller segment's. So a load's time follows what it loads, not the size of the palace; reindex still
    builds every row again. Queries find the nearest over the whole (recall@10 at least 0.97)."""
    import numpy as np

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    monkeypatch.setattr(builds, "BUILD_MEMORY", "1MB")  # one build holds FOLD_ROWS rows: full at half of it
    col = make_collection()
    pk = col.partition.pk
    rng = np.random.default_rng(12)
    vecs = rng.normal(size=(6100, 32)).astype("float32")

    def load(start: int, stop: int) -> None:
        with col.bulk_load() as put:
            for s in range(start, stop, 1000):
                e = min(stop, s + 1000)
                put(
                    ids=[f"d{i}" for i in range(s, e)],
                    documents=[f"drawer {i}" for i in range(s, e)],
                    metadatas=[{"wing": "w", "room": "r"} for _ in range(s, e)],
                    embeddings=vecs[s:e],
                )

    def segments() -> list[tuple[str, int, int]]:
        with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
            listed = conn.execute(
                sql.SQL("SELECT index_name, lo, rows FROM {} WHERE collection_pk = %s ORDER BY lo").format(
                    sql.Identifier(pg_schema, "vector_segments")
                ),
                (pk,),
            ).fetchall()
            indexes = {
                n
                for (n,) in conn.execute(
                    "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (pg_schema,)
                )
                if n.startswith(f"records_c{pk}_vec_")
            }
        assert indexes == {name for name, _, _ in listed}  # every segment built, nothing left behind
        return listed

    load(0, 4000)
    first = segments()
    assert [rows for _, _, rows in first] == [2000, 2000]
    load(4000, 4600)  # the full segments stay; the 600 rows are a segment of their own
    second = segments()
    assert second[:2] == first and [rows for _, _, rows in second[2:]] == [600]
    load(4600, 5100)  # the 600-row segment is not full: built again with the 500 loaded
    third = segments()
    assert third[:2] == first and [rows for _, _, rows in third[2:]] == [1100]
    assert third[2][0] != second[2][0]
    current = col.partition.index.layout(fresh=True, start_folder=True)
    assert len(current.segments) == 3 and not current.has_tail
    unit = vecs[:5100] / np.linalg.norm(vecs[:5100], axis=1, keepdims=True)
    found = 0
    for q in rng.normal(size=(10, 32)).astype("float32"):
        exact = {f"d{i}" for i in np.argsort(-(unit @ (q / np.linalg.norm(q))))[:10]}
        got = set(col.query(query_embeddings=[q.tolist()], n_results=10).ids[0])
        # HNSW is approximate (a parallel build's graph differs run to run): a near tie at the tenth
        # place may be missed, but a segment left out of the search would lose about a third
        assert len(got & exact) >= 9
        found += len(got & exact)
    assert found >= 97
    assert col.run_maintenance("reindex").status == "ran"
    again = segments()
    assert [rows for _, _, rows in again] == [1700, 1700, 1700]
    assert not {name for name, _, _ in again} & {name for name, _, _ in third}


def test_a_new_segment_is_read_into_shared_buffers_before_searches_switch_to_it(
    pg_session_dsn, pg_admin_dsn, pg_schema, make_collection, monkeypatch
):
    """warm() reads a segment's every block into shared buffers (pg_prewarm), and the folder does it
    before it registers the segment, so no search is planned over a cold one."""

    from mempalace_pg.engine import warm

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")  # the test folds itself
    with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
    col = make_collection()
    pk = col.partition.pk
    random_drawers(col, 600, 16, seed=5)
    calls = []
    for name in ("warm", "register"):
        real = getattr(folder, name)
        monkeypatch.setattr(
            folder, name, lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k)
        )

    def buffered(index: str) -> tuple[int, int]:
        """(blocks of the index in shared buffers, blocks of the index), read as the superuser."""
        with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:
            return admin.execute(
                "SELECT (SELECT count(*) FROM pg_buffercache b"
                "  WHERE b.relfilenode = pg_relation_filenode(%(i)s)"
                "  AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())),"
                " pg_relation_size(%(i)s) / current_setting('block_size')::int",
                {"i": f"{pg_schema}.{index}"},
            ).fetchone()

    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        folder.Folder(conn, pg_schema, pk).fold(indexing.read_layout(conn, pg_schema, pk), 16, 10**6)
        assert calls == ["warm", "register"]
        ((index,),) = conn.execute(
            sql.SQL("SELECT index_name FROM {} WHERE collection_pk = %s").format(
                sql.Identifier(pg_schema, "vector_segments")
            ),
            (pk,),
        ).fetchall()
        with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:  # out of shared buffers again
            admin.execute(
                "SELECT pg_buffercache_evict(bufferid) FROM pg_buffercache "
                "WHERE relfilenode = pg_relation_filenode(%s)",
                (f"{pg_schema}.{index}",),
            )
        in_buffers, blocks = buffered(index)
        assert in_buffers == 0 and blocks > 1
        assert warm.warm(conn, pg_schema, index) == blocks
        assert buffered(index) == (blocks, blocks)

        # every segment of the collection at once (what the folder does once replaced ones are dropped)
        random_drawers(col, 300, 16, seed=6)
        layout = indexing.read_layout(conn, pg_schema, pk)
        folder.Folder(conn, pg_schema, pk).fold(layout, 16, 10**6)
        names = [
            n
            for (n,) in conn.execute(
                sql.SQL("SELECT index_name FROM {} WHERE collection_pk = %s").format(
                    sql.Identifier(pg_schema, "vector_segments")
                ),
                (pk,),
            )
        ]
        assert len(names) == 2
        with psycopg.connect(pg_admin_dsn, autocommit=True) as admin:
            for name in names:
                admin.execute(
                    "SELECT pg_buffercache_evict(bufferid) FROM pg_buffercache "
                    "WHERE relfilenode = pg_relation_filenode(%s)",
                    (f"{pg_schema}.{name}",),
                )
        assert [buffered(name)[0] for name in names] == [0, 0]
        sizes = [buffered(name)[1] for name in names]
        assert warm.warm_segments(conn, pg_schema, pk) == sum(sizes)
        assert [buffered(name) for name in names] == [(size, size) for size in sizes]


def test_a_rebuild_drops_the_segments_it_replaced_only_after_readers_saw_the_switch(
    pg_dsn, pg_session_dsn, pg_schema, make_collection, monkeypatch
):
    """A bulk load's or reindex's rebuild leaves the segments it replaced in place for REBUILD_GRACE_S
    after the switch (readers cache the layout for LAYOUT_TTL_S and may plan over them meanwhile), then
    drops them."""
    import threading

    monkeypatch.setenv("MEMPALACE_PG_FOLDER", "off")
    col = make_collection()
    pk = col.partition.pk
    vecs = random_drawers(col, 400, 8, seed=3)
    segments = sql.SQL("SELECT index_name FROM {} WHERE collection_pk = %s").format(
        sql.Identifier(pg_schema, "vector_segments")
    )
    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        builds.rebuild(conn, pg_schema, pk, 8)
        (old,) = [n for (n,) in conn.execute(segments, (pk,))]
    seen: dict[str, float] = {}

    def watch():
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 30
            while "dropped" not in seen and time.monotonic() < deadline:
                listed = {n for (n,) in conn.execute(segments, (pk,))}
                exists = conn.execute("SELECT to_regclass(%s)", (f"{pg_schema}.{old}",)).fetchone()[0]
                if old not in listed:
                    seen.setdefault("switched", time.monotonic())
                if exists is None:
                    seen["dropped"] = time.monotonic()
                time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    # more rows, so the new segment has another name than the old one
    col.upsert(ids=["x"], documents=["one more"], metadatas=[{"wing": "w"}], embeddings=[vecs[0].tolist()])
    with psycopg.connect(pg_session_dsn, autocommit=True) as conn:
        builds.build_session(conn)
        (new,) = builds.rebuild(conn, pg_schema, pk, 8)
    watcher.join()
    assert new != old and set(seen) == {"switched", "dropped"}
    assert seen["dropped"] - seen["switched"] >= indexing.REBUILD_GRACE_S - 0.2
    assert col.query(query_embeddings=[vecs[7].tolist()], n_results=1).ids == [["d7"]]
