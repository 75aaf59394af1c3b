"""Advisory locks: their names, and a wait that cannot deadlock with ``CREATE INDEX CONCURRENTLY``.

Why waits are polled. A vector index folder builds its segments with ``CREATE INDEX CONCURRENTLY``
while holding the collection's *segments* lock. Such a build, before it ends, waits for every
transaction whose snapshot is older than its own to finish, and a session blocked inside
``pg_advisory_lock`` is in such a transaction. So a process that waited for a folder's lock the
ordinary way would wait for the build while the build waited for it: PostgreSQL detects the cycle
and cancels one of the two with ``deadlock detected``. :func:`acquire` instead tries the lock, and
between tries holds no snapshot, so a build never waits for it.

The same holds for a statement that waits for the table lock a build holds (an ``ANALYZE`` of the
table, an ``ALTER``, a ``DROP``): such work first takes the collection's segments lock here.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator, Optional

import psycopg

from mempalace_pg.errors import BusyError

#: How long maintenance waits for a running index build by default (a big merge can take minutes).
DEFAULT_WAIT_S = 600.0
#: The pause between two tries of a lock another session holds.
POLL_S = 0.2


def folder_key(schema: str, pk: int) -> str:
    """Held by the one folder of a collection for as long as it runs."""
    return f"mempalace_pg:folder:{schema}:{int(pk)}"


def segments_key(schema: str, pk: int) -> str:
    """Held while a collection's vector index segments change: a folder's build or merge, a bulk load, a
    ``reindex``, and maintenance that must not meet a build (``analyze``, a schema upgrade, a drop)."""
    return f"mempalace_pg:segments:{schema}:{int(pk)}"


def restore_key(schema: str) -> str:
    """Held by a restore into ``schema`` from before ``pg_restore`` runs until the restored tables are
    analyzed; a folder holds it shared around each build, and builds nothing while a restore holds it.
    A restore in sessions side by side is not one transaction: a folder still running on the palace sees
    the drawers once the data section commits, and its ``CREATE INDEX CONCURRENTLY`` beside
    ``pg_restore``'s post-data statements is a deadlock PostgreSQL ends by cancelling one of them."""
    return f"mempalace_pg:restore:{schema}"


def creation_key(schema: str, namespace: str, palace_key: str, collection: str) -> str:
    """Held (transaction-level) by the one process creating a collection: a second creator waits, then
    finds the first one's rows."""
    return f"mempalace_pg:create:{schema}:{namespace}:{palace_key}:{collection}"


def maintenance_key(kind: str, relname: str) -> str:
    """Held by one run of maintenance ``kind`` (``analyze``, ``reindex``) of a collection's table ``relname``
    at a time: a second finds it taken and reports ``already_running``."""
    return f"mempalace_pg:{kind}:{relname}"


def xact_lock(conn: psycopg.Connection, key: str) -> None:
    """Take the transaction-level advisory lock ``key``, waiting for its holder (released at the end of the
    transaction ``conn`` is in)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))


def schema_key(schema: str) -> str:
    """Serializes schema migrations (a transaction-level lock: no build runs under it, see upgrade)."""
    return f"mempalace_pg:schema:{schema}"


def try_acquire(conn: psycopg.Connection, key: str) -> bool:
    """Take the session-level advisory lock ``key`` if it is free; never waits."""
    return bool(conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()[0])


def release(conn: psycopg.Connection, key: str) -> None:
    conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,))


def try_acquire_shared(conn: psycopg.Connection, key: str) -> bool:
    """Take the session-level advisory lock ``key`` in shared mode if no session holds it exclusively
    (others may hold it shared too); never waits."""
    return bool(conn.execute("SELECT pg_try_advisory_lock_shared(hashtext(%s))", (key,)).fetchone()[0])


def release_shared(conn: psycopg.Connection, key: str) -> None:
    conn.execute("SELECT pg_advisory_unlock_shared(hashtext(%s))", (key,))


def holder(conn: psycopg.Connection, key: str) -> Optional[int]:
    """The backend pid holding the session-level advisory lock ``key`` in this database, if one does.

    pg_locks shows a one-argument advisory lock's bigint as two halves (classid: high, objid: low)."""
    row = conn.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND ((classid::bigint << 32) | objid::bigint) = hashtext(%s)::bigint",
        (key,),
    ).fetchone()
    return None if row is None else int(row[0])


def acquire(conn: psycopg.Connection, key: str, *, what: str, timeout: float = DEFAULT_WAIT_S) -> None:
    """Take the session-level advisory lock ``key``, waiting up to ``timeout`` seconds for its holder
    (polled: see the module's docstring). ``conn`` is in autocommit mode. Raises :class:`BusyError`,
    naming ``what`` waited, when the lock stays taken."""
    _poll(conn, "SELECT pg_try_advisory_lock(hashtext(%s))", key, what=what, timeout=timeout)


def acquire_for_transaction(
    conn: psycopg.Connection, key: str, *, what: str, timeout: float = DEFAULT_WAIT_S
) -> None:
    """Take the transaction-level advisory lock ``key`` in the transaction ``conn`` has open, waiting as
    :func:`acquire` does. For a lock held across a long job: released when that transaction ends, and
    so with the connection too, even when a connection pooler stands in between (which can carry a
    session-level lock over to another client's session). Between two tries the transaction holds no
    snapshot (read committed), so a build does not wait for it."""
    _poll(conn, "SELECT pg_try_advisory_xact_lock(hashtext(%s))", key, what=what, timeout=timeout)


def _poll(conn: psycopg.Connection, statement: str, key: str, *, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not conn.execute(statement, (key,)).fetchone()[0]:
        if time.monotonic() >= deadline:
            raise BusyError(
                f"{what} waited {timeout:.0f} s for the collection's vector index build to finish and it "
                "still runs. Try again when it is done (`mempalace-pg doctor` shows the folder's activity), "
                "or stop the folder: SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                "application_name LIKE 'mempalace-pg folder%'."
            )
        time.sleep(POLL_S)


@contextmanager
def held(
    conn: psycopg.Connection, keys: list[str], *, what: str, timeout: float = DEFAULT_WAIT_S
) -> Iterator[None]:
    """Hold the advisory locks ``keys`` (taken in order, each waited for as :func:`acquire` does) for the
    body; released on the way out, in any case."""
    taken: list[str] = []
    try:
        for key in keys:
            acquire(conn, key, what=what, timeout=timeout)
            taken.append(key)
        yield
    finally:
        for key in reversed(taken):
            try:
                release(conn, key)
            except psycopg.Error:
                pass  # a connection that broke has released its session's locks already


__all__ = [
    "DEFAULT_WAIT_S",
    "acquire",
    "acquire_for_transaction",
    "creation_key",
    "maintenance_key",
    "xact_lock",
    "folder_key",
    "held",
    "holder",
    "release",
    "release_shared",
    "restore_key",
    "schema_key",
    "segments_key",
    "try_acquire",
    "try_acquire_shared",
]
