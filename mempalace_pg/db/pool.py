"""One connection pool per DSN for the whole process, and the unit of work run on it.

Everything in mempalace-pg (drawers now, the knowledge graph next) gets its connections here:

    db = Database.get(settings)          # cached per (DSN, schema); checks the schema once
    with db.transaction() as conn:       # one pooled connection, one transaction
        conn.execute(...)
    rows = db.run(lambda conn: conn.execute(...).fetchall())   # retried once on a dropped connection
    db.run(write_two_tables, atomic=True)                        # several statements, one transaction

Pooled connections are in autocommit mode, so a single statement costs one round trip (no BEGIN
and COMMIT around it); work of several statements that must commit together asks for ``atomic``.

A dropped connection (server restart, network cut, idle timeout) is retried once on a fresh
connection; an error raised by a statement is never retried.
"""

from __future__ import annotations

import logging
import threading
import weakref
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from mempalace_pg.config import Settings, redact_dsn
from mempalace_pg.db.connect import describe_connect_error
from mempalace_pg.db.schema import ensure_schema
from mempalace_pg.errors import DatabaseUnavailableError, ReadOnlyDatabaseError

log = logging.getLogger(__name__)
T = TypeVar("T")

_POOLS: dict[str, ConnectionPool] = {}
_DATABASES: dict[tuple[str, str], "Database"] = {}
_LOCK = threading.RLock()


class Database:
    """A schema in one PostgreSQL database, reached through the process-wide pool for its DSN."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.schema = settings.schema
        self._pool: Optional[ConnectionPool] = None
        self.schema_revision: Optional[str] = None

    # -- lookup ---------------------------------------------------------------------------
    @classmethod
    def get(cls, settings: Settings) -> "Database":
        """The cached Database for these settings, its schema checked (and created) on first use."""
        key = (settings.dsn, settings.schema)
        with _LOCK:
            db = _DATABASES.get(key)
            if db is not None and db._pool is not None and not db._pool.closed:
                return db
            db = cls(settings)
            db.schema_revision = ensure_schema(settings)
            db._pool = _shared_pool(settings)
            _DATABASES[key] = db
            return db

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None or self._pool.closed:
            raise DatabaseUnavailableError("the connection pool is closed; reopen the palace")
        return self._pool

    def ident(self, name: str) -> sql.Composable:
        """A schema-qualified identifier for one of our tables."""
        return sql.Identifier(self.schema, name)

    # -- units of work --------------------------------------------------------------------
    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        try:
            with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise describe_connect_error(self.settings, exc) from None
        except psycopg.errors.ReadOnlySqlTransaction as exc:  # a write on a hot standby
            raise read_only_error(self.settings, exc) from None

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One pooled connection inside one transaction: committed on success, rolled back on error."""
        with self.connection() as conn:
            with conn.transaction():
                yield conn

    def run(self, work: Callable[[psycopg.Connection], T], *, atomic: bool = False, retry: bool = True) -> T:
        """Run ``work(conn)`` on a pooled connection, in one transaction if ``atomic``; retry once
        if the connection itself failed (never after a statement error)."""
        attempts = 2 if retry else 1
        pool = self.pool
        for attempt in range(attempts):
            try:
                conn = pool.getconn()
            except PoolTimeout as exc:
                raise describe_connect_error(self.settings, exc) from None
            try:
                if not atomic:
                    return work(conn)
                with conn.transaction():
                    return work(conn)
            except psycopg.errors.ReadOnlySqlTransaction as exc:
                raise read_only_error(self.settings, exc) from None
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                broken = conn.broken or conn.closed
                if isinstance(exc, psycopg.errors.QueryCanceled) or not broken:
                    raise
                if attempt + 1 >= attempts:
                    raise describe_connect_error(self.settings, exc) from None
                log.info("mempalace-pg: connection lost (%s); retrying once on a fresh one", exc)
                pool.check()  # drop other dead connections too
            finally:
                pool.putconn(conn)  # the pool discards a broken connection and rolls back a failed one
        raise AssertionError("unreachable")


def is_standby(settings: Settings) -> bool:
    """Whether the server ``settings`` point at is a hot standby (in recovery: it only reads); False
    when it cannot be reached (a palace checked against it is then told where its database is)."""
    try:
        db = Database.get(settings)
    except DatabaseUnavailableError:
        return False
    return bool(db.run(lambda conn: conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]))


def read_only_error(settings: Settings, exc: Exception) -> ReadOnlyDatabaseError:
    """The error for a write the server refused because it only reads (``exc``: PostgreSQL's own)."""
    return ReadOnlyDatabaseError(
        f"the database at {redact_dsn(settings.dsn)} is read-only ({str(exc).splitlines()[0]}): it is a hot "
        "standby, or sets default_transaction_read_only. Searches work there; to write, point "
        "MEMPALACE_PG_DSN at the primary"
    )


#: Each pooled connection's hnsw.ef_search: [configured, current] (see use_search_breadth).
_BREADTH: "weakref.WeakKeyDictionary[psycopg.Connection, list[int]]" = weakref.WeakKeyDictionary()


def use_search_breadth(conn: psycopg.Connection, ef_search: Optional[int]) -> None:
    """Give the statements ``conn`` runs next the HNSW search breadth ``ef_search`` (None: the configured
    one). A round trip only when it changes: a connection keeps the breadth of the statement it ran last."""
    state = _BREADTH.get(conn)
    if state is None:
        return  # not one of our pooled connections: its own settings stand
    want = state[0] if ef_search is None else int(ef_search)
    if want != state[1]:
        conn.execute("SELECT set_config('hnsw.ef_search', %s, false)", (str(want),))
        state[1] = want


def _configure(settings: Settings):
    def configure(conn: psycopg.Connection) -> None:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        _BREADTH[conn] = [settings.ef_search, settings.ef_search]
        # Session settings for every pooled connection: the statement timeout, HNSW search breadth,
        # iterative index scans (filtered queries still return n_results rows), and the schema
        # holding pgvector on the search path so its type and operators resolve wherever it lives,
        # then ag_catalog (AGE's graphid and agtype operators; AGE's cypher() needs it there too).
        conn.execute(
            "SELECT set_config('statement_timeout', %s, false), "
            "set_config('hnsw.ef_search', %s, false), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', false), "
            "set_config('search_path', concat_ws(', ', current_setting('search_path'), "
            "  (SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n "
            "   ON n.oid = e.extnamespace WHERE e.extname = 'vector'), "
            "  (SELECT 'ag_catalog' FROM pg_extension WHERE extname = 'age')), false)",
            (str(settings.statement_timeout_ms), str(settings.ef_search)),
        )

    return configure


def _shared_pool(settings: Settings) -> ConnectionPool:
    with _LOCK:
        pool = _POOLS.get(settings.dsn)
        if pool is not None and not pool.closed:
            return pool
        pool = ConnectionPool(
            settings.dsn,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            kwargs={
                "connect_timeout": settings.connect_timeout_s,
                "application_name": "mempalace-pg",
                "autocommit": True,
            },
            configure=_configure(settings),
            timeout=max(5.0, float(settings.connect_timeout_s)),
            name=f"mempalace-pg {redact_dsn(settings.dsn)}",
            open=False,
        )
        pool.open(wait=False)
        _POOLS[settings.dsn] = pool
        return pool


def close_all() -> None:
    """Close every pool of this process (tests, shutdown). The next Database.get() reopens."""
    with _LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
        _DATABASES.clear()
    for pool in pools:
        pool.close()
