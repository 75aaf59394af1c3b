"""Connecting to PostgreSQL, and saying why a connection failed without ever showing the password.

The bottom of the database layer: the pool (:mod:`mempalace_pg.db.pool`) and the schema runner
(:mod:`mempalace_pg.db.schema`) both connect through here, so neither needs the other to connect.
"""

from __future__ import annotations

import psycopg

from mempalace_pg.config import Settings, dsn_target
from mempalace_pg.errors import DatabaseUnavailableError


def scrub_password(message: str, dsn: str) -> str:
    """Remove the DSN's password from an error message, should a driver ever echo it."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        password = conninfo_to_dict(dsn).get("password")
    except Exception:
        password = None
    if password:
        message = message.replace(str(password), "***")
    return message


def describe_connect_error(settings: Settings, exc: BaseException) -> DatabaseUnavailableError:
    target = dsn_target(settings.dsn)
    where = f"{target['host']}:{target['port']}/{target['dbname']}"
    reason = scrub_password(str(exc).strip() or type(exc).__name__, settings.dsn)
    if "too many connections" in reason or "remaining connection slots" in reason:
        # the server answered and refused: retrying at once would only add to the crowd
        hint = (
            "The server has no connection free for this role: close other MemPalace processes, lower "
            "MEMPALACE_PG_POOL_MAX_SIZE, or have a superuser raise the role's CONNECTION LIMIT "
            "(`mempalace-pg db bootstrap --app-role R --connection-limit N`) or max_connections."
        )
    else:
        hint = (
            "Check that the server is running and reachable, and set MEMPALACE_PG_DSN or the "
            "config.json key 'postgres_dsn' to the right DSN."
        )
    return DatabaseUnavailableError(
        f"cannot connect to PostgreSQL at {where} (DSN {settings.redacted_dsn}): {reason}. {hint}"
    )


#: TCP keepalives of every connection the plugin opens (libpq's keepalives_*): a process whose server
#: went away or whose connection was cut (a restarted router, a dropped VPN) finds out within about
#: idle + count x interval = 25 seconds, not the kernel's two hours; a folder or a bulk load's session
#: then exits instead of waiting on a dead socket.
KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}


def connect(settings: Settings, *, autocommit: bool = False) -> psycopg.Connection:
    """A plain (unpooled) connection, for schema work and tools. Raises DatabaseUnavailableError.

    It prepares no statements: through a transaction-mode pooler a prepared statement would be asked
    of server connections that never saw it (these connections run too few queries to gain by it)."""
    try:
        return psycopg.connect(
            settings.dsn,
            autocommit=autocommit,
            connect_timeout=settings.connect_timeout_s,
            application_name="mempalace-pg",
            prepare_threshold=None,
            **KEEPALIVES,
        )
    except psycopg.OperationalError as exc:
        raise describe_connect_error(settings, exc) from None


__all__ = ["KEEPALIVES", "connect", "describe_connect_error", "scrub_password"]
