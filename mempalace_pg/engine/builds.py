"""Building a collection's HNSW segments: the build session (memory, workers where pgvector's parallel
build is safe), how many rows one build holds, registering a built segment, rebuilding every row at once
(bulk loads, ``reindex``) and finding the indexes no segment lists. The folder
(:mod:`mempalace_pg.engine.folder`) and bulk loads call these; the layout and the folder's policy are
:mod:`mempalace_pg.engine.indexing`.
"""

from __future__ import annotations

import logging
import time

import psycopg
from psycopg import sql

from mempalace_pg.db import defects, locks
from mempalace_pg.db.schema import records_identifier
from mempalace_pg.engine.indexing import (
    BUILD_MEMORY,
    BUILD_ROW_OVERHEAD,
    BUILD_WORKERS,
    CONNECTION_CHECK_MS,
    FOLD_ROWS,
    HNSW_MAX_DIM,
    REBUILD_GRACE_S,
    orphan_indexes,
    segment_condition,
    segment_ddl,
    segment_name,
)
from mempalace_pg.engine.warm import warm, warm_segments

log = logging.getLogger(__name__)


def drop_index(conn: psycopg.Connection, schema: str, name: str, *, concurrently: bool = True) -> None:
    """Drop the segment index ``name`` if it is there: CONCURRENTLY (the folder's way: no reader or writer
    waits), or in the caller's session holding the segments lock (a rebuild, whose writers wait anyway)."""
    how = sql.SQL("CONCURRENTLY " if concurrently else "")
    conn.execute(sql.SQL("DROP INDEX {}IF EXISTS {}").format(how, sql.Identifier(schema, name)))


def build_workers(conn: psycopg.Connection, wanted: int = BUILD_WORKERS) -> int:
    """The parallel workers a segment build on this server may use: ``wanted``, or none where the
    server's pgvector has the parallel HNSW build overflow (CVE-2026-3172, fixed in 0.8.2)."""
    return int(wanted) if defects.parallel_hnsw_build_safe(conn) else 0


def shared_workers(workers: int, sessions: int) -> int:
    """The parallel workers each of ``sessions`` builds running at once may use, so that together they
    run no more processes than one build with ``workers`` would (its own backend and its workers): a
    restore's sessions build side by side, and builds given more processes than the server has cores
    only slow each other."""
    return max(0, (int(workers) + 1) // max(1, int(sessions)) - 1)


def build_settings(conn: psycopg.Connection, workers: int = BUILD_WORKERS) -> dict[str, str]:
    """The server settings a segment build gets on this server: the build memory, and the parallel
    workers (:func:`build_workers`). The folder's sessions set them (:func:`build_session`); a restore
    hands them to pg_restore's sessions."""
    return {
        "maintenance_work_mem": BUILD_MEMORY,
        "max_parallel_maintenance_workers": str(build_workers(conn, workers)),
    }


def build_session(conn: psycopg.Connection, workers: int = BUILD_WORKERS) -> None:
    """Session settings of a connection that builds segments (a folder's, or a pooled one for a while).

    The workers are always set: PostgreSQL's own default (2) would run a parallel build too. The server
    checks every CONNECTION_CHECK_MS that the client is still there, so a build whose process died stops
    within about a second instead of running to its end."""
    conn.execute(
        "SELECT set_config('maintenance_work_mem', %s, false), "
        "set_config('max_parallel_maintenance_workers', %s, false), "
        "set_config('statement_timeout', '0', false), "
        "set_config('client_connection_check_interval', %s, false)",
        (*build_settings(conn, workers).values(), str(CONNECTION_CHECK_MS)),
    )


def build_capacity(conn: psycopg.Connection, dim: int) -> int:
    """The rows one segment build fits in the session's ``maintenance_work_mem`` (set by
    :func:`build_session`), with a tenth kept free: a larger build spills its graph to disk and takes
    several times as long."""
    memory = conn.execute("SELECT pg_size_bytes(current_setting('maintenance_work_mem'))").fetchone()[0]
    return max(FOLD_ROWS, int(memory * 0.9) // (2 * int(dim) + BUILD_ROW_OVERHEAD))


def register(
    conn: psycopg.Connection,
    schema: str,
    pk: int,
    *,
    index: str,
    lo: int,
    hi: int,
    seconds: float,
    replaced: list[str],
    young: bool = False,
) -> None:
    """Make a built index a segment and retire the ones it replaces, in one transaction. ``young``: built
    with YOUNG_EF_CONSTRUCTION (vector_segments.young)."""
    segs = sql.Identifier(schema, "vector_segments")
    table = records_identifier(schema, pk)
    with conn.transaction():
        rows = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table, segment_condition(lo, hi))
        ).fetchone()[0]
        conn.execute(sql.SQL("DELETE FROM {} WHERE index_name = ANY(%s)").format(segs), (replaced,))
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (collection_pk, index_name, lo, hi, rows, build_seconds, young) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)"
            ).format(segs),
            (pk, index, lo, hi, rows, seconds, young),
        )


def full_prefix(conn: psycopg.Connection, schema: str, pk: int, capacity: int) -> tuple[list[str], int]:
    """The segments a load of new rows leaves as they are: the longest run, from the first row in write
    order, of settled segments (not young) holding at least half of ``capacity`` rows each (rebuilding
    them with the new rows would not make fewer segments worth the time). Returns their index names and
    the vector_seq they end at (-1: none)."""
    kept, top = [], -1
    for name, lo, hi, rows, young in conn.execute(
        sql.SQL("SELECT index_name, lo, hi, rows, young FROM {} WHERE collection_pk = %s ORDER BY lo").format(
            sql.Identifier(schema, "vector_segments")
        ),
        (pk,),
    ):
        if young or int(lo) != top or int(rows) < capacity // 2:
            break
        kept.append(name)
        top = int(hi)
    return kept, top


def rebuild(
    conn: psycopg.Connection, schema: str, pk: int, dim: int, *, keep_full: bool = False
) -> list[str]:
    """Make every row of the collection segments again, built in one go each (not concurrently: writes
    wait): one segment when the rows fit :func:`build_capacity`, else as few of equal size as do; drop
    the other segments. With ``keep_full`` (a bulk load into a collection that has rows) the
    :func:`full_prefix` segments stay and only the rows after them are built, so a load's time follows
    what it loads, not the size of the palace. ``conn`` holds no transaction and has
    :func:`build_session`'s settings. For bulk loads and ``reindex``. Returns the new segments' index
    names."""
    if dim > HNSW_MAX_DIM:
        return []
    changes = locks.segments_key(schema, pk)
    table = records_identifier(schema, pk)
    locks.acquire(conn, changes, what="rebuilding the vector index")
    try:
        capacity = build_capacity(conn, dim)
        kept, top = full_prefix(conn, schema, pk, capacity) if keep_full else ([], -1)
        old = [
            name
            for (name,) in conn.execute(
                sql.SQL("SELECT index_name FROM {} WHERE collection_pk = %s").format(
                    sql.Identifier(schema, "vector_segments")
                ),
                (pk,),
            )
            if name not in kept
        ]
        after = sql.SQL("vector_seq > {}").format(sql.Literal(top))
        rows = conn.execute(sql.SQL("SELECT count(*) FROM {} WHERE {}").format(table, after)).fetchone()[0]
        parts = max(1, -(-int(rows) // capacity))
        # the highest vector_seq of each of `parts` runs of equal size, in write order
        bounds = [
            int(hi)
            for (hi,) in conn.execute(
                sql.SQL(
                    "SELECT max(vector_seq) FROM (SELECT vector_seq, ntile(%s) OVER (ORDER BY vector_seq) "
                    "AS part FROM {} WHERE {}) t GROUP BY part ORDER BY 1"
                ).format(table, after),
                (parts,),
            )
        ]
        if not bounds and not kept:
            bounds = [0]  # an empty collection: one empty segment, as before any write
        built, lo, switched = [], top, time.monotonic()
        for hi in bounds:
            name = segment_name(pk, hi)
            t0 = time.perf_counter()
            conn.execute(segment_ddl(name, table, dim, lo, hi, concurrently=False))
            warm(conn, schema, name)
            register(
                conn,
                schema,
                pk,
                index=name,
                lo=lo,
                hi=hi,
                seconds=time.perf_counter() - t0,
                replaced=old if not built else [],
            )
            if not built:
                switched = time.monotonic()
            built.append(name)
            lo = hi
        if old and not built:  # nothing after the kept segments: retire what listed no rows of them
            with conn.transaction():
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE index_name = ANY(%s)").format(
                        sql.Identifier(schema, "vector_segments")
                    ),
                    (old,),
                )
            switched = time.monotonic()
        # readers that planned with the old layout just before the switch still use the old segments
        if old:
            time.sleep(max(0.0, switched + REBUILD_GRACE_S - time.monotonic()))
        for stale in orphan_indexes(conn, schema, pk):  # the replaced segments, and any interrupted build's
            drop_index(conn, schema, stale, concurrently=False)
        if len(built) > 1:  # each segment's prewarm may have evicted blocks of the one before
            warm_segments(conn, schema, pk)
        return built
    finally:
        locks.release(conn, changes)


__all__ = [
    "drop_index",
    "build_workers",
    "build_session",
    "build_capacity",
    "register",
    "full_prefix",
    "rebuild",
]
