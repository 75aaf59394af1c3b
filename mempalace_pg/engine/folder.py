"""The folder: the process that turns a collection's tail into vector index segments and merges them.

``python -m mempalace_pg.engine.folder_process SCHEMA COLLECTION_PK`` (the DSN in
MEMPALACE_PG_FOLDER_DSN), started by :meth:`mempalace_pg.engine.indexing.SegmentIndex.ensure_folder` in
whichever process writes to or searches a collection with rows waiting, and detached from it, so it
outlives a CLI that exits. Its policy (when to fold, when and what to merge) and the thresholds it
follows are described in
:mod:`mempalace_pg.engine.indexing`.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Optional

import psycopg
from psycopg import sql

from mempalace_pg.db import defects, locks
from mempalace_pg.db.connect import KEEPALIVES
from mempalace_pg.db.schema import records_identifier
from mempalace_pg.engine import statistics
from mempalace_pg.engine.builds import (
    build_capacity,
    build_session,
    drop_index,
    register,
)
from mempalace_pg.engine.indexing import (
    ABSORB_ROWS,
    BACKLOG_ROWS,
    DSN_VARIABLE,
    FOLD_ROWS,
    GRACE_S,
    HNSW_MAX_DIM,
    IDLE_POLL_S,
    LINGER_S,
    MAX_SEGMENTS,
    MERGE_TIER,
    POLL_S,
    QUIET_S,
    STATISTICS_GROWTH,
    TIER_MERGE_ROWS,
    TIER_SPREAD,
    WORTH_REBUILD,
    YIELD_POLL_S,
    YIELD_ROWS,
    Layout,
    folder_application_name,
    largest_share,
    lock_keys,
    orphan_indexes,
    segment_condition,
    segment_ddl,
    segment_name,
)
from mempalace_pg.engine.warm import warm, warm_segments
from mempalace_pg.engine.words import LEXICAL_RECOUNT_GROWTH, remember_common_words


class Folder:
    """Folds one collection's tail into segments and merges segments, until the collection is quiet."""

    def __init__(self, conn: psycopg.Connection, schema: str, pk: int, *, dsn: Optional[str] = None):
        """``dsn``: where a full build's watcher connects (see :meth:`build`); None: full builds run to
        their end whatever is written meanwhile."""
        self.conn = conn
        self.dsn = dsn
        # a yield cancels only the build statement: _running says it runs, under _guard
        self._guard = threading.Lock()
        self._running = False
        self.schema = schema
        self.pk = pk
        self.table = records_identifier(schema, pk)
        self.presence, self.changes = lock_keys(schema, pk)
        self.restoring = locks.restore_key(schema)
        self.last_newest: Optional[int] = None
        self.last_change = time.monotonic()  # the newest row's last move seen, else the folder's start
        # Whether this folder has seen a write (the newest row moved under it). Its first look says
        # nothing of when the rows came: a CLI that wrote them and exited long ago starts a folder just
        # as a writer at work does. Until it knows, it builds nothing young (to be rebuilt at once): it
        # waits QUIET_S for a write, else builds the tail once, at full settings.
        self.saw_writes = False
        self.retired: list[tuple[float, str]] = []  # (drop after, index) of replaced segments
        # On a pgvector whose HNSW vacuum can corrupt an index beside inserts (< 0.8.4), no row is ever
        # inserted into a built segment: a quiet tail becomes a segment of its own instead.
        self.may_absorb = defects.hnsw_insert_beside_vacuum_safe(conn)
        self.capacity: dict[int, int] = {}  # rows a build fits in memory, by dimension
        self.analyzed_rows: Optional[int] = None  # indexed rows at this folder's last full ANALYZE

    # -- state people can read (doctor, psql) --------------------------------------------------
    def report(self, activity: str, error: Optional[str] = None) -> None:
        self.conn.execute(
            sql.SQL(
                "INSERT INTO {} AS f (collection_pk, pid, host, activity, last_error) VALUES (%s, %s, %s, "
                "%s, %s) "
                "ON CONFLICT (collection_pk) DO UPDATE SET pid = EXCLUDED.pid, host = EXCLUDED.host, "
                "activity = EXCLUDED.activity, updated_at = now(), "
                "last_error = COALESCE(EXCLUDED.last_error, f.last_error)"
            ).format(sql.Identifier(self.schema, "vector_folders")),
            (self.pk, os.getpid(), socket.gethostname(), activity, error),
        )

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> None:
        conn = self.conn
        if conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
            return
        if not locks.try_acquire(conn, self.presence):
            return  # another folder has this collection
        try:
            self.report("started")
            idle_since = started = time.monotonic()
            swept = False
            while True:
                dim, asked = self.look()
                if dim is None or dim > HNSW_MAX_DIM:
                    return  # nothing written yet, or searched exactly
                # maintenance found this folder building and left the ANALYZE to it (engine/statistics.py)
                worked = self.locked(self.analyze, "analyzing, as maintenance asked") if asked else False
                worked = self.step(dim) or worked
                now = time.monotonic()
                # What a folder that died left behind goes, whether or not rows wait: once GRACE_S have
                # passed since this folder started, no reader plans with a segment it replaced at its
                # death (processes read the layout again every LAYOUT_TTL_S).
                if not swept and now - started >= GRACE_S:
                    self.sweep_orphans()
                    swept = True
                self.drop_retired(now)
                if worked:
                    idle_since = now
                elif now - idle_since > LINGER_S:
                    return
                else:
                    time.sleep(POLL_S if now - self.last_change < QUIET_S else IDLE_POLL_S)
        finally:
            # A connection the server cut (a terminated backend, a restart) took this session's locks with
            # it, and nothing can be tidied through it: exit at once, without waiting out the graces.
            # What is left (replaced segments) the next folder sweeps.
            if not (conn.broken or conn.closed):
                self.drop_retired(float("inf"))
                try:
                    self.report("exited")
                finally:
                    locks.release(conn, self.presence)

    def look(self) -> tuple[Optional[int], bool]:
        """The collection's vector width, and whether maintenance asked for an ANALYZE."""
        row = self.conn.execute(
            sql.SQL(
                "SELECT c.dimension, f.analyze_asked_at IS NOT NULL FROM {} c LEFT JOIN {} f "
                "USING (collection_pk) WHERE c.collection_pk = %s"
            ).format(
                sql.Identifier(self.schema, "collections"), sql.Identifier(self.schema, "vector_folders")
            ),
            (self.pk,),
        ).fetchone()
        if row is None:
            raise LookupError("the collection is gone")
        return row[0], bool(row[1])

    def step(self, dim: int) -> bool:
        """Do the next piece of work, if any is due; True when something was done."""
        segments = self.segment_rows()
        newest = self.conn.execute(sql.SQL("SELECT max(vector_seq) FROM {}").format(self.table)).fetchone()[0]
        current = Layout(
            tuple((s[1], s[2]) for s in segments),
            -1 if newest is None else int(newest),
            largest_share(s[3] for s in segments),
            any(s[4] for s in segments),
        )
        now = time.monotonic()
        if current.newest != self.last_newest:
            if self.last_newest is not None:
                self.last_change, self.saw_writes = now, True
            self.last_newest = current.newest
        tail = self.count_above(current.top) if current.has_tail else 0
        # More rows waiting than a writer may leave: it waits for this folder (mempalace_pg.engine.backlog),
        # it has not stopped. A full build now would hold it up; a young fold lets it write on.
        backlogged = 0 < BACKLOG_ROWS < tail
        quiet = now - self.last_change >= QUIET_S and not backlogged
        if not (quiet or backlogged or self.saw_writes):
            return False  # whether writes go on is known QUIET_S after the start at the latest
        if dim not in self.capacity:  # a server round trip: once per dimension, not every poll
            self.capacity[dim] = build_capacity(self.conn, dim)
        capacity = self.capacity[dim]
        if tail and quiet:
            # Writes paused: the tail first. A row searched exactly costs every query more than one
            # more segment does, and folding a tail takes a fraction of a merge's time.
            small = tail <= ABSORB_ROWS and segments and tail * WORTH_REBUILD < segments[-1][3]
            if small and self.may_absorb:
                return self.locked(lambda: self.absorb(current, dim), f"absorbing {tail} rows")
            return self.locked(lambda: self.fold(current, dim, capacity), f"folding {tail} rows")
        # A merge comes before a due tail: under sustained writes merge_plan has one only when the
        # segments are too many, and the tail is due again after every build. What is built while
        # writes go on is young (YOUNG_EF_CONSTRUCTION): quick to build, rebuilt once they pause.
        plan = self.merge_plan(segments, quiet, capacity)
        if plan:
            return self.locked(
                lambda: self.merge(plan, dim, young=not quiet), f"merging {len(plan)} segments"
            )
        if tail >= FOLD_ROWS or backlogged:
            return self.locked(
                lambda: self.fold(current, dim, capacity, young=True), f"folding {tail} rows (young)"
            )
        young = next((s for s in segments if s[4]), None) if quiet else None
        if young is not None:
            # in write order; each is rebuilt alone, as it stands (a merge would have taken it)
            return self.locked(
                lambda: self.build(dim, young[1], young[2], [young[0]]), f"rebuilding {young[3]} young rows"
            )
        return False

    def locked(self, work, activity: str) -> bool:
        if not locks.try_acquire_shared(self.conn, self.restoring):
            return False  # a restore is writing the palace (see locks.restore_key)
        try:
            if not locks.try_acquire(self.conn, self.changes):
                return False  # a bulk load, reindex or other maintenance holds the segments
            try:
                self.report(activity)
                work()
                self.report("idle")
                return True
            finally:
                locks.release(self.conn, self.changes)
        finally:
            locks.release_shared(self.conn, self.restoring)

    def count_above(self, top: int) -> int:
        return self.conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE vector_seq > %s").format(self.table), (top,)
        ).fetchone()[0]

    def segment_rows(self) -> list[tuple[str, int, int, int, bool]]:
        """(index, lo, hi, rows, young) of each segment, in write order."""
        return self.conn.execute(
            sql.SQL(
                "SELECT index_name, lo, hi, rows, young FROM {} WHERE collection_pk = %s ORDER BY lo"
            ).format(sql.Identifier(self.schema, "vector_segments")),
            (self.pk,),
        ).fetchall()

    def build(self, dim: int, lo: int, hi: int, replaced: list[str], *, young: bool = False) -> None:
        """Build the segment (lo, hi] and register it in place of ``replaced``.

        A full build (not ``young``: the quiet pass's) takes minutes at a few hundred thousand rows, and
        while it runs the folder folds nothing. If a writer starts meanwhile and writes YIELD_ROWS rows,
        the build is cancelled (nothing is registered; the invalid index is dropped): the folder goes
        back to young folds, which keep the tail short, and rebuilds once writes pause again."""
        name = segment_name(self.pk, hi)
        t0 = time.perf_counter()
        yielded = threading.Event()
        done = threading.Event()
        watcher = None
        if not young and self.dsn:
            watcher = threading.Thread(target=self.watch, args=(done, yielded), daemon=True)
            watcher.start()
        try:
            with self._guard:
                self._running = True
            try:
                self.conn.execute(segment_ddl(name, self.table, dim, lo, hi, concurrently=True, young=young))
            finally:
                with self._guard:
                    self._running = False
        except BaseException as exc:
            # an interrupted concurrent build leaves an invalid index behind
            drop_index(self.conn, self.schema, name)
            if yielded.is_set() and isinstance(exc, psycopg.errors.QueryCanceled):
                return  # writes came: the young folds go first
            raise
        finally:
            done.set()
            if watcher is not None:
                watcher.join()
        # into shared buffers before searches switch to it, so its first queries find it there
        warm(self.conn, self.schema, name)
        register(
            self.conn,
            self.schema,
            self.pk,
            index=name,
            lo=lo,
            hi=hi,
            seconds=time.perf_counter() - t0,
            replaced=replaced,
            young=young,
        )
        self.analyze()
        # BM25's word counts, when the collection has grown enough since they were taken
        remember_common_words(self.conn, self.schema, self.pk, min_growth=LEXICAL_RECOUNT_GROWTH)
        due = time.monotonic() + GRACE_S
        self.retired += [(due, old) for old in replaced]

    def analyze(self) -> None:
        """Statistics after a build: vector_seq's, and every column's when the indexed rows have moved by
        STATISTICS_GROWTH since this folder last analyzed them all (its first build always does) or when
        maintenance asked for it meanwhile."""
        rows = sum(s[3] for s in self.segment_rows())
        asked = statistics.take_request(self.conn, self.schema, self.pk)
        whole = (
            asked
            or self.analyzed_rows is None
            or abs(rows - self.analyzed_rows) >= STATISTICS_GROWTH * max(self.analyzed_rows, 1)
        )
        if whole:
            self.conn.execute(sql.SQL("ANALYZE {}").format(self.table))
            self.analyzed_rows = rows
        else:
            self.conn.execute(sql.SQL("ANALYZE {} (vector_seq)").format(self.table))

    def watch(self, done: threading.Event, yielded: threading.Event) -> None:
        """While a full build runs (until ``done``): cancel it once YIELD_ROWS rows have been written since
        it started (counted in vector_bits, on a connection of its own), and set ``yielded``."""
        try:
            with psycopg.connect(
                self.dsn, autocommit=True, application_name="mempalace-pg folder watch"
            ) as w:
                count = sql.SQL(
                    "SELECT count(*) FROM (SELECT 1 FROM {} WHERE collection_pk = %s AND vector_seq > %s "
                    "LIMIT %s) AS t"
                ).format(sql.Identifier(self.schema, "vector_bits"))
                newest = sql.SQL("SELECT COALESCE(max(vector_seq), -1) FROM {}").format(self.table)
                start = w.execute(newest).fetchone()[0]
                while not done.wait(YIELD_POLL_S):
                    if w.execute(count, (self.pk, start, YIELD_ROWS)).fetchone()[0] >= YIELD_ROWS:
                        with self._guard:  # never another statement than the build
                            if self._running:
                                yielded.set()
                                self.conn.cancel()
                        return
        except psycopg.Error:
            return  # no watcher: the build runs to its end

    def sweep_orphans(self) -> None:
        """Drop the collection's segment indexes that no segment lists: an interrupted build's (its
        process killed, its server restarted: an INVALID index) or a dead folder's replaced segments.

        A segment this folder replaced is not an orphan until its grace has run out: readers that planned
        over it in the last GRACE_S still use it (drop_retired drops it then)."""
        retired = {name for _, name in self.retired}
        for orphan in orphan_indexes(self.conn, self.schema, self.pk):
            if orphan in retired:
                continue
            drop_index(self.conn, self.schema, orphan)

    def fold(self, current: Layout, dim: int, capacity: int, *, young: bool = False) -> None:
        """The tail becomes a segment (rows written during the build stay in the tail), of at most
        ``capacity`` rows: the rest of a larger tail (a folder that started late) is the next fold's.
        ``young``: built with YOUNG_EF_CONSTRUCTION."""
        self.sweep_orphans()
        newest = self.conn.execute(
            sql.SQL(
                "SELECT max(vector_seq) FROM (SELECT vector_seq FROM {} WHERE vector_seq > %s "
                "ORDER BY vector_seq LIMIT %s) t"
            ).format(self.table),
            (current.top, capacity),
        ).fetchone()[0]
        if newest is not None and newest > current.top:
            self.build(dim, current.top, int(newest), [], young=young)

    def absorb(self, current: Layout, dim: int) -> None:
        """Move a small quiet tail into the newest segment: each row is inserted into that segment's graph.
        Rows a writer holds are skipped (they will be in the tail again anyway)."""
        top = current.top
        self.conn.execute(
            sql.SQL(
                "WITH t AS (SELECT id FROM {t} WHERE vector_seq > %s ORDER BY vector_seq FOR UPDATE SKIP "
                "LOCKED) "
                "UPDATE {t} AS r SET vector_seq = %s FROM t WHERE r.id = t.id AND r.vector_seq > %s"
            ).format(t=self.table),
            (top, top, top),
        )
        self.conn.execute(
            sql.SQL(
                "UPDATE {} SET rows = (SELECT count(*) FROM {} WHERE {}) WHERE collection_pk = %s AND hi = %s"
            ).format(
                sql.Identifier(self.schema, "vector_segments"),
                self.table,
                segment_condition(*current.segments[-1]),
            ),
            (self.pk, top),
        )

    @staticmethod
    def open_segments(segments: list, capacity: int) -> list:
        """The newest segments that a merge may combine: the longest run, newest first, that one build
        fits (``capacity`` rows; older segments are full)."""
        rows, start = 0, len(segments)
        while start > 0 and rows + segments[start - 1][3] <= capacity:
            start -= 1
            rows += segments[start][3]
        return segments[start:]

    @staticmethod
    def merge_plan(segments: list, quiet: bool, capacity: int) -> list[tuple[str, int, int, int]]:
        """The segments to merge into one (empty: none due).

        Once writes pause, the newest run of segments that one build fits (``capacity`` rows) and whose
        rows outside the largest are worth its rebuild (at least 1/WORTH_REBUILD of it); where the
        newest segment is full, the newest such run before it, and so on, so a quiet collection ends
        with about one segment per ``capacity`` rows; more than MAX_SEGMENTS segments too small to be
        worth it are merged among themselves. Under sustained writes, among the open segments, once
        there are more than MAX_SEGMENTS, the newest MERGE_TIER or more of similar
        size (none over TIER_SPREAD times their mean), up to TIER_MERGE_ROWS: size tiers, so each row
        is rebuilt about once per tier. (Merging the newest ones into the size of the one before them,
        the rule before this one, rebuilt a row once per fold when folds are small, as they are while
        writers wait for the folder: "A big palace on the real write path" in benchmarks/RESULTS.md.)"""
        if quiet:
            end = len(segments)
            while end >= 2:
                group = Folder.open_segments(segments[:end], capacity)
                largest = max((s[3] for s in group), default=0)
                if len(group) >= 2 and (sum(s[3] for s in group) - largest) * WORTH_REBUILD >= largest:
                    return group
                end -= max(1, len(group))  # the run before this one
        group = Folder.open_segments(segments, capacity)
        if len(group) <= MAX_SEGMENTS:
            return []
        if quiet:  # small segments not worth a rebuild of a large one, too many: merged among themselves
            for start in range(1, len(group) - 1):
                if sum(s[3] for s in group[start:]) <= group[start - 1][3]:
                    return group[start:]
        for start in range(len(group) - MERGE_TIER + 1):  # a tier of similar sizes, the longest first
            rows = [s[3] for s in group[start:]]
            if sum(rows) <= TIER_MERGE_ROWS and max(rows) <= TIER_SPREAD * sum(rows) / len(rows):
                return group[start:]
        return []  # the newest segments grew with the tail: they are few, and a merge would be long

    def merge(self, plan: list[tuple], dim: int, *, young: bool = False) -> None:
        self.build(dim, plan[0][1], plan[-1][2], [s[0] for s in plan], young=young)

    def drop_retired(self, now: float) -> None:
        due = [name for when, name in self.retired if when <= now]
        if not due:
            return
        if now == float("inf") and self.retired:
            time.sleep(max(0.0, max(when for when, _ in self.retired) - time.monotonic()))
        for name in due:
            drop_index(self.conn, self.schema, name)
        self.retired = [(when, name) for when, name in self.retired if name not in due]
        # their buffers are free now: the segments that stay get back what the last prewarm evicted
        warm_segments(self.conn, self.schema, self.pk)


def connect_folder(dsn: str, schema: str) -> psycopg.Connection:
    conn = psycopg.connect(
        dsn,
        autocommit=True,
        application_name=folder_application_name(schema),
        **KEEPALIVES,
    )
    conn.execute(
        "SELECT set_config('search_path', concat_ws(', ', quote_ident(%s), "
        "(SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        " WHERE e.extname = 'vector')), false)",
        (schema,),
    )
    build_session(conn)
    return conn


def main(argv: list[str]) -> int:
    """``python -m mempalace_pg.engine.folder SCHEMA COLLECTION_PK``, the DSN in MEMPALACE_PG_FOLDER_DSN."""
    schema, pk = argv[0], int(argv[1])
    dsn = os.environ.get(DSN_VARIABLE)
    if not dsn:
        print(f"{DSN_VARIABLE} is not set", file=sys.stderr)
        return 2
    try:
        with connect_folder(dsn, schema) as conn:
            folder = Folder(conn, schema, pk, dsn=dsn)
            try:
                folder.run()
            except (LookupError, psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
                return 0  # the collection (or its palace) was dropped meanwhile
            except psycopg.Error as exc:
                try:
                    folder.report("failed", f"{type(exc).__name__}: {exc}")
                except psycopg.Error:
                    pass
                return 1
    except psycopg.OperationalError:
        return 1  # the server went away; the next write or search starts another folder
    return 0


__all__ = [
    "Folder",
    "connect_folder",
    "main",
]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
