"""A collection's vector index: HNSW segments over ranges of write order, built off the write path.

Why. MemPalace writes through ``upsert``, in batches of 50 to 1,000, from processes that exit when
they are done (``mempalace mine``) and from the long-lived MCP server. Inserting a vector into a grown
HNSW graph walks the graph, milliseconds a row; building a graph over many rows at once costs a small
fraction of that per row (benchmarks/RESULTS.md). So a write never touches an HNSW index: indexes are
built, in one go, over rows already written.

How. Every write gives its row the next ``records.vector_seq``. A collection's vector index is a set of
*segments*, partial HNSW indexes each over the rows whose vector_seq lies in ``(lo, hi]``, listed in the
``vector_segments`` table. A query searches each segment through its index and the *tail* (rows above
every segment) exactly, all in one statement, so a row is found the moment its transaction commits.
A row written again takes a new vector_seq and so leaves its segment: no graph insert either.

Who. A *folder* process per collection (``python -m mempalace_pg.engine.folder_process``) turns the tail into
segments and merges segments, with ``CREATE INDEX CONCURRENTLY``, so no writer or reader waits for it.
Any process that writes to a collection, or searches one that has a tail, starts a folder when none
runs. The folder is a session of its own: it outlives the CLI that started it (Ctrl-C included), and
a reader starts one after a writer that was killed. It exits once the collection is folded and quiet.
One folder per collection (an advisory lock); every change of a collection's segments is made under a
second lock, which bulk loads and ``run_maintenance("reindex")`` take too.

The policy, in :class:`Folder`: a tail of FOLD_ROWS rows, or any tail once writes have paused for
QUIET_S, becomes a segment; when writes pause the tail goes first (a row searched exactly costs every
query more than another segment does). A segment holds at most what one build fits in memory
(``builds.build_capacity``: BUILD_MEMORY over the bytes a row takes in pgvector's in-memory graph); a
build past it spills to disk and runs several times slower. Merges combine the *open* segments, the
newest ones that together fit one build; older segments are full. Once writes pause, the open
segments are rebuilt as one (each segment costs a query one more index walk), so a quiet collection
converges to as few segments as memory allows: one up to the capacity, about one per capacity beyond.
A pause does not rebuild a large segment for a few new rows, though: when the newer segments hold less
than 1/WORTH_REBUILD of the largest open one, they stay (at most MAX_SEGMENTS of them) until they are
worth it, and where pgvector can insert beside VACUUM safely a small quiet tail is inserted into the
newest segment instead. Under sustained writes, once there are more than MAX_SEGMENTS, the newest
MERGE_TIER or more of similar size are merged, up to TIER_MERGE_ROWS (size tiers): no merge then
holds the tail up for long, and each row is rebuilt about once per tier. A writer that outruns the
folder waits for it once more than BACKLOG_ROWS rows wait (:mod:`mempalace_pg.engine.backlog`). What the
folder builds while writes go on is *young*: built with a narrower construction search
(YOUNG_EF_CONSTRUCTION), faster to build, so the folder keeps up with a writer; once writes pause,
each young segment is rebuilt at full settings, in a merge or alone (``vector_segments.young``);
such a full build yields to a writer that comes back (YIELD_ROWS).
A query over several segments walks each with a narrower breadth (:func:`search_breadth`). Bulk loads
and ``reindex`` build every row at once, in as few segments of equal size as the capacity allows
(``builds.rebuild``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Optional

import psycopg
from psycopg import sql

from mempalace_pg.config import process_setting
from mempalace_pg.db import locks
from mempalace_pg.db.schema import records_identifier, records_table

if TYPE_CHECKING:
    from mempalace_pg.db.pool import Database

log = logging.getLogger(__name__)

#: HNSW links per node of every segment. Every settled segment is built with ef_construction 256
#: (MEMPALACE_PG_EF_CONSTRUCTION, :func:`hnsw_options`) over half-precision copies of the vectors (queries
#: re-rank by the exact distance). With 64 or 128, a palace of files of several chunks on graded topics
#: left drawers unreachable from the graph whatever the search breadth; more links (m) cost more build
#: time and memory for less recall. See "Index parameters" in benchmarks/RESULTS.md for the recall and
#: build time of the alternatives.
HNSW_M = 16
#: The construction search of a *young* segment (at most the settled one's): one the folder builds while
#: writes go on, which a quiet pass merges or rebuilds at full settings anyway (vector_segments.young). A
#: narrower construction search builds faster ("Index parameters" in benchmarks/RESULTS.md), so the
#: folder keeps up with a writer and few rows wait in the tail, each of which every query scans; queries
#: re-rank by the exact distance either way. m stays: fewer links is what leaves rows unreachable; so did
#: ef_construction 32 on clustered vectors, whatever the search breadth ("A big palace on the real write
#: path" in benchmarks/RESULTS.md).
YOUNG_EF_CONSTRUCTION = 64
#: pgvector's HNSW indexes `halfvec` of at most this many dimensions; wider ones are searched exactly.
HNSW_MAX_DIM = 4000
#: A tail this long is folded into a segment without waiting for writes to pause.
FOLD_ROWS = 2000
#: Writes paused this long: the tail is folded whatever its size.
QUIET_S = 1.0
#: Bytes a row takes in pgvector's in-memory HNSW graph while a segment is built, beside its
#: half-precision vector (2 bytes a dimension): its neighbour lists (m = 16) and bookkeeping. Measured
#: from pgvector's "no longer fits into maintenance_work_mem" notice (benchmarks/RESULTS.md, "Index
#: parameters"), rounded up.
BUILD_ROW_OVERHEAD = 720
#: A pause rebuilds the open segments as one only when the newer ones hold at least 1/WORTH_REBUILD of
#: the rows of the largest: a handful of new rows does not cost a rebuild of a large graph (each
#: new row is rebuilt at most about WORTH_REBUILD times over).
WORTH_REBUILD = 16
#: A quiet tail of at most this many rows is inserted into the newest segment (where pgvector allows it)
#: when a rebuild would not be worth it.
ABSORB_ROWS = 2000
#: More segments than this under sustained writes and the newer ones are merged.
MAX_SEGMENTS = 3
#: Under sustained writes the newest MERGE_TIER or more segments of similar size (none more than
#: TIER_SPREAD times their mean) are merged, up to TIER_MERGE_ROWS: size tiers, so a row is rebuilt
#: about once per tier (Folder.merge_plan). The cap bounds how long a merge holds up the folds, and
#: so the writers waiting for them.
MERGE_TIER = 4
TIER_SPREAD = 2.0
TIER_MERGE_ROWS = 50 * FOLD_ROWS
#: The smallest HNSW search breadth (hnsw.ef_search) a query over several segments uses: each segment
#: holds a share of the rows and of the nearest ones, so a narrower walk finds its share (see
#: search_breadth; measured in benchmarks/RESULTS.md, "Search breadth over segments").
MIN_SEARCH_BREADTH = 60
#: A writer whose collection has more rows than this waiting for the index waits for the folder before
#: it writes on (:mod:`mempalace_pg.engine.backlog`): every query scans those rows, so a palace searched
#: right after a bulk write (an MCP server that files, then searches) stays quick. MEMPALACE_PG_BACKLOG_ROWS
#: sets another number (0: writers never wait).
BACKLOG_ROWS = process_setting("backlog_rows")
#: A full (quiet) build is cancelled once this many rows have been written since it started: writes
#: came back, and the young folds that keep the tail short go first (the rebuild waits for the next
#: pause). A trickle of writes (an MCP server filing now and then) lets it finish. Never more than
#: BACKLOG_ROWS: a writer waiting for the tail to shrink would otherwise wait for the whole build.
YIELD_ROWS = min(5 * FOLD_ROWS, BACKLOG_ROWS or 5 * FOLD_ROWS)
#: After each build the planner needs the new segment's vector_seq range in the statistics (it picks each
#: arm's partial index by the rows it expects there): the folder analyzes vector_seq alone. The table's
#: other columns (wing, room, the words), which plan a filter, are analyzed with it whenever the indexed
#: rows have grown or shrunk by this share since they were: a full ANALYZE of a big table after every
#: build took the folder's time from its builds under a bulk write ("A big palace on the real write
#: path" in benchmarks/RESULTS.md), and a table never analyzed in full plans filters blind.
STATISTICS_GROWTH = 0.2
#: How often a full build's watcher counts the rows written since it started.
YIELD_POLL_S = 1.0
#: A folder with nothing to do for this long exits (the next write starts another).
LINGER_S = 15.0
#: How often a folder looks for new rows while they keep coming.
POLL_S = 0.2
#: How often it looks once nothing has changed for QUIET_S: an idle folder's three catalog reads every
#: POLL_S cost a few percent of a core each, and a test run or a busy server holds dozens of folders
#: lingering at once; a row written meanwhile is searched exactly until the next look.
IDLE_POLL_S = 1.0
#: A replaced segment's index is dropped this long after the switch (processes re-read the layout
#: every LAYOUT_TTL_S, so none still plans with it).
GRACE_S = 5.0
#: How long a process reuses a collection's layout before reading it again.
LAYOUT_TTL_S = 1.0
#: A rebuild (bulk load, reindex) drops the segments it replaced this long after the switch: long enough
#: for every process's cached layout to have been read again, twice over. Shorter than GRACE_S because
#: writers wait for a rebuild, and a query already running holds its index until it ends anyway.
REBUILD_GRACE_S = 2 * LAYOUT_TTL_S
#: A process checks that a folder runs at most this often per collection.
SPAWN_CHECK_S = 2.0
#: Memory for building a segment; it also bounds a segment's rows (build_capacity), and so the number
#: of segments a large quiet collection keeps.
BUILD_MEMORY = process_setting("build_memory")
#: Parallel workers of a build, beside its own backend: both cores of a small server. (Queries beside a
#: merge built this way were no slower than beside one without a worker: benchmarks/RESULTS.md, "Search
#: breadth over segments".) Only where pgvector's parallel HNSW build is safe: elsewhere builds are serial
#: (build_session, and mempalace_pg.db.defects). MEMPALACE_PG_BUILD_WORKERS sets another number (0: serial
#: everywhere, e.g. to leave a busy server's cores to queries).
BUILD_WORKERS = process_setting("build_workers")

#: How often (ms) the server checks, while a build's statement runs, that the client that asked for it is
#: still there (client_connection_check_interval): a folder killed mid-build would otherwise leave its
#: CREATE INDEX running to the end, holding its locks, with nobody to register the index.
CONNECTION_CHECK_MS = 1000

#: The environment variable that carries the DSN to a folder (never its command line, which `ps` shows).
DSN_VARIABLE = "MEMPALACE_PG_FOLDER_DSN"
#: The module a folder runs (``python -m``).
FOLDER_MODULE = "mempalace_pg.engine.folder_process"


def folder_application_name(schema: str) -> str:
    """The ``application_name`` of a folder of the palace in ``schema``, as ``pg_stat_activity`` shows it:
    whoever stops a palace's folders (a drop, a test) finds its own and no other palace's. PostgreSQL
    keeps 63 bytes of it; a schema name is at most 63, so a long one is cut, never mistaken for another
    but by a name sharing its first 43 characters."""
    return f"mempalace-pg folder {schema}"[:63]


class Layout(NamedTuple):
    """A collection's segments as ``((lo, hi), ...)`` in write order, the newest vector_seq, the
    share of the indexed rows the largest segment holds, and whether any segment is young."""

    segments: tuple
    newest: int
    largest: float = 1.0
    young: bool = False

    @property
    def top(self) -> int:
        """The highest vector_seq any segment covers (-1 without segments): the tail lies above it."""
        return self.segments[-1][1] if self.segments else -1

    @property
    def has_tail(self) -> bool:
        return self.newest > self.top


def largest_share(rows) -> float:
    """The largest of segment row counts ``rows`` as a share of their sum, rounded to a tenth (a
    layout is part of statement cache keys; the rounding keeps a trickle of rows from changing it)."""
    rows = [int(r) for r in rows]
    total = sum(rows)
    return 1.0 if len(rows) < 2 or total <= 0 else max(0.1, round(max(rows) / total, 1))


def search_breadth(layout: Layout, configured: int) -> int:
    """The hnsw.ef_search of a query over ``layout``: the configured breadth, scaled down by the largest
    segment's share of the rows, to at least MIN_SEARCH_BREADTH (never above the configured one).

    Every segment's walk runs at the statement's one breadth. The nearest rows are spread over the
    segments, so each walk needs only its share of them, from a smaller graph (recall and time per
    layout: "Search breadth over segments" in benchmarks/RESULTS.md). That holds for graphs built at
    full settings; a young segment's graph (YOUNG_EF_CONSTRUCTION) finds its share only at the full
    breadth, so a layout with one is searched at the configured breadth ("A big palace on the real
    write path" in benchmarks/RESULTS.md: recall right after a write)."""
    if len(layout.segments) < 2 or layout.young:
        return configured
    return min(configured, max(MIN_SEARCH_BREADTH, int(configured * layout.largest + 0.999)))


def segment_condition(lo: int, hi: int) -> sql.Composable:
    """The predicate of the segment over (lo, hi]: the same text in its index and in queries."""
    return sql.SQL("vector_seq > {} AND vector_seq <= {}").format(sql.Literal(int(lo)), sql.Literal(int(hi)))


def tail_condition(layout: Layout) -> sql.Composable:
    return sql.SQL("vector_seq > {}").format(sql.Literal(int(layout.top)))


def vector_type(dim: int) -> sql.Composable:
    """The type of a stored vector of ``dim`` dimensions."""
    return sql.SQL("vector({})").format(sql.Literal(int(dim)))


def half_type(dim: int) -> sql.Composable:
    """The half-precision type the segments index (queries re-rank by the exact distance)."""
    return sql.SQL("halfvec({})").format(sql.Literal(int(dim)))


def hnsw_options(*, young: bool = False) -> sql.Composable:
    """The WITH options of a segment's HNSW index: HNSW_M links, and the construction search
    MEMPALACE_PG_EF_CONSTRUCTION sets (read at each build), at most YOUNG_EF_CONSTRUCTION for a young one."""
    ef = process_setting("ef_construction")
    if young:
        ef = min(ef, YOUNG_EF_CONSTRUCTION)
    return sql.SQL("m = {}, ef_construction = {}").format(sql.Literal(HNSW_M), sql.Literal(int(ef)))


def segment_ddl(
    index: str, table: sql.Composable, dim: int, lo: int, hi: int, *, concurrently: bool, young: bool = False
) -> sql.Composable:
    return sql.SQL(
        "CREATE INDEX {how} {name} ON {table} USING hnsw ((embedding::{ht}) halfvec_cosine_ops) "
        "WITH ({opts}) WHERE {cond}"
    ).format(
        how=sql.SQL("CONCURRENTLY" if concurrently else ""),
        name=sql.Identifier(index),
        table=table,
        ht=half_type(dim),
        opts=hnsw_options(young=young),
        cond=segment_condition(lo, hi),
    )


def segment_name(pk: int, hi: int) -> str:
    """A fresh index name for a segment ending at ``hi`` (a merge may end where a segment it replaces did)."""
    return f"{records_table(pk)}_vec_{int(hi)}_{secrets.token_hex(3)}"


def lock_keys(schema: str, pk: int) -> tuple[str, str]:
    """Advisory-lock keys: one folder per collection; one change of its segments at a time."""
    return locks.folder_key(schema, pk), locks.segments_key(schema, pk)


# ----------------------------------------------------------------------------- the index, in every process
@dataclass
class IndexState:
    """What one process keeps of one collection's vector index, on the collection's ``Database``
    (:meth:`~mempalace_pg.db.pool.Database.kept`), gone with it: the layout as last read and when, the
    folder this process started, when it last looked for one, whether it was told that none can run
    (behind a pooler), and the rows it wrote since it last counted those waiting (:mod:`backlog`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    layout: Optional[Layout] = None
    read_at: float = 0.0
    folder: Optional[subprocess.Popen] = None
    checked: float = 0.0
    told_no_session: bool = False
    uncounted: int = 0


class SegmentIndex:
    """The vector index of collection ``pk`` of ``db``, as this process sees and drives it.

    ``read_only``: this process may not write to the collection, and so starts no folder for it. The
    state it keeps (:class:`IndexState`) is the Database's, so every handle on the collection in the
    process shares it."""

    def __init__(self, db: "Database", pk: int, *, read_only: bool = False):
        self.db = db
        self.pk = int(pk)
        self.read_only = read_only
        self.table = db.records(self.pk)
        self.state: IndexState = db.kept(("segment index", self.pk), IndexState)

    def __repr__(self) -> str:
        return f"<vector index of {self.db.schema}.{records_table(self.pk)}>"

    def layout(self, *, fresh: bool = False, start_folder: bool) -> Layout:
        """The collection's layout as this process last read it (at most LAYOUT_TTL_S old, unless
        ``fresh``).

        ``start_folder``: when the layout is read anew and shows work for a folder (a tail, or segment
        indexes no segment lists, which a folder that died left behind: the folder started sweeps
        them, :meth:`~mempalace_pg.engine.folder.Folder.sweep_orphans`), start one unless one runs (a
        read that may start a process says so at the call)."""
        state = self.state
        now = time.monotonic()
        with state.lock:
            cached, read_at = state.layout, state.read_at
        if cached is not None and not fresh and now - read_at < LAYOUT_TTL_S:
            return cached
        look = start_folder and not self.folders_off()

        def read(conn: psycopg.Connection) -> tuple[Layout, bool]:
            current = read_layout(conn, self.db.schema, self.pk)
            leftovers = look and not current.has_tail and orphan_indexes(conn, self.db.schema, self.pk)
            return current, bool(leftovers)

        current, leftovers = self.db.run(read)
        with state.lock:
            state.layout, state.read_at = current, now
        if look and (current.has_tail or leftovers):
            self.ensure_folder()
        return current

    def forget(self) -> None:
        """Drop this process's copy of the layout (after this process changed it)."""
        with self.state.lock:
            self.state.layout = None

    def folders_off(self) -> bool:
        """Whether this process starts no folder for the collection: it may not write, or folders are
        switched off (MEMPALACE_PG_FOLDER=off)."""
        return self.read_only or process_setting("folder") == "off"

    def folder_may_run(self) -> bool:
        """Whether this process may start a folder: folders are not off for it (:meth:`folders_off`) and
        the palace has a session address for one (see :meth:`ensure_folder`)."""
        return not self.folders_off() and self.db.session_dsn is not None

    def ensure_folder(self) -> None:
        """Start a folder for the collection unless one runs (checked at most every SPAWN_CHECK_S)."""
        if self.folders_off():
            return
        state, db = self.state, self.db
        now = time.monotonic()
        with state.lock:
            if state.folder is not None and state.folder.poll() is None:
                return  # ours, still starting or folding
            if now - state.checked < SPAWN_CHECK_S:
                return
            state.checked = now
        presence, _ = lock_keys(db.schema, self.pk)

        def free(conn: psycopg.Connection) -> bool:
            if conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                return False  # a standby: its primary's folder does the work
            got = locks.try_acquire(conn, presence)
            if got:
                locks.release(conn, presence)
            return got

        try:
            # The folder holds advisory locks and builds indexes CONCURRENTLY: it needs a session of its own.
            dsn = db.session_dsn
            if dsn is None:
                with state.lock:
                    told, state.told_no_session = state.told_no_session, True
                if not told:
                    log.warning(
                        "mempalace-pg: no vector index folder for %s: MEMPALACE_PG_DSN goes through a "
                        "connection pooler and MEMPALACE_PG_SESSION_DSN is not set, so new rows are searched "
                        "exactly (correct, slower as they grow). Set it to PostgreSQL's own address.",
                        self,
                    )
                return
            if not db.run(free):
                return
            env = dict(os.environ)
            env[DSN_VARIABLE] = dsn
            child = subprocess.Popen(
                [sys.executable, "-m", FOLDER_MODULE, db.schema, str(self.pk)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
                cwd="/",
            )
        except Exception as exc:  # rows stay searchable exactly; the next write tries again
            log.warning("mempalace-pg: could not start the vector index folder of %s: %s", self, exc)
            return
        with state.lock:
            state.folder = child

    def pause(self) -> "Pause":
        """Keep folders off the collection (a bulk load builds its index at the end); waits for a running
        build."""
        return Pause(self)

    def fresh_count(self) -> int:
        """Rows not in a vector index segment yet (searched exactly until the folder builds them one)."""
        top = self.layout(fresh=True, start_folder=False).top
        query = sql.SQL("SELECT count(*) FROM {} WHERE vector_seq > %(top)s").format(self.table)
        return int(self.db.run(lambda conn: conn.execute(query, {"top": top}).fetchone()[0]))

    def settle(self, *, timeout: float = 120.0, single: bool = False) -> Layout:
        """Wait until no row waits for the index and no segment is young (and, with ``single``, until it
        is one segment), starting a folder when none runs; return the layout. Raises TimeoutError. For
        tests, benchmarks and tools."""
        deadline = time.monotonic() + timeout
        young = sql.SQL("SELECT COALESCE(bool_or(young), false) FROM {} WHERE collection_pk = %s").format(
            self.db.ident("vector_segments")
        )
        while True:
            current = self.layout(fresh=True, start_folder=True)
            if not current.has_tail and (not single or len(current.segments) <= 1):
                if not self.db.run(lambda conn: conn.execute(young, (self.pk,)).fetchone()[0]):
                    return current
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self}: {current} after {timeout} s")
            time.sleep(0.1)


def read_layout(conn: psycopg.Connection, schema: str, pk: int) -> Layout:
    """The collection's layout, read now (one statement)."""
    row = conn.execute(
        sql.SQL(
            "SELECT (SELECT COALESCE(array_agg(ARRAY[lo, hi, rows, young::int] ORDER BY lo), '{{}}') "
            "FROM {segs} WHERE collection_pk = %s), (SELECT max(vector_seq) FROM {table})"
        ).format(
            segs=sql.Identifier(schema, "vector_segments"),
            table=records_identifier(schema, pk),
        ),
        (pk,),
    ).fetchone()
    return Layout(
        tuple((int(lo), int(hi)) for lo, hi, _, _ in row[0]),
        -1 if row[1] is None else int(row[1]),
        largest_share(r for _, _, r, _ in row[0]),
        any(young for *_, young in row[0]),
    )


def orphan_indexes(conn: psycopg.Connection, schema: str, pk: int) -> list[str]:
    """Segment indexes of the collection that no segment lists: an interrupted build's (INVALID), a dead
    folder's replaced segments, or a live folder's build and retired segments (one statement on the
    catalog)."""
    return [
        name
        for (name,) in conn.execute(
            sql.SQL(
                "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relname LIKE %s "
                "AND c.relname NOT IN (SELECT index_name FROM {} WHERE collection_pk = %s)"
            ).format(sql.Identifier(schema, "vector_segments")),
            (schema, records_table(pk).replace("_", "\\_") + "\\_vec\\_%", pk),
        )
    ]


class Pause:
    """Holds a collection's segments as they are (no folder changes them) until :meth:`close`."""

    def __init__(self, index: SegmentIndex):
        self._stack = contextlib.ExitStack()
        # the lock must outlast the load's transactions: a session of its own, even behind a pooler
        self._conn = self._stack.enter_context(index.db.session("a bulk load"))
        self._key = locks.segments_key(index.db.schema, index.pk)
        try:
            locks.acquire(self._conn, self._key, what=f"a bulk load into {index}")
        except BaseException:
            self._conn = None
            self._stack.close()
            raise

    def close(self) -> None:
        if self._conn is not None:
            try:
                locks.release(self._conn, self._key)
            finally:
                self._conn = None
                self._stack.close()


__all__ = [
    "HNSW_M",
    "YOUNG_EF_CONSTRUCTION",
    "hnsw_options",
    "HNSW_MAX_DIM",
    "FOLD_ROWS",
    "QUIET_S",
    "STATISTICS_GROWTH",
    "BUILD_ROW_OVERHEAD",
    "WORTH_REBUILD",
    "ABSORB_ROWS",
    "MAX_SEGMENTS",
    "MERGE_TIER",
    "TIER_MERGE_ROWS",
    "TIER_SPREAD",
    "BACKLOG_ROWS",
    "YIELD_ROWS",
    "YIELD_POLL_S",
    "MIN_SEARCH_BREADTH",
    "LINGER_S",
    "POLL_S",
    "IDLE_POLL_S",
    "GRACE_S",
    "REBUILD_GRACE_S",
    "LAYOUT_TTL_S",
    "SPAWN_CHECK_S",
    "BUILD_MEMORY",
    "CONNECTION_CHECK_MS",
    "BUILD_WORKERS",
    "DSN_VARIABLE",
    "FOLDER_MODULE",
    "folder_application_name",
    "Layout",
    "largest_share",
    "search_breadth",
    "segment_condition",
    "tail_condition",
    "vector_type",
    "half_type",
    "segment_ddl",
    "segment_name",
    "lock_keys",
    "IndexState",
    "SegmentIndex",
    "read_layout",
    "orphan_indexes",
    "Pause",
]
