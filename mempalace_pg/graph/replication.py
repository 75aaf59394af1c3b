"""The knowledge graph as MemPalace's SQLite tables: a read-only SQLite snapshot (``_conn()``, for code that
reads a KnowledgeGraph's tables directly) and replication row by row (MemPalace RFC 004)."""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Iterator

from mempalace_pg.graph.statements import REPLICATION_COLUMNS
from mempalace_pg.graph.values import checked_text, confidence_of, float_or_none, mempalace_helpers


class Replication:
    """The SQLite-shaped surface of :class:`~mempalace_pg.graph.kg.AgeKnowledgeGraph` (which inherits it):
    its statements (``_sql``), ``_one``/``_all`` and ``_connection`` are the graph's own."""

    def _conn(self) -> sqlite3.Connection:
        """A read-only SQLite copy of this graph in MemPalace's own SQLite schema (its ``entities`` and
        ``triples`` tables, rows in write order), for code that reads a KnowledgeGraph's tables
        directly, as MemPalace's tests and some scripts do. It is a snapshot: writes through it
        raise, later changes to the graph are not in it (call again for a fresh one), and it reads
        the whole graph, so it is not for hot paths. :meth:`close` closes it."""
        kgm = mempalace_helpers().knowledge_graph
        sqlite_class = getattr(kgm, "_SQLITE_KNOWLEDGE_GRAPH", None) or kgm.KnowledgeGraph
        # not its __init__: that would create a file and chmod its directory
        copy = object.__new__(sqlite_class)
        copy.db_path, copy._lock = ":memory:", threading.Lock()
        copy._connection = sqlite3.connect(":memory:", check_same_thread=False)
        copy._connection.row_factory = sqlite3.Row
        copy._init_db()  # MemPalace's own DDL
        conn = copy._connection
        for table, columns in REPLICATION_COLUMNS.items():
            # SQLite, not PostgreSQL: the table and column names are this module's constants
            insert = (
                f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' * len(columns))})"
            )
            conn.executemany(insert, (tuple(row[c] for c in columns) for row in self.iter_rows(table)))
        conn.commit()
        conn.execute("PRAGMA query_only = ON")
        previous, self._connection = self._connection, conn
        if previous is not None:
            previous.close()
        return conn

    # -- replication (MemPalace RFC 004) ------------------------------------------------------
    _REPLICATION_TABLES = REPLICATION_COLUMNS

    def dump_rows(self, table: str, after_rowid: int = 0, limit: int = 500) -> list:
        """Rows of ``entities`` or ``triples`` after cursor ``after_rowid``, in write order.

        ``_rowid`` (and ``rowid``) is the row's ``seq``: it only grows, and a row written again
        (``apply_row``, ``add_entity``) moves past every cursor, as a replaced SQLite row does."""
        columns = REPLICATION_COLUMNS.get(table)
        if columns is None:
            raise ValueError(f"table must be one of {sorted(REPLICATION_COLUMNS)}")
        query = self._sql.dump_entities if table == "entities" else self._sql.dump_triples
        rows = self._all(query, after=int(after_rowid), limit=max(1, min(int(limit), 1000)))
        out = []
        for row in rows:
            seq, values = row[0], row[1:]
            if table == "triples":
                values = list(values)
                values[6] = float_or_none(values[6])
            out.append({"rowid": seq, **dict(zip(columns, values)), "_rowid": seq})
        return out

    def held_ids(self, table: str, ids: list) -> int:
        """How many of ``ids`` (of ``entities``, stubs not counted, or ``triples``) this palace's graph
        holds."""
        query = {"entities": self._sql.held_entities, "triples": self._sql.held_triples}.get(table)
        if query is None:
            raise ValueError(f"table must be one of {sorted(REPLICATION_COLUMNS)}")
        return int(self._one(query, ids=list(ids))[0])

    def iter_rows(self, table: str) -> Iterator[dict]:
        """Every row of ``entities`` or ``triples`` in write order, as :meth:`dump_rows` gives them,
        read a page at a time (the caller may change the rows it is given)."""
        after = 0
        while rows := self.dump_rows(table, after_rowid=after, limit=1000):
            after = rows[-1]["_rowid"]
            yield from rows

    def apply_row(self, table: str, row: dict) -> None:
        """Write one replicated row as given, keyed by its id (MemPalace: INSERT OR REPLACE)."""
        if REPLICATION_COLUMNS.get(table) is None:
            raise ValueError(f"table must be one of {sorted(REPLICATION_COLUMNS)}")
        if not row.get("id"):
            raise ValueError("replicated row is missing 'id'")
        query, params = self.apply_statement(table, row, skip_unchanged=False)
        self._one(query, **params)

    def apply_statement(self, table: str, row: dict, skip_unchanged: bool) -> tuple[str, dict]:
        """The statement and parameters writing one replicated row (validated here)."""
        required = {"id", "name"} if table == "entities" else {"id", "subject", "predicate", "object"}
        params: dict[str, Any] = {"skip_unchanged": skip_unchanged}
        for column in REPLICATION_COLUMNS[table]:
            if column == "confidence":
                params[column] = confidence_of(row.get(column))
            else:
                params[column] = checked_text(row.get(column), column, required=column in required)
        return (self._sql.apply_entity if table == "entities" else self._sql.apply_triple), params


__all__ = ["Replication"]
