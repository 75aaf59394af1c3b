"""Folding freshly written records into their collection's HNSW index, off the write path.

Inserting one vector into an HNSW graph that already holds 100k vectors costs milliseconds (the
insert walks the graph), which would make every ``add`` of a few drawers slow. So writes land with
``vector_indexed = false``, outside the index's partial predicate: nothing is inserted into the graph
on the write path, and queries search those *fresh* rows exactly alongside the index (see
``PostgresCollection.query``), so every record is findable the moment its transaction commits.

A background thread in the writing process then folds fresh rows into the index in small
transactions (``UPDATE ... SET vector_indexed = true``), once at least ``MERGE_AT`` are waiting.
One merger per collection runs at a time across all processes (an advisory lock); a writer that
finds more than ``HARD_LIMIT`` rows waiting helps drain them before it returns, so the exact part of
every query stays small. ``run_maintenance("reindex")`` folds everything at once and rebuilds the index.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import TYPE_CHECKING

from psycopg import sql

if TYPE_CHECKING:
    from .collection import PostgresCollection

log = logging.getLogger(__name__)

#: Fresh rows that make a writer's process start a background merge.
MERGE_AT = 500
#: Rows folded into the index per merge transaction.
MERGE_CHUNK = 100
#: Above this many fresh rows a writer waits for (or does) merging before it returns.
HARD_LIMIT = 10_000

_MERGERS: dict[tuple, "Merger"] = {}
_LOCK = threading.Lock()
_SHUTDOWN = threading.Event()


class Merger:
    """The merge state of one collection within this process."""

    def __init__(self, collection: "PostgresCollection"):
        self.db = collection._db
        self.table = collection._table
        self.pk = collection._pk
        self.fresh = collection.fresh_count()  # known count, kept up to date by writes and merges
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.last_busy = 0.0

    def lock_key(self) -> str:
        return f"mempalace_pg:merge:{self.db.schema}:{self.pk}"

    def wrote(self, n: int) -> None:
        with self.lock:
            self.fresh += n
            start = self.fresh >= MERGE_AT and (self.thread is None or not self.thread.is_alive()) \
                and time.monotonic() - self.last_busy > 1.0 and not _SHUTDOWN.is_set()
            if start:
                self.thread = threading.Thread(target=self.run, name=f"mempalace-pg merge c{self.pk}", daemon=True)
                self.thread.start()
        if self.fresh > HARD_LIMIT:
            self.wait_below(HARD_LIMIT // 2)

    def wait_below(self, target: int) -> None:
        """Back-pressure: block the writer until the merge has brought fresh rows under ``target``."""
        while self.fresh > target and not _SHUTDOWN.is_set():
            thread = self.thread
            if thread is None or not thread.is_alive():
                if time.monotonic() - self.last_busy <= 1.0:
                    return  # another process holds the merge; it is draining them
                self.run()
                return
            thread.join(timeout=0.05)

    def merge_chunk(self, conn) -> int:
        """Fold up to MERGE_CHUNK fresh rows into the index; return how many remain fresh."""
        with conn.transaction():
            conn.execute(sql.SQL(
                "WITH chunk AS (SELECT id FROM {t} WHERE collection_pk = %s AND NOT vector_indexed "
                "LIMIT %s FOR UPDATE SKIP LOCKED) "
                "UPDATE {t} AS r SET vector_indexed = true FROM chunk "
                "WHERE r.collection_pk = %s AND r.id = chunk.id").format(t=self.table),
                (self.pk, MERGE_CHUNK, self.pk))
            return conn.execute(sql.SQL(
                "SELECT count(*) FROM {t} WHERE collection_pk = %s AND NOT vector_indexed").format(t=self.table),
                (self.pk,)).fetchone()[0]

    def run(self) -> None:
        try:
            with self.db.connection() as conn:
                if not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (self.lock_key(),)).fetchone()[0]:
                    self.last_busy = time.monotonic()
                    return
                try:
                    while not _SHUTDOWN.is_set():
                        remaining = self.merge_chunk(conn)
                        with self.lock:
                            self.fresh = remaining
                        if remaining == 0:
                            break
                finally:
                    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (self.lock_key(),))
        except Exception as exc:  # noqa: BLE001 - a failed merge leaves rows fresh, still searchable
            log.warning("mempalace-pg: merging fresh rows into the vector index of collection %s failed: %s",
                        self.pk, exc)


def _key(collection: "PostgresCollection") -> tuple:
    """One merger per collection per database, whichever handle a writer holds."""
    return (collection._db.settings.dsn, collection._db.schema, collection._pk)


def after_write(collection: "PostgresCollection", n: int) -> None:
    """Record that ``n`` rows of ``collection`` were written fresh; merge in the background when due."""
    key = _key(collection)
    with _LOCK:
        merger = _MERGERS.get(key)
    if merger is None:
        # One count query, once per collection per process; it already includes the rows just written.
        fresh = Merger(collection)
        with _LOCK:
            merger = _MERGERS.setdefault(key, fresh)
        if merger is fresh:
            n = 0
    merger.wrote(n)


def drain(collection: "PostgresCollection", timeout: float = 60.0) -> int:
    """Wait for this process's merge of ``collection`` to finish (tests, tools); return rows still fresh."""
    key = _key(collection)
    merger = _MERGERS.get(key)
    if merger is not None and merger.thread is not None:
        merger.thread.join(timeout)
    return collection.fresh_count()


def merge_now(collection: "PostgresCollection") -> int:
    """Fold every fresh row of ``collection`` into its index now, in this thread; return rows left
    (non-zero only when another process holds the merge)."""
    drain(collection)
    Merger(collection).run()
    return collection.fresh_count()


def forget(collection: "PostgresCollection") -> None:
    """Drop what this process knows about ``collection`` (after a rebuild that changed the counts)."""
    key = _key(collection)
    with _LOCK:
        merger = _MERGERS.pop(key, None)
    if merger is not None and merger.thread is not None:
        merger.thread.join(10)


@atexit.register
def _stop_merging() -> None:
    """At exit, let a running merge finish its current small transaction, then stop."""
    _SHUTDOWN.set()
    for merger in list(_MERGERS.values()):
        if merger.thread is not None and merger.thread.is_alive():
            merger.thread.join(2.0)
