"""Errors of mempalace-pg. Each is a MemPalace ``BackendError``, so MemPalace reports it as a backend error.

Every message says what is wrong and what to do about it, and never contains a password.
"""

from mempalace_pg import backend_base

# MemPalace's backend base module alone, not the backends package with every backend it ships
backend_base.load()

from mempalace.backends.base import BackendError  # noqa: E402  (after load: not the package)


class DatabaseUnavailableError(BackendError):
    """The PostgreSQL server cannot be reached or refused the connection."""


class ExtensionMissingError(BackendError):
    """A required PostgreSQL extension (pgvector, Apache AGE) is not installed or cannot be created."""


class SchemaVersionError(BackendError):
    """The database schema is older (or newer) than this version of mempalace-pg."""


class ReadOnlyDatabaseError(BackendError, PermissionError):
    """A write reached a database that only reads: a hot standby, or ``default_transaction_read_only``.

    Also a ``PermissionError``, as a collection opened read-only refuses a write."""


class InvalidRecordError(BackendError, ValueError):
    """A record cannot be stored as given (NaN in a vector, NUL byte in text, duplicate ids, ...).

    Also a ``ValueError``, as MemPalace's built-in backends raise for bad input.
    """


class BusyError(BackendError, TimeoutError):
    """Maintenance waited for a running vector index build (or another maintenance run) and gave up.

    Also a ``TimeoutError``: trying again later succeeds."""


class StatementTimeoutError(BackendError, TimeoutError):
    """PostgreSQL cancelled a statement: it ran past the statement timeout
    (MEMPALACE_PG_STATEMENT_TIMEOUT_MS), or an administrator cancelled it. Nothing of it was written.
    Also a ``TimeoutError``."""


class KnownDefectError(BackendError):
    """Refused: the server has a known defect that lets one palace role reach another's palace (pgvector
    < 0.8.2), and what was asked would make a second palace role there."""


__all__ = [
    "DatabaseUnavailableError",
    "ExtensionMissingError",
    "SchemaVersionError",
    "ReadOnlyDatabaseError",
    "InvalidRecordError",
    "BusyError",
    "StatementTimeoutError",
    "KnownDefectError",
]
