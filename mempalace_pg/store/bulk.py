"""Bulk loading: many records into one collection, fast, in flat memory.

    with collection.bulk_load() as load:
        for batch in batches:
            load(ids=..., documents=..., metadatas=..., embeddings=...)
        load.flush()       # optional: wait until everything queued is written

How it is fast:

* no folder builds index segments during the load (it holds the segments as they are); at the end
  the loaded rows become HNSW segments, built once with memory and a parallel worker, together with
  the collection's earlier rows that are not already in full segments (segments of at least half a
  build's capacity, built at full settings, stay as they are: a load into a big palace costs what
  it loads, see :func:`mempalace_pg.engine.builds.rebuild`);
* each batch goes in with one binary COPY straight into the collection's partition;
* the GIN indexes (full text, metadata) may buffer the whole load in their pending lists, which are
  merged once at the end (a small pending list, as the schema sets it, merges every few batches);
* batches are checked in the caller's thread (bad input raises from ``load`` with nothing of that
  batch written), then written by ``BULK_WORKERS`` threads on their own pooled connections, so the
  caller prepares the next batch while the server ingests the last ones. At most ``BULK_WORKERS``
  batches wait in the queue: memory stays flat however large the load.

Each batch commits on its own: an interrupted load keeps the batches it wrote, and queries meanwhile
still answer (the rows loaded so far by exact scan). Records must be new, as with ``add``; a batch with an
existing id is
not written and the load stops with that error.
"""

from __future__ import annotations

import queue
import threading
from typing import TYPE_CHECKING, Optional

import psycopg
from psycopg import sql

from mempalace_pg.store.records import Batch, clean_batch

if TYPE_CHECKING:
    from mempalace.backends.base import BaseCollection

    from mempalace_pg.db.pool import Database
    from mempalace_pg.store.partition import Partition

#: Threads (and connections) writing batches concurrently.
BULK_WORKERS = 2
#: The GIN pending-list limit (kB) during a bulk load: the lists take the whole load and are merged
#: once at the end, instead of every few batches with the schema's 512 kB.
BULK_GIN_PENDING_KB = 262144
#: The limit the schema sets (sql/0001_drawers.sql), put back after a bulk load.
GIN_PENDING_KB = 512
_DONE = object()


class BulkLoader:
    def __init__(self, collection: "BaseCollection", partition: "Partition", db: "Database"):
        """A load into ``collection`` (its ``get`` finds ids already there), whose records are
        ``partition`` of ``db``."""
        self.col = collection
        self.part = partition
        self.db = db
        self.part.check_writable()
        self.queue: queue.Queue = queue.Queue(maxsize=BULK_WORKERS)
        self.error: Optional[BaseException] = None
        self.threads: list[threading.Thread] = []

    # -- the caller's side ------------------------------------------------------------------------
    def __enter__(self):
        # Rows written go to the collection's tail (no vector index is touched); the loader builds one
        # segment over everything at the end, so a folder would only build segments to throw away.
        self.paused = self.part.index.pause()
        with self.db.connection() as conn:
            self._set_gin_pending_limit(conn, BULK_GIN_PENDING_KB)
        for i in range(BULK_WORKERS):
            thread = threading.Thread(target=self._worker, name=f"mempalace-pg bulk {i}", daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def __call__(self, **batch) -> None:
        self.load(**batch)

    def flush(self) -> None:
        """Wait until every queued batch is written (or raise the error that stopped the load)."""
        self.queue.join()
        self._raise_error()

    def load(self, *, ids, documents, metadatas=None, embeddings=None) -> None:
        """Check one batch and queue it for writing (blocks while BULK_WORKERS batches are waiting)."""
        self._raise_error()
        batch = clean_batch(ids, documents, metadatas, embeddings)
        self.part.check_dimension(batch.dimension)
        while True:
            try:
                self.queue.put(batch, timeout=0.2)
                break
            except queue.Full:
                self._raise_error()

    def __exit__(self, exc_type, exc, tb) -> None:
        for _ in self.threads:
            self.queue.put(_DONE)
        for thread in self.threads:
            thread.join()
        self.paused.close()
        try:
            dim = self.part.known_dimension()
            with self.db.session("a bulk load") as conn:  # session settings and a VACUUM
                if dim is not None:
                    # the full segments of earlier rows stay; merges the pending lists too
                    self.part.build_vector_index(conn, dim, keep_full=True)
                self._set_gin_pending_limit(conn, GIN_PENDING_KB)
        finally:
            if exc_type is None:
                self._raise_error()

    def _set_gin_pending_limit(self, conn: psycopg.Connection, kb: int) -> None:
        """Set the pending-list limit of the collection's GIN indexes (its partition's own indexes)."""
        for name in self.part.gin_indexes(conn):
            conn.execute(
                sql.SQL("ALTER INDEX {} SET (gin_pending_list_limit = {})").format(
                    self.db.ident(name), sql.Literal(int(kb))
                )
            )

    def _raise_error(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    # -- the writers' side ------------------------------------------------------------------------
    def _worker(self) -> None:
        while True:
            batch = self.queue.get()
            try:
                if batch is _DONE:
                    return
                if self.error is None:  # after a failure nothing more is written
                    self._write(batch)
            except BaseException as exc:  # handed to the caller's thread
                self.error = exc
            finally:
                self.queue.task_done()

    def _write(self, batch: Batch) -> None:
        col, part = self.col, self.part

        def work(conn):
            stored = part.claim_width(conn, batch.dimension)
            part.copy_rows(conn, batch.ids, batch.documents, batch.metadatas, batch.matrix)
            return stored

        try:
            part.dimension = self.db.run(work, atomic=True, retry=False)
        except psycopg.errors.UniqueViolation:
            existing = col.get(ids=batch.ids, include=[]).ids
            raise ValueError(
                f"ids already exist in collection {col.name!r}: {existing[:10]}; that batch was not written"
            ) from None


__all__ = [
    "BULK_WORKERS",
    "BULK_GIN_PENDING_KB",
    "GIN_PENDING_KB",
    "BulkLoader",
]
