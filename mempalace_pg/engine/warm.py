"""Warm segments: a vector index segment just built is read into shared buffers before searches switch
to it, so the first queries after a fold or a merge do not read it block by block from outside.

PostgreSQL's ``pg_prewarm`` extension does the reading (a superuser installs it: sql/bootstrap/
01_extensions.sql); without it nothing is warmed and ``doctor`` says so. A segment larger than
:data:`WARM_SHARE` of ``shared_buffers`` is not warmed: reading it would evict the pages the searches
use now (the segments it replaces, the rows' heap) for pages most of which a search never touches.
"""

from __future__ import annotations

from typing import Optional

import psycopg
from psycopg import sql

#: The largest share of shared_buffers one segment may take when it is warmed.
WARM_SHARE = 0.5
#: Once the segments a merge replaced are dropped, a collection's segments are all read in again when
#: together they take at most this share of shared_buffers: the newest one's prewarm came while the
#: replaced ones still held buffers, and evicted blocks of the others (benchmarks/RESULTS.md,
#: bench_scale).
WARM_ALL_SHARE = 0.9


def prewarm_function(conn: psycopg.Connection) -> Optional[sql.Composable]:
    """``pg_prewarm(regclass)`` qualified by the schema its extension is in, or None when it is not
    installed in this database."""
    row = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pg_prewarm'"
    ).fetchone()
    return sql.Identifier(row[0], "pg_prewarm") if row else None


def autoprewarm_on(conn: psycopg.Connection) -> bool:
    """Whether the server runs pg_prewarm's autoprewarm (the buffers' blocks read back after a restart).
    Its leader has no database session, so it is not in pg_stat_activity; a fresh session has the
    setting ``pg_prewarm.autoprewarm`` only where the library is preloaded."""
    return bool(
        conn.execute(
            "SELECT COALESCE(current_setting('pg_prewarm.autoprewarm', true) = 'on', false)"
        ).fetchone()[0]
    )


def shared_buffers_bytes(conn: psycopg.Connection) -> int:
    return int(
        conn.execute(
            "SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings "
            "WHERE name = 'shared_buffers'"
        ).fetchone()[0]
    )


def warm(conn: psycopg.Connection, schema: str, index: str) -> int:
    """Read the index ``schema.index`` into shared buffers when pg_prewarm is there and the index takes
    at most WARM_SHARE of them; the blocks read (0 when it was not warmed)."""
    function = prewarm_function(conn)
    if function is None:
        return 0
    name = sql.Identifier(schema, index).as_string(conn)
    size = conn.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()[0]
    if size > WARM_SHARE * shared_buffers_bytes(conn):
        return 0
    return prewarm(conn, function, name)


def prewarm(conn: psycopg.Connection, function: sql.Composable, name: str) -> int:
    """``function`` (:func:`prewarm_function`) over the relation ``name`` (quoted, qualified); its blocks."""
    return int(conn.execute(sql.SQL("SELECT {}(%s::regclass)").format(function), (name,)).fetchone()[0])


def warm_segments(conn: psycopg.Connection, schema: str, pk: int) -> int:
    """Read every vector index segment of collection ``pk`` into shared buffers, when pg_prewarm is there
    and together they take at most WARM_ALL_SHARE of them; the blocks read (0 when none was). Blocks
    already in buffers cost a lookup each."""
    function = prewarm_function(conn)
    if function is None:
        return 0
    segments = conn.execute(
        sql.SQL(
            "SELECT index_name, pg_relation_size(format('%%I.%%I', %s::text, index_name)::regclass) "
            "FROM {} WHERE collection_pk = %s ORDER BY lo"
        ).format(sql.Identifier(schema, "vector_segments")),
        (schema, pk),
    ).fetchall()
    if not segments or sum(size for _, size in segments) > WARM_ALL_SHARE * shared_buffers_bytes(conn):
        return 0
    return sum(
        prewarm(conn, function, sql.Identifier(schema, index).as_string(conn)) for index, _ in segments
    )


__all__ = [
    "autoprewarm_on",
    "WARM_ALL_SHARE",
    "WARM_SHARE",
    "prewarm",
    "prewarm_function",
    "shared_buffers_bytes",
    "warm",
    "warm_segments",
]
