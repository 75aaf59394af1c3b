"""Copy a MemPalace SQLite knowledge graph (``knowledge_graph.sqlite3``) into a palace's AGE graph.

Rows are read in SQLite's rowid order and written with the replication primitive
(``kg_apply_entity`` / ``kg_apply_triple``) keyed by id, so:

* running it twice changes nothing (a row equal to the stored one is skipped);
* a row that differs is replaced, as MemPalace's ``apply_row`` would;
* facts keep their ids, dates, confidence and provenance verbatim, and results keep SQLite's order.

Each batch is one transaction, which takes the palace's graph lock first (sql/0015_lock_order.sql): a
batch names its entities row by row. The source file is opened read-only and never changed.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from psycopg import sql

from mempalace_pg.graph.kg import AgeKnowledgeGraph
from mempalace_pg.graph.statements import REPLICATION_COLUMNS
from mempalace_pg.text import storable

#: The SQLite graph's tables, in the order they are copied.
TABLES = ("entities", "triples")
#: Ids per ``held_ids`` call of the final check.
_VERIFY_CHUNK = 10_000


@dataclass
class SqliteImportReport:
    """What :func:`import_sqlite` did: rows in the SQLite file, rows written, ids found afterwards."""

    source: str
    source_counts: dict = field(default_factory=dict)  # table -> rows in the SQLite file
    written: dict = field(default_factory=dict)  # table -> {inserted, updated, unchanged}
    verified: dict = field(default_factory=dict)  # table -> source ids found in the graph
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(self.verified.get(t) == n for t, n in self.source_counts.items())

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "source_counts": self.source_counts,
            "written": self.written,
            "verified": self.verified,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
        }


def _quoted(name: str) -> str:
    """An SQLite identifier, quoted (the names quoted here are this module's constants)."""
    return '"' + name.replace('"', '""') + '"'


def _table(table: str) -> str:
    if table not in TABLES:
        raise ValueError(f"table must be one of {sorted(TABLES)}")
    return _quoted(table)


def count_rows(conn: sqlite3.Connection, table: str) -> int:
    """How many rows ``table`` (``entities`` or ``triples``) of a SQLite graph holds."""
    return conn.execute(f"SELECT COUNT(*) FROM {_table(table)}").fetchone()[0]


def _open_readonly(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    # SQLite stores whatever bytes it was given; text that is not UTF-8 arrives with lone surrogates,
    # which are then made storable like every other text (mempalace_pg.text).
    conn.text_factory = lambda raw: raw.decode("utf-8", "surrogateescape")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not set(TABLES) <= tables:
        conn.close()
        raise ValueError(f"{path} is not a MemPalace knowledge graph (no entities/triples tables)")
    return conn


def _select(conn: sqlite3.Connection, table: str) -> str:
    """SELECT of the replication columns, NULL for those an older schema lacks."""
    present = {r["name"] for r in conn.execute(f"PRAGMA table_info({_table(table)})")}
    cols = [_quoted(c) if c in present else f"NULL AS {_quoted(c)}" for c in REPLICATION_COLUMNS[table]]
    return f"SELECT {', '.join(cols)} FROM {_table(table)} ORDER BY rowid"


def import_sqlite(
    path: str,
    kg: AgeKnowledgeGraph,
    *,
    batch_size: int = 500,
    progress: Optional[Callable[[str, int, int], None]] = None,
) -> SqliteImportReport:
    """Copy every entity and triple of the SQLite graph at ``path`` into ``kg``; verify ids at the end.

    ``progress(table, rows done, rows in the table)`` is called after each batch."""
    started = time.perf_counter()
    report = SqliteImportReport(source=path)
    src = _open_readonly(path)
    try:
        for table in TABLES:
            report.source_counts[table] = count_rows(src, table)
            report.written[table] = _copy_table(
                src, kg, table, batch_size, report.source_counts[table], progress
            )
        report.verified = _verify(kg, src)
    finally:
        src.close()
    # VACUUM as well as ANALYZE, as after a bulk load of drawers: a large import otherwise draws
    # autovacuum onto the label tables while the graph is first used.
    vacuum = sql.SQL("VACUUM (ANALYZE) {entity}, {fact}").format(
        entity=sql.Identifier(kg.graph_name, "Entity"), fact=sql.Identifier(kg.graph_name, "Fact")
    )
    with kg.database().session("the import's VACUUM") as conn:  # VACUUM runs outside any transaction
        conn.execute(vacuum)
    report.seconds = time.perf_counter() - started
    return report


def _copy_table(
    src: sqlite3.Connection,
    kg: AgeKnowledgeGraph,
    table: str,
    batch_size: int,
    total: int,
    progress: Optional[Callable[[str, int, int], None]],
) -> dict:
    """Write one table's rows in batches; how many were inserted, updated and unchanged."""
    counts = {"inserted": 0, "updated": 0, "unchanged": 0}
    done = 0
    cursor = src.execute(_select(src, table))
    while True:
        rows = [dict(r) for r in cursor.fetchmany(batch_size)]
        if not rows:
            break
        for outcome in write_batch(kg, table, rows):
            counts[outcome] += 1
        done += len(rows)
        if progress:
            progress(table, done, total)
    return counts


def write_batch(kg: AgeKnowledgeGraph, table: str, rows: list[dict]) -> list[str]:
    """Apply replicated rows of ``table`` to ``kg`` in one transaction, keyed by id, skipping a row
    equal to the stored one; each row's outcome (``inserted``, ``updated`` or ``unchanged``)."""
    statements = [kg.apply_statement(table, row, skip_unchanged=True) for row in rows]  # validate first
    palace = kg.palace_pk()
    lock, lock_params = kg.lock_statement()  # a batch names entities row by row: it takes the whole graph

    def work(conn):
        conn.execute(lock, {"palace": palace, **lock_params})
        with conn.cursor() as cur:
            cur.executemany(
                statements[0][0], [{"palace": palace, **params} for _, params in statements], returning=True
            )
            outcomes = []
            while True:
                outcomes.append(cur.fetchone()[0])
                if not cur.nextset():
                    break
            return outcomes

    return kg.run(lambda conn, _palace: work(conn), atomic=True)


def _verify(kg: AgeKnowledgeGraph, src: sqlite3.Connection) -> dict:
    """How many of the source's ids the graph holds, per table."""
    found = {}
    for table in TABLES:
        ids = sorted(
            {
                storable(str(r[0]))
                for r in src.execute(f"SELECT DISTINCT id FROM {_table(table)}")
                if r[0] is not None
            }
        )
        found[table] = sum(
            kg.held_ids(table, ids[i : i + _VERIFY_CHUNK]) for i in range(0, len(ids), _VERIFY_CHUNK)
        )
    return found


__all__ = ["import_sqlite", "write_batch", "count_rows", "SqliteImportReport", "TABLES"]
