"""Planner statistics of a collection's records while its folder builds: who runs the ANALYZE, and when.

An ``ANALYZE`` of a records partition waits for the table lock a folder's ``CREATE INDEX CONCURRENTLY``
holds (both take SHARE UPDATE EXCLUSIVE), and a full build of a big palace's segment runs for minutes,
typically right after the large write a caller then wants fresh statistics for. So
``run_maintenance("analyze")``, finding the folder building (:func:`folder_building`), leaves a request
in ``vector_folders.analyze_asked_at`` (:func:`ask_after_build`) and returns; the folder takes the
request (:func:`take_request`) when its build ends, or at its next look if the build had already ended,
and analyzes the whole partition.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from mempalace_pg.db import locks


def folder_building(conn: psycopg.Connection, schema: str, pk: int) -> bool:
    """Whether the collection's segments lock is held by its folder (a build, merge or absorb runs),
    rather than by a bulk load, a reindex or a schema change, which a caller waits for."""
    changes = locks.holder(conn, locks.segments_key(schema, pk))
    return changes is not None and changes == locks.holder(conn, locks.folder_key(schema, pk))


def ask_after_build(conn: psycopg.Connection, schema: str, pk: int) -> None:
    """Ask the collection's folder to analyze the whole records partition once its build ends."""
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (collection_pk, analyze_asked_at) VALUES (%s, now()) "
            "ON CONFLICT (collection_pk) DO UPDATE SET analyze_asked_at = now()"
        ).format(sql.Identifier(schema, "vector_folders")),
        (pk,),
    )


def take_request(conn: psycopg.Connection, schema: str, pk: int) -> bool:
    """Clear a pending request; True when there was one (the caller then analyzes the whole partition:
    a request made meanwhile stays for the next look)."""
    return (
        conn.execute(
            sql.SQL(
                "UPDATE {} SET analyze_asked_at = NULL "
                "WHERE collection_pk = %s AND analyze_asked_at IS NOT NULL RETURNING collection_pk"
            ).format(sql.Identifier(schema, "vector_folders")),
            (pk,),
        ).fetchone()
        is not None
    )


__all__ = ["ask_after_build", "folder_building", "take_request"]
