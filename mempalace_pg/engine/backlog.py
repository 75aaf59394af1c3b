"""Back-pressure: a writer waits for the folder when too many of its rows wait for the vector index.

Why. Rows no segment holds yet (the *tail*) are searched by every query, at a cost that grows with
them; the folder (:mod:`mempalace_pg.engine.folder`) turns them into segments, but a bulk writer (``mempalace
mine``, a migration) can write faster than the folder builds while it also merges. A process that files a
hundred thousand drawers and then searches at once (an MCP server) met tens of thousands of rows in the
tail ("A big palace while it is being written" in benchmarks/RESULTS.md). So once more than
:data:`~mempalace_pg.engine.indexing.BACKLOG_ROWS` rows wait, a writer waits for the folder before it
writes on: the tail a search meets stays about that long, and a writer runs at the folder's pace.

A writer waits only where a folder can run (see :meth:`SegmentIndex.folder_may_run`: not behind a pooler
without a session address, not with folders off) and for at most MAX_WAIT_S a write, so a folder that
cannot build slows writes and never stops them. A trickle of writes (an MCP server filing now and then)
never waits: the folder folds a quiet tail within a second.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Optional

from psycopg import sql

from mempalace_pg.engine import indexing

if TYPE_CHECKING:
    from mempalace_pg.engine.indexing import SegmentIndex

log = logging.getLogger(__name__)

#: A process counts the rows waiting after it has written this many since it last counted (one
#: statement): a search right after a bulk write meets at most BACKLOG_ROWS + CHECK_ROWS rows in the tail.
CHECK_ROWS = 500
#: How often a waiting writer counts again.
WAIT_POLL_S = 0.1
#: The longest a write waits for the folder (a merge under writes takes seconds; a folder that keeps
#: failing must not hold writes up for good).
MAX_WAIT_S = 60.0


def after_write(index: "SegmentIndex", rows: int, *, dimension: Optional[int]) -> None:
    """``rows`` rows of the collection were written and committed (their vector_seq above every segment;
    ``dimension``: the collection's vector width): see that a folder folds them, and wait for it while
    more than BACKLOG_ROWS rows wait."""
    index.ensure_folder()
    limit = indexing.BACKLOG_ROWS
    if limit <= 0 or rows <= 0:
        return
    if index.db.holding():
        # Inside a held transaction (a mined item) the rows are not committed: no folder can fold them
        # yet, and waiting would keep the transaction, and the locks it holds, open for nothing.
        return
    if dimension is None or dimension > indexing.HNSW_MAX_DIM:
        return  # searched exactly: no folder builds segments for it
    state = index.state
    with state.lock:
        state.uncounted += rows
        if state.uncounted < CHECK_ROWS:
            return
        state.uncounted = 0
    if not index.folder_may_run():
        return
    t0 = time.monotonic()
    waiting = rows_waiting(index, limit + 1)
    while waiting > limit:
        if time.monotonic() - t0 > MAX_WAIT_S:
            log.warning(
                "mempalace-pg: %s: %d rows wait for the vector index after %.0f s; writing on (is its folder "
                "failing? `mempalace-pg doctor` says)",
                index,
                waiting,
                MAX_WAIT_S,
            )
            return
        time.sleep(WAIT_POLL_S)
        index.ensure_folder()  # a folder that exited or died is started again
        waiting = rows_waiting(index, limit + 1)


def rows_waiting(index: "SegmentIndex", cap: int) -> int:
    """How many rows of the collection no segment holds, counted up to ``cap`` (one statement, by index)."""
    db = index.db
    query = sql.SQL(
        "SELECT count(*) FROM (SELECT 1 FROM {tail} WHERE collection_pk = %(pk)s AND vector_seq > "
        "(SELECT COALESCE(max(hi), -1) FROM {segs} WHERE collection_pk = %(pk)s) LIMIT %(cap)s) AS t"
    ).format(tail=db.ident("vector_bits"), segs=db.ident("vector_segments"))
    return int(db.run(lambda conn: conn.execute(query, {"pk": index.pk, "cap": cap}).fetchone()[0]))


__all__ = ["CHECK_ROWS", "WAIT_POLL_S", "MAX_WAIT_S", "after_write", "rows_waiting"]
