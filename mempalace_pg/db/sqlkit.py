"""SQL helpers shared by the drawer store, the graph and retrieval: statements built once and kept
with the parameters they always take, and row counts written into a statement's text.

Statements use named placeholders (``%(name)s``) and take their parameters as one dict: a kept
statement (a :class:`Kept`) holds the constant ones, and each call adds its own (``kept.execute(conn, {"q":
vector})``).

Every other value travels as a bound parameter; see :func:`row_count` for why counts do not.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar, Union

import psycopg
from psycopg import sql

from mempalace_pg.db.pool import use_search_breadth

T = TypeVar("T")

#: How many statements (one per filter and shape) a collection, or a PalaceSearch, keeps ready.
STATEMENT_CACHE_SIZE = 256


@dataclass
class Kept:
    """A statement a :class:`StatementCache` keeps: ``statement`` (composed; rendered to SQL bytes on its
    first use), the ``params`` it always takes, and the HNSW search ``breadth`` it was built for (None:
    the configured one)."""

    statement: Union[sql.Composable, bytes]
    params: dict
    breadth: Optional[int] = None

    def execute(self, conn: psycopg.Connection, values: Optional[dict] = None) -> psycopg.Cursor:
        """Run it on ``conn`` with its constant parameters and this call's ``values``."""
        if not isinstance(self.statement, bytes):
            self.statement = self.statement.as_bytes(conn)
        use_search_breadth(conn, self.breadth)
        return conn.execute(self.statement, {**self.params, **values} if values else self.params)

    def explain(self, conn: psycopg.Connection, values: Optional[dict] = None) -> dict:
        """Run it under EXPLAIN (ANALYZE, BUFFERS) as :meth:`execute` would: the plan, as PostgreSQL's
        JSON format gives it (a dict: "Plan", "Planning Time", "Execution Time")."""
        if not isinstance(self.statement, bytes):
            self.statement = self.statement.as_bytes(conn)
        use_search_breadth(conn, self.breadth)
        row = conn.execute(
            b"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + self.statement,
            {**self.params, **values} if values else self.params,
            prepare=False,
        ).fetchone()
        return row[0][0]


class StatementCache:
    """Statements built once per key and kept, so a repeated call neither composes nor renders SQL (and
    psycopg prepares it after a few uses): :class:`Kept` statements of a collection or a PalaceSearch, the
    rendered pages of the graph's timeline. Holds at most STATEMENT_CACHE_SIZE; the oldest goes first.
    Safe to share between threads (an MCP server's)."""

    def __init__(self):
        self._entries: dict = {}
        self._lock = threading.Lock()

    def get(self, key, build: Callable[[], T]) -> T:
        """The statement kept for ``key``; ``build()`` makes it on a miss. A ``None`` key is built every
        time and never kept."""
        if key is None:
            return build()
        entry = self._entries.get(key)
        if entry is None:
            entry = build()
            with self._lock:
                if key not in self._entries and len(self._entries) >= STATEMENT_CACHE_SIZE:
                    self._entries.pop(next(iter(self._entries)))
                self._entries[key] = entry
        return entry


#: The largest row count a statement may carry in its text (see row_count).
MAX_ROW_COUNT = 2**31 - 1


def checked_row_count(n: int) -> int:
    """``n`` if it may be written into a statement's text as a LIMIT or OFFSET: a Python ``int`` in
    0..MAX_ROW_COUNT (bool, numpy ints and text are refused)."""
    if type(n) is not int or not 0 <= n <= MAX_ROW_COUNT:
        raise ValueError(f"a row count must be an int between 0 and {MAX_ROW_COUNT}, not {n!r}")
    return n


def clamped_row_count(value: Any, lowest: int = 0) -> int:
    """A caller's count (n_results, limit, offset) as an int in lowest..MAX_ROW_COUNT."""
    return min(MAX_ROW_COUNT, max(lowest, int(value)))


def row_count(n: int) -> sql.Composable:
    """A LIMIT row count as part of the statement's text, not as a bound parameter.

    A bound LIMIT makes PostgreSQL cost the reusable (generic) plan of a nearest-neighbour
    statement as if it fetched a tenth of the table, so it plans the statement afresh on every call;
    with the count written in (and query()'s statements kept per filter), the plan is made once and
    reused. Only a Python ``int`` in 0..MAX_ROW_COUNT is accepted (never text, never a caller's
    string), and each count gets its own prepared statement. Everything else stays bound.
    """
    return sql.Literal(checked_row_count(n))


__all__ = [
    "STATEMENT_CACHE_SIZE",
    "Kept",
    "StatementCache",
    "MAX_ROW_COUNT",
    "checked_row_count",
    "clamped_row_count",
    "row_count",
]
