"""The schema's checks: its revision, its indexes and the vector index segments."""

from __future__ import annotations

import math
from typing import Optional

import psycopg
from psycopg import sql

from mempalace_pg.config import Settings
from mempalace_pg.db.schema import records_identifier
from mempalace_pg.engine.indexing import HNSW_MAX_DIM
from mempalace_pg.tools.doctor.report import Report


def check_schema(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    from mempalace_pg.db.schema import HEAD_REVISION, current_revision, known_revisions

    current, head = current_revision(conn, settings.schema), HEAD_REVISION
    if current is None and conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'age'").fetchone():
        # A graph left behind by a dropped schema makes the next schema creation fail half way.
        leftover = conn.execute(
            "SELECT 1 FROM ag_catalog.ag_graph WHERE name = %(graph)s", {"graph": settings.graph}
        ).fetchone()
        if leftover:
            report.add(
                "schema",
                "fail",
                f"schema {settings.schema!r} is gone but its AGE graph "
                f"{settings.graph!r} is still there: creating the schema again "
                "would fail",
                f"psql -c \"SELECT ag_catalog.drop_graph('{settings.graph}', true);\" (it only holds "
                "the old palace's graph), or restore the schema from a backup",
            )
            return
    if current == head:
        report.add("schema", "ok", f"schema {settings.schema!r} at revision {head}")
    elif current is None:
        report.add(
            "schema",
            "warn",
            f"schema {settings.schema!r} not created yet (made on first use)",
            "mempalace-pg db upgrade",
        )
    elif current not in known_revisions():
        report.add(
            "schema",
            "fail",
            f"schema {settings.schema!r} is at {current}, newer than this code ({head})",
            "upgrade mempalace-pg (pip install -U mempalace-pg)",
        )
    else:
        report.add(
            "schema",
            "fail",
            f"schema {settings.schema!r} is at {current}; this code needs {head}",
            "mempalace-pg db upgrade",
        )


def check_indexes(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    schemas = [settings.schema, settings.graph]
    # A vector segment is listed once its build is done: one still building is invalid until then,
    # and a folder drops what an interrupted build left; so segments are not reported here.
    invalid = conn.execute(
        """
        SELECT n.nspname || '.' || c.relname
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = ANY(%(schemas)s) AND NOT i.indisvalid
          AND c.relname NOT LIKE 'records\\_c%%\\_vec\\_%%'
    """,
        {"schemas": schemas},
    ).fetchall()
    if invalid:
        names = ", ".join(r[0] for r in invalid)
        report.add(
            "indexes",
            "fail",
            f"invalid indexes (an interrupted build): {names}",
            "; ".join(f"REINDEX INDEX {r[0]}" for r in invalid),
        )
    else:
        report.add("indexes", "ok", "all indexes valid")
    segments_table = f"{settings.schema}.vector_segments"
    if conn.execute("SELECT to_regclass(%(table)s)", {"table": segments_table}).fetchone()[0]:
        _check_vector_segments(report, conn, settings)


def _check_vector_segments(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    """Per collection: its vector index segments, the rows waiting for one (searched exactly meanwhile),
    and what its folder process last did."""
    rows = conn.execute(
        sql.SQL("""
        SELECT c.collection_pk, c.name, p.palace_key, c.dimension,
               (SELECT count(*) FROM {s}.vector_segments v WHERE v.collection_pk = c.collection_pk),
               (SELECT COALESCE(sum(pg_relation_size(
                           to_regclass(quote_ident({schema}) || '.' || quote_ident(v.index_name)))), 0)
                FROM {s}.vector_segments v WHERE v.collection_pk = c.collection_pk),
               (SELECT COALESCE(max(hi), -1) FROM {s}.vector_segments v
                WHERE v.collection_pk = c.collection_pk),
               f.activity, f.updated_at, f.last_error, now() - f.updated_at, now() - f.analyze_asked_at
        FROM {s}.collections c
        JOIN {s}.palaces p USING (palace_pk)
        LEFT JOIN {s}.vector_folders f USING (collection_pk)
        WHERE c.dimension IS NOT NULL
        ORDER BY c.collection_pk
    """).format(s=sql.Identifier(settings.schema), schema=sql.Placeholder("schema")),
        {"schema": settings.schema},
    ).fetchall()
    for pk, name, palace, dim, segments, size, top, activity, _updated, error, age, asked in rows:
        table = records_identifier(settings.schema, pk)
        waiting = conn.execute(
            sql.SQL("SELECT count(*) FROM {records} WHERE vector_seq > {top}").format(
                records=table, top=sql.Placeholder("top")
            ),
            {"top": top},
        ).fetchone()[0]
        what = (
            f"{palace} {name}: {segments} HNSW segment(s), {float(size) / 1e6:.1f} MB, "
            f"{waiting} rows waiting for the index"
        )
        folder = (
            f"; folder: {activity} ({age.total_seconds():.0f} s ago)" if activity else "; no folder has run"
        )
        if asked is not None:  # run_maintenance("analyze") met a build and left the ANALYZE to the folder
            folder += f"; an ANALYZE asked for {asked.total_seconds():.0f} s ago waits for its build"
        if error:
            report.add(
                "vector index",
                "warn",
                what + folder + f"; its last error: {error}",
                "the rows stay searchable exactly; check the server log, then write once or run "
                "MemPalace's maintenance (`run_maintenance('reindex')`)",
            )
        elif dim > HNSW_MAX_DIM:
            report.add(
                "vector index",
                "ok",
                f"{palace} {name}: {dim}-dimension vectors are searched exactly "
                f"(pgvector's HNSW indexes at most {HNSW_MAX_DIM})",
            )
        elif waiting and (activity in (None, "exited") or age.total_seconds() > 60):
            report.add(
                "vector index",
                "warn",
                what + folder,
                "the next write or search starts a folder; or run `run_maintenance('reindex')`",
            )
        else:
            report.add("vector index", "ok", what + folder)
    _check_index_memory(report, conn, sum(int(row[5]) for row in rows))


def index_memory_finding(index_bytes: int, shared_bytes: int) -> tuple[str, str, Optional[str]]:
    """(status, finding, fix) for vector indexes of ``index_bytes`` on a server whose shared_buffers is
    ``shared_bytes``. A search reads a segment's upper layers and the graph around its nearest rows:
    pages outside shared buffers are each a read from the operating system (slow first queries after a
    merge, a slow p95)."""
    used, shared = mib(index_bytes), mib(shared_bytes)
    if index_bytes <= shared_bytes:
        return "ok", f"the vector indexes ({used}) fit in shared_buffers ({shared})", None
    # room for the indexes and a quarter more (the heap rows searches read, the next merge), in MB,
    # rounded up to 256 MB
    wanted = 256 * math.ceil(index_bytes * 1.25 / 2**20 / 256)
    return (
        "warn",
        f"the vector indexes take {used}, more than shared_buffers ({shared}): searches read index pages "
        "from outside PostgreSQL's buffers",
        f"set shared_buffers = '{wanted}MB' in postgresql.conf (at most about a third of the server's "
        "memory) and restart PostgreSQL; the homelab image sizes it from the memory it is given",
    )


#: Vector indexes from this size on are worth reading back into memory after a restart: below it the
#: first searches read what they need from disk in little time.
AUTOPREWARM_FROM_BYTES = 512 * 2**20


def autoprewarm_finding(running: bool, index_bytes: int) -> tuple[str, str, Optional[str]]:
    """(status, finding, fix) for a server whose autoprewarm worker is ``running`` or not, holding vector
    indexes of ``index_bytes``. Without it a restart empties shared buffers, and a big palace's first
    searches read their segments from disk block by block (benchmarks/RESULTS.md, bench_restart)."""
    if running:
        return "ok", "autoprewarm reads the buffers' blocks back in after a restart", None
    if index_bytes < AUTOPREWARM_FROM_BYTES:
        return (
            "ok",
            f"no autoprewarm; the vector indexes ({mib(index_bytes)}) are read in soon after a restart",
            None,
        )
    return (
        "warn",
        f"no autoprewarm: after a restart the first searches read the vector indexes ({mib(index_bytes)}) "
        "from disk block by block",
        "add pg_prewarm to shared_preload_libraries in postgresql.conf and restart PostgreSQL (the "
        "homelab image does)",
    )


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def _check_index_memory(report: Report, conn: psycopg.Connection, index_bytes: int) -> None:
    from mempalace_pg.engine.warm import autoprewarm_on, prewarm_function, shared_buffers_bytes

    report.add("memory", *index_memory_finding(index_bytes, shared_buffers_bytes(conn)))
    if prewarm_function(conn) is None:
        report.add(
            "prewarm",
            "warn",
            "pg_prewarm is not created in this database: a new vector index segment is read from disk by "
            "its first searches instead of before them",
            f"as a superuser: psql -d {conn.info.dbname} -c 'CREATE EXTENSION pg_prewarm;' "
            "(or `mempalace-pg db bootstrap`)",
        )
    else:
        report.add("prewarm", "ok", "pg_prewarm reads each new vector index segment into shared buffers")
    report.add("autoprewarm", *autoprewarm_finding(autoprewarm_on(conn), index_bytes))


__all__ = ["autoprewarm_finding", "check_schema", "check_indexes", "index_memory_finding"]
