"""Settings: where the database is and how to talk to it.

MemPalace passes a backend nothing but ``{"read_only": True}``, so the plugin reads its own
settings, each from the first place that has it:

1. an environment variable (``MEMPALACE_PG_*``),
2. a key in MemPalace's ``config.json`` (``postgres_*``, next to MemPalace's own keys),
3. a default.

See docs/configuration.md for the table of settings.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit, urlunsplit

DEFAULT_DSN = "postgresql://localhost:5432/mempalace"
DEFAULT_SCHEMA = "mempalace"

#: The one rule for every name this package composes into SQL (schema, graph, role, label, index):
#: lower-case letters, digits and _, starting with a letter, at most 63 characters (PostgreSQL's
#: limit). A name the user chooses (schema, role) may have at most NAME_MAX of them, so that the names
#: derived from it (``<schema>_kg``, index and lock names) still fit.
IDENTIFIER_RE = re.compile(r"[a-z][a-z0-9_]{0,62}")
NAME_MAX = 48

#: How lexical_search may rank: SQLite FTS5's BM25, or as MemPalace's Chroma backend does.
LEXICAL_MODES = ("bm25", "chroma")

# setting name -> (environment variable, config.json key, default, parser)
_SETTINGS: dict[str, tuple[str, str, Any, type]] = {
    "dsn": ("MEMPALACE_PG_DSN", "postgres_dsn", DEFAULT_DSN, str),
    # Where work that needs a session of its own goes (the vector index folder, bulk loads, maintenance)
    # when MEMPALACE_PG_DSN goes through a connection pooler: PostgreSQL itself, or a session-mode pool.
    "session_dsn": ("MEMPALACE_PG_SESSION_DSN", "postgres_session_dsn", "", str),
    "schema": ("MEMPALACE_PG_SCHEMA", "postgres_schema", DEFAULT_SCHEMA, str),
    "namespace": ("MEMPALACE_PG_NAMESPACE", "postgres_namespace", "", str),
    "pool_min_size": ("MEMPALACE_PG_POOL_MIN_SIZE", "postgres_pool_min_size", 1, int),
    "pool_max_size": ("MEMPALACE_PG_POOL_MAX_SIZE", "postgres_pool_max_size", 8, int),
    "statement_timeout_ms": (
        "MEMPALACE_PG_STATEMENT_TIMEOUT_MS",
        "postgres_statement_timeout_ms",
        60_000,
        int,
    ),
    "connect_timeout_s": ("MEMPALACE_PG_CONNECT_TIMEOUT_S", "postgres_connect_timeout_s", 10, int),
    "auto_upgrade": ("MEMPALACE_PG_AUTO_UPGRADE", "postgres_auto_upgrade", True, bool),
    "ef_search": ("MEMPALACE_PG_EF_SEARCH", "postgres_ef_search", 150, int),
    # how lexical_search ranks: "bm25" (SQLite FTS5's BM25) or "chroma" (MemPalace's Chroma backend)
    "lexical": ("MEMPALACE_PG_LEXICAL", "postgres_lexical", "bm25", str),
}


class ConfigError(ValueError):
    """A setting has a value we cannot use. The message names the setting and where it came from."""


def validate_identifier(value: str, what: str, *, longest: int = NAME_MAX) -> str:
    """Return ``value`` if it is safe to use as a SQL identifier of at most ``longest`` characters
    (IDENTIFIER_RE), else raise :class:`ConfigError`. Derived names pass ``longest=63``."""
    if not isinstance(value, str) or not IDENTIFIER_RE.fullmatch(value) or len(value) > longest:
        raise ConfigError(
            f"{what} {value!r} is not a valid name: use 1-{longest} characters a-z, 0-9 and _, "
            "starting with a letter"
        )
    return value


def redact_dsn(dsn: str) -> str:
    """The DSN with any password replaced by ``***`` (URL form and key=value form)."""
    if not dsn:
        return dsn
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
        except ValueError:
            return "<unparseable DSN>"
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, hostinfo = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{hostinfo}"
        query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return re.sub(r"(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", dsn)


def dsn_target(dsn: str) -> dict:
    """Host, port and database of a DSN: what a palace marker records (never user or password)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(dsn)
    except Exception as exc:  # psycopg.ProgrammingError for a malformed DSN
        raise ConfigError(f"the PostgreSQL DSN {redact_dsn(dsn)!r} cannot be parsed: {exc}") from None
    host = info.get("host") or info.get("hostaddr") or "localhost"
    try:
        port = int(info.get("port") or 5432)
    except ValueError:
        raise ConfigError(
            f"the PostgreSQL DSN {redact_dsn(dsn)!r} cannot be parsed: port {info.get('port')!r} "
            "is not a number"
        ) from None
    return {
        "host": str(host),
        "port": port,
        "dbname": str(info.get("dbname") or info.get("user") or ""),
    }


def _mempalace_config_file() -> Optional[Path]:
    try:
        from mempalace.config import MempalaceConfig

        return Path(MempalaceConfig().config_dir) / "config.json"
    except Exception:  # MemPalace not importable or its config unreadable: env + defaults only
        return None


def _read_config_json() -> dict:
    path = _mempalace_config_file()
    if path is None or not path.is_file():
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _parse(name: str, raw: Any, kind: type, source: str) -> Any:
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name} from {source} must be true or false, not {raw!r}")
    if kind is int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{name} from {source} must be a whole number, not {raw!r}") from None
        if value < 0:
            raise ConfigError(f"{name} from {source} must not be negative")
        return value
    return str(raw).strip()


@dataclass(frozen=True)
class Settings:
    """Resolved settings for one process. Cheap to build; build it when you need it."""

    dsn: str = DEFAULT_DSN
    session_dsn: str = ""
    schema: str = DEFAULT_SCHEMA
    namespace: str = ""
    pool_min_size: int = 1
    pool_max_size: int = 8
    statement_timeout_ms: int = 60_000
    connect_timeout_s: int = 10
    auto_upgrade: bool = True
    ef_search: int = 150
    lexical: str = "bm25"

    @classmethod
    def load(cls, overrides: Optional[dict] = None) -> "Settings":
        """Resolve every setting: ``overrides`` (API callers), then env, then config.json, then default."""
        overrides = dict(overrides or {})
        file_config: Optional[dict] = None
        values: dict[str, Any] = {}
        for name, (env, key, default, kind) in _SETTINGS.items():
            if overrides.get(name) is not None:
                values[name] = _parse(name, overrides[name], kind, "options")
                continue
            raw = os.environ.get(env)
            if raw is not None and raw.strip() != "":
                values[name] = _parse(name, raw, kind, f"${env}")
                continue
            if file_config is None:
                file_config = _read_config_json()
            if file_config.get(key) not in (None, ""):
                values[name] = _parse(name, file_config[key], kind, f"config.json key {key!r}")
                continue
            values[name] = default
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        validate_identifier(self.schema, "schema (MEMPALACE_PG_SCHEMA / postgres_schema)")
        if self.namespace and not re.match(r"^[A-Za-z0-9_.\-]{1,64}$", self.namespace):
            raise ConfigError(
                f"namespace {self.namespace!r} must be 1-64 characters A-Z, a-z, 0-9, _, . or -"
            )
        if self.pool_max_size < 1 or self.pool_min_size > self.pool_max_size:
            raise ConfigError(
                f"pool sizes must satisfy 0 <= min <= max and max >= 1 "
                f"(got min={self.pool_min_size}, max={self.pool_max_size})"
            )
        if not 1 <= self.ef_search <= 1000:
            raise ConfigError("ef_search must be between 1 and 1000 (pgvector's limit)")
        if self.lexical not in LEXICAL_MODES:
            raise ConfigError(
                f"lexical (MEMPALACE_PG_LEXICAL / postgres_lexical) must be one of "
                f"{', '.join(LEXICAL_MODES)}, not {self.lexical!r}"
            )
        dsn_target(self.dsn)  # raises ConfigError for a malformed DSN
        if self.session_dsn:
            dsn_target(self.session_dsn)

    @property
    def redacted_dsn(self) -> str:
        return redact_dsn(self.dsn)

    @property
    def graph(self) -> str:
        """The Apache AGE graph holding the knowledge graph: the schema's name + ``_kg``."""
        return f"{self.schema}_kg"


__all__ = [
    "DEFAULT_DSN",
    "DEFAULT_SCHEMA",
    "IDENTIFIER_RE",
    "NAME_MAX",
    "ConfigError",
    "validate_identifier",
    "redact_dsn",
    "dsn_target",
    "Settings",
]
