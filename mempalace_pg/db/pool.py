"""One connection pool per DSN for the whole process, and the unit of work run on it.

Everything in mempalace-pg (drawers now, the knowledge graph next) gets its connections here:

    db = Database.get(settings)          # cached per Settings; checks the schema once
    with db.transaction() as conn:       # one pooled connection, one transaction
        conn.execute(...)
    rows = db.run(lambda conn: conn.execute(...).fetchall())   # retried once on a dropped connection
    db.run(write_two_tables, atomic=True)                        # several statements, one transaction

Pooled connections are in autocommit mode, so a single statement costs one round trip (no BEGIN
and COMMIT around it); work of several statements that must commit together asks for ``atomic``.

A dropped connection (server restart, network cut, idle timeout) is retried once on a fresh
connection; an error raised by a statement is never retried.

Behind a connection pooler (PgBouncer): a transaction-mode pooler hands each transaction to whichever
server connection is free, so session state (settings, advisory locks) neither survives from one
statement to the next nor stays with us: it leaks to the pooler's other clients. A pooler is recognised
when the process id the server reports differs from the one the connection was given (a pooler answers
the handshake itself); every checkout then runs as one transaction whose settings are ``SET LOCAL``,
and no setting is made for the session; statements are prepared only when the pooler carries prepared
statements over to its server connections (:func:`pooler_carries_prepared_statements`). Work that
needs a session of its own (:meth:`Database.session`: bulk loads, maintenance; the vector index
folder) goes to ``MEMPALACE_PG_SESSION_DSN``.
"""

from __future__ import annotations

import logging
import threading
import weakref
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Callable, Hashable, Iterator, Optional, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool, PoolTimeout

from mempalace_pg.config import ConfigError, Settings, redact_dsn
from mempalace_pg.db.connect import KEEPALIVES, connect, describe_connect_error
from mempalace_pg.db.schema import ensure_schema, records_table
from mempalace_pg.errors import DatabaseUnavailableError, ReadOnlyDatabaseError, StatementTimeoutError

log = logging.getLogger(__name__)
T = TypeVar("T")

# Which settings are per process, and why. A Database is kept per whole Settings: two callers that
# differ in anything (schema, namespace, session DSN, search breadth) each get theirs. A pool is kept per
# DSN and the settings its connections are made with (pool sizes, connect and statement timeouts,
# ef_search, set on each connection when it is opened): callers that agree on those share one pool and
# its connections, which is nearly always all of a process; a caller that asks for other values gets a
# pool of its own rather than silently the first caller's.
_POOLS: dict[tuple, "HotFirstPool"] = {}
_DATABASES: dict[Settings, "Database"] = {}
_LOCK = threading.RLock()

#: The transaction :meth:`Database.held` holds open: (its pool, its connection). A context variable, so
#: it is this thread's (and this task's) alone: another thread of the process (the vector index folder,
#: an MCP server's other requests) checks out connections of its own as before.
_HELD: ContextVar[Optional[tuple[ConnectionPool, psycopg.Connection]]] = ContextVar(
    "mempalace_pg_held_transaction", default=None
)


def _pool_key(settings: Settings) -> tuple:
    return (
        settings.dsn,
        settings.pool_min_size,
        settings.pool_max_size,
        settings.connect_timeout_s,
        settings.statement_timeout_ms,
        settings.ef_search,
    )


class Database:
    """A schema in one PostgreSQL database, reached through the process-wide pool for its DSN."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.schema = settings.schema
        self._pool: Optional[HotFirstPool] = None
        self.schema_revision: Optional[str] = None
        self._kept: dict = {}
        self._kept_lock = threading.Lock()

    # -- lookup ---------------------------------------------------------------------------
    @classmethod
    def get(cls, settings: Settings) -> "Database":
        """The cached Database for these settings, its schema checked (and created) on first use."""
        key = settings
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
    def pool(self) -> "HotFirstPool":
        if self._pool is None or self._pool.closed:
            raise DatabaseUnavailableError("the connection pool is closed; reopen the palace")
        return self._pool

    def ident(self, name: str) -> sql.Composable:
        """A schema-qualified identifier for one of our tables."""
        return sql.Identifier(self.schema, name)

    def records(self, pk: int) -> sql.Composable:
        """The schema-qualified partition of ``records`` that holds collection ``pk``."""
        return self.ident(records_table(pk))

    def kept(self, key: Hashable, make: Callable[[], T]) -> T:
        """The object kept under ``key`` for as long as this Database lives, made by ``make`` the first
        time: what the floors above keep per palace in a process (a collection's vector index layout
        as last read, the folder this process started, rows not yet counted) lives and goes with it."""
        with self._kept_lock:
            found = self._kept.get(key)
            if found is None:
                found = self._kept[key] = make()
            return found

    # -- units of work --------------------------------------------------------------------
    @property
    def behind_pooler(self) -> bool:
        """Whether the connections go through a connection pooler (known once one has been opened)."""
        pool = self.pool
        if pool.route is None:
            with self.connection():  # a checkout: its connection has been configured, and so recognised
                pass
        return bool(pool.route and pool.route.pooled)

    @property
    def session_dsn(self) -> Optional[str]:
        """The DSN for work that needs a session of its own: ``MEMPALACE_PG_SESSION_DSN`` when set, else
        the DSN itself unless it goes through a pooler (None: no session can be had)."""
        if self.settings.session_dsn:
            return self.settings.session_dsn
        return None if self.behind_pooler else self.settings.dsn

    def _held(self) -> Optional[psycopg.Connection]:
        """The connection of the transaction :meth:`held` holds for this caller on this pool, if any."""
        held = _HELD.get()
        return held[1] if held is not None and held[0] is self._pool else None

    def holding(self) -> bool:
        """Whether this caller is inside :meth:`held` on this database (its writes not yet committed)."""
        return self._held() is not None

    @contextmanager
    def held(self) -> Iterator[psycopg.Connection]:
        """Hold one pooled connection and one transaction until the block ends, and run everything this
        caller does on this database meanwhile in it: the drawers' writes and reads, the knowledge
        graph's, through whatever API makes them (each as a savepoint, so a statement error a caller
        handles leaves the rest usable). Committed when the block ends, rolled back if it raises.
        What makes MemPalace's own write paths atomic across drawers and facts (:mod:`mempalace_pg.mining`).
        Work that needs a session of its own (:meth:`session`: bulk loads, index builds) is not held."""
        if self._held() is not None:
            raise RuntimeError("a held transaction is already open on this database")
        with self.transaction() as conn:
            token = _HELD.set((self._pool, conn))
            try:
                yield conn
            finally:
                _HELD.reset(token)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        held = self._held()
        if held is not None:
            with held.transaction():
                yield held
            return
        try:
            pool = self.pool
            with pool.connection() as conn, _unit(conn, pool, self.settings, atomic=False):
                yield conn
        except PoolTimeout as exc:
            raise pool_timeout_error(self.settings, exc) from None
        except psycopg.errors.ReadOnlySqlTransaction as exc:  # a write on a hot standby
            raise read_only_error(self.settings, exc) from None

    @contextmanager
    def session(self, purpose: str) -> Iterator[psycopg.Connection]:
        """A connection whose session state (settings, advisory locks) lasts until the block ends, in
        autocommit mode: a pooled one, or behind a pooler a connection of its own to the session DSN.
        ``purpose`` names the work in the error raised when there is no session DSN."""
        if not self.settings.session_dsn and not self.behind_pooler:
            with self.connection() as conn:
                yield conn
            return
        dsn = self.session_dsn
        if dsn is None:
            raise ConfigError(
                f"{purpose} needs a database session of its own, and MEMPALACE_PG_DSN "
                f"({redact_dsn(self.settings.dsn)}) goes through a connection pooler, which hands each "
                "transaction to another server connection: set MEMPALACE_PG_SESSION_DSN (config.json key "
                "'postgres_session_dsn') to PostgreSQL's own address, or to a session-mode pool"
            )
        session_settings = replace(self.settings, dsn=dsn)
        with connect(session_settings, autocommit=True) as conn:
            # session settings even when the session DSN is a (session-mode) pool: it was named for that
            _configure(session_settings, session=True)(conn)
            try:
                yield conn
            except psycopg.errors.ReadOnlySqlTransaction as exc:
                raise read_only_error(session_settings, exc) from None

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One pooled connection inside one transaction: committed on success, rolled back on error
        (inside :meth:`held`, a savepoint of the held transaction)."""
        held = self._held()
        if held is not None:
            with held.transaction():
                yield held
            return
        with self.connection() as conn:
            with conn.transaction():
                yield conn

    def run(self, work: Callable[[psycopg.Connection], T], *, atomic: bool = False, retry: bool = True) -> T:
        """Run ``work(conn)`` on a pooled connection, in one transaction if ``atomic``; retry once
        if the connection itself failed (never after a statement error)."""
        held = self._held()
        if held is not None:  # inside held(): no retry (the transaction cannot be replayed)
            try:
                with held.transaction():
                    return work(held)
            except psycopg.errors.ReadOnlySqlTransaction as exc:
                raise read_only_error(self.settings, exc) from None
            except psycopg.errors.QueryCanceled as exc:
                raise statement_timeout_error(self.settings, exc) from None
        attempts = 2 if retry else 1
        pool = self.pool
        for attempt in range(attempts):
            try:
                conn = pool.getconn()
            except PoolTimeout as exc:
                raise pool_timeout_error(self.settings, exc) from None
            try:
                with _unit(conn, pool, self.settings, atomic=atomic):
                    return work(conn)
            except psycopg.errors.ReadOnlySqlTransaction as exc:
                raise read_only_error(self.settings, exc) from None
            except psycopg.errors.QueryCanceled as exc:  # never retried: it would run as long again
                raise statement_timeout_error(self.settings, exc) from None
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                broken = conn.broken or conn.closed
                if not broken:
                    raise
                if attempt + 1 >= attempts:
                    raise describe_connect_error(self.settings, exc) from None
                log.info("mempalace-pg: connection lost (%s); retrying once on a fresh one", exc)
                pool.check()  # drop other dead connections too
            finally:
                pool.putconn(conn)  # the pool discards a broken connection and rolls back a failed one
        raise AssertionError("unreachable")


def pool_timeout_error(settings: Settings, exc: PoolTimeout) -> DatabaseUnavailableError:
    """Why no pooled connection came: one plain connection attempt says what the server answers (it
    refused, or is down), else every connection of the pool is busy. The pool itself retries in the
    background with growing pauses, so this adds one attempt, not a storm."""
    try:
        connect(settings).close()
    except DatabaseUnavailableError as refused:
        return refused
    return DatabaseUnavailableError(
        f"no pooled connection to {redact_dsn(settings.dsn)} came free in time ({exc}): all "
        f"{settings.pool_max_size} of this process's connections are busy. Raise "
        "MEMPALACE_PG_POOL_MAX_SIZE, or look for a statement that holds one (pg_stat_activity)"
    )


def holds_palace(settings: Settings, recorded: dict) -> bool:
    """Whether the database ``settings`` point at already holds the palace a marker ``recorded`` (its
    namespace and key in this schema): then a marker naming another address names this palace all the
    same. Read over a connection of its own, creating nothing; False when it cannot be reached."""
    table = f"{settings.schema}.palaces"
    try:
        with connect(settings, autocommit=True) as conn:
            if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
                return False
            return bool(
                conn.execute(
                    sql.SQL(
                        "SELECT EXISTS (SELECT 1 FROM {} WHERE namespace = %s AND palace_key = %s)"
                    ).format(sql.Identifier(settings.schema, "palaces")),
                    (str(recorded.get("namespace") or ""), str(recorded.get("palace_key") or "")),
                ).fetchone()[0]
            )
    except (DatabaseUnavailableError, psycopg.Error):
        return False


def statement_timeout_error(settings: Settings, exc: Exception) -> StatementTimeoutError:
    """The error for a statement PostgreSQL cancelled (``exc``: its own QueryCanceled)."""
    return StatementTimeoutError(
        f"PostgreSQL cancelled the statement ({str(exc).splitlines()[0]}): it ran past the statement "
        f"timeout, MEMPALACE_PG_STATEMENT_TIMEOUT_MS = {settings.statement_timeout_ms} ms, or was cancelled "
        "by an administrator. Nothing of it was written. Narrow what was asked (a shorter query, a wing or "
        "room filter, fewer results), or raise MEMPALACE_PG_STATEMENT_TIMEOUT_MS"
    )


def read_only_error(settings: Settings, exc: Exception) -> ReadOnlyDatabaseError:
    """The error for a write the server refused because it only reads (``exc``: PostgreSQL's own)."""
    return ReadOnlyDatabaseError(
        f"the database at {redact_dsn(settings.dsn)} is read-only ({str(exc).splitlines()[0]}): it is a hot "
        "standby, or sets default_transaction_read_only. Searches work there; to write, point "
        "MEMPALACE_PG_DSN at the primary"
    )


@dataclass
class _Breadth:
    """A pooled connection's hnsw.ef_search: the ``configured`` one, the ``current`` one (what the
    connection's last statement ran with), and whether it is set per transaction (behind a pooler)."""

    configured: int
    current: int
    per_transaction: bool


#: Each pooled connection's search breadth (see use_search_breadth); gone with the connection.
_BREADTH: "weakref.WeakKeyDictionary[psycopg.Connection, _Breadth]" = weakref.WeakKeyDictionary()


def use_search_breadth(conn: psycopg.Connection, ef_search: Optional[int]) -> None:
    """Give the statements ``conn`` runs next the HNSW search breadth ``ef_search`` (None: the configured
    one). A round trip only when it changes: a connection keeps the breadth of the statement it ran last."""
    state = _BREADTH.get(conn)
    if state is None:
        return  # not one of our pooled connections: its own settings stand
    want = state.configured if ef_search is None else int(ef_search)
    if want != state.current:
        # behind a pooler the checkout is one transaction, and the setting must end with it
        conn.execute("SELECT set_config('hnsw.ef_search', %s, %s)", (str(want), state.per_transaction))
        state.current = want


@dataclass(frozen=True)
class Route:
    """What a pool's connections learn of the way to the server when they are opened: whether a pooler
    stands in between, and the search path their statements need (kept on the pool:
    ``HotFirstPool.route``)."""

    pooled: bool
    search_path: str


@contextmanager
def _unit(
    conn: psycopg.Connection, pool: "HotFirstPool", settings: Settings, *, atomic: bool
) -> Iterator[None]:
    """The scope of one checkout's work: behind a pooler always one transaction, begun with our
    settings for it alone; else a transaction only for ``atomic`` work (the connection autocommits)."""
    route = pool.route
    if route is not None and route.pooled:
        with conn.transaction():
            _begin_pooled(conn, settings, route.search_path)
            yield
    elif atomic:
        with conn.transaction():
            yield
    else:
        yield


def _begin_pooled(conn: psycopg.Connection, settings: Settings, search_path: str) -> None:
    """The first statement of a checkout's transaction behind a pooler: our settings, for it alone."""
    conn.execute(
        "SELECT set_config('statement_timeout', %s, true), set_config('hnsw.ef_search', %s, true), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('search_path', %s, true), "
        "set_config('max_parallel_workers_per_gather', '0', true), set_config('jit', 'off', true)",
        (str(settings.statement_timeout_ms), str(settings.ef_search), search_path),
    )
    state = _BREADTH.get(conn)
    if state is not None:
        state.current = state.configured


_PROBE = "SELECT 1 /* mempalace-pg: does the pooler carry prepared statements? */"


def pooler_carries_prepared_statements(conn: psycopg.Connection) -> bool:
    """Whether the pooler ``conn`` goes through carries protocol-level prepared statements over to its
    server connections (PgBouncer >= 1.21 with max_prepared_statements > 0). Such a pooler prepares
    them on the server under names of its own; one that passes ours through unchanged does not carry
    them, and the probe's statement is deallocated again so that no other client meets its name."""
    try:
        with conn.transaction():
            conn.execute(_PROBE, prepare=True)
            return _probe_names(conn)
    except psycopg.errors.DuplicatePreparedStatement:
        # another client's statement of that name is left on this server connection: names pass through
        return False


def _probe_names(conn: psycopg.Connection) -> bool:
    """Inside the probe's transaction: were our names rewritten (carried), or passed through (then
    deallocated again)?"""
    names = [
        name
        for (name,) in conn.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement = %s", (_PROBE,), prepare=False
        )
    ]
    ours = [name for name in names if name.startswith("_pg3_")]
    for name in ours:
        conn.execute(sql.SQL("DEALLOCATE {}").format(sql.Identifier(name)), prepare=False)
    return bool(names) and not ours


def _configure(
    settings: Settings, *, session: bool = False, learned: Optional[Callable[[Route], None]] = None
):
    def configure(conn: psycopg.Connection) -> None:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        # A pooler answers the connection's handshake itself, with a process id of its own making.
        pid, path = conn.execute(
            "SELECT pg_backend_pid(), concat_ws(', ', current_setting('search_path'), "
            "  (SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n "
            "   ON n.oid = e.extnamespace WHERE e.extname = 'vector'), "
            "  (SELECT 'ag_catalog' FROM pg_extension WHERE extname = 'age'))"
        ).fetchone()
        pooled = pid != conn.info.backend_pid
        if learned is not None:
            learned(Route(pooled, path))
        _BREADTH[conn] = _Breadth(settings.ef_search, settings.ef_search, pooled and not session)
        if pooled and not session:
            # Settings are made per transaction. Prepared statements live in a server session: only a
            # pooler that carries them to whichever server connection runs them can be given any.
            if not pooler_carries_prepared_statements(conn):
                conn.prepare_threshold = None
            return
        # Session settings for every pooled connection: the statement timeout, HNSW search breadth,
        # iterative index scans (filtered queries still return n_results rows), and the schema
        # holding pgvector on the search path so its type and operators resolve wherever it lives,
        # then ag_catalog (AGE's graphid and agtype operators; AGE's cypher() needs it there too).
        # No parallel query: this work is many small statements, starting workers costs more than most
        # of them take, and a search statement's arm that a one-time filter skips still starts its own.
        # No JIT either, for the same reason: a search statement's cost counts its exact-scan arm as a
        # scan of the whole partition (a one-time filter skips it), so in a large palace it crosses
        # jit_above_cost and every call compiled some 300 functions first, seconds at 1M drawers.
        conn.execute(
            "SELECT set_config('statement_timeout', %s, false), "
            "set_config('hnsw.ef_search', %s, false), "
            "set_config('hnsw.iterative_scan', 'relaxed_order', false), "
            "set_config('search_path', %s, false), "
            "set_config('max_parallel_workers_per_gather', '0', false), "
            "set_config('jit', 'off', false)",
            (str(settings.statement_timeout_ms), str(settings.ef_search), path),
        )

    return configure


class HotFirstPool(ConnectionPool):
    """A pool that hands out the connection returned last (psycopg_pool hands out the one idle longest).

    A process that makes one call at a time then keeps using one warm server backend instead of
    alternating between the pool's connections (the pool grows to two as soon as a first caller waits
    for the opening connection): switching backends on every call costs each small statement measurably
    (issue 27: measured ad hoc, raw psycopg on one connection against the pool). The connections idle
    longest stay at the front, where the pool's shrinking closes them first."""

    #: what its connections learned when opened (None until the first is)
    route: Optional[Route] = None

    def _get_ready_connection(self, timeout):
        idle = getattr(self, "_pool", None)
        if idle:  # popleft after rotate(1) takes the most recently returned connection
            idle.rotate(1)
        return super()._get_ready_connection(timeout)


def _shared_pool(settings: Settings) -> "HotFirstPool":
    key = _pool_key(settings)
    with _LOCK:
        pool = _POOLS.get(key)
        if pool is not None and not pool.closed:
            return pool
        pool = HotFirstPool(
            settings.dsn,
            min_size=settings.pool_min_size,
            max_size=settings.pool_max_size,
            kwargs={
                "connect_timeout": settings.connect_timeout_s,
                "application_name": "mempalace-pg",
                "autocommit": True,
                **KEEPALIVES,
            },
            # the pool is bound below, before it opens and its first connection is configured
            configure=_configure(settings, learned=lambda route: setattr(pool, "route", route)),
            timeout=max(5.0, float(settings.connect_timeout_s)),
            name=f"mempalace-pg {redact_dsn(settings.dsn)}",
            open=False,
        )
        pool.open(wait=False)
        _POOLS[key] = pool
        return pool


def close_all() -> None:
    """Close every pool of this process (tests, shutdown). The next Database.get() reopens."""
    with _LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
        _DATABASES.clear()
    for pool in pools:
        pool.close()


__all__ = [
    "Database",
    "pool_timeout_error",
    "holds_palace",
    "read_only_error",
    "use_search_breadth",
    "pooler_carries_prepared_statements",
    "close_all",
]
