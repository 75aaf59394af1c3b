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


@dataclass(frozen=True)
class Setting:
    """One setting: where it is read, its default, what values it takes. docs/reference-settings.md is
    rendered from :data:`SETTINGS` (scripts/reference.py), and a unit test fails when the two drift."""

    name: str
    env: str
    #: the key in MemPalace's config.json, or "" where only the environment is read
    key: str
    default: Any
    #: str, int, bool, or "size" (a PostgreSQL memory size such as 512MB)
    kind: Any
    about: str
    #: who reads it: "plugin" (every process, :class:`Settings`), "process" (the index engine and the
    #: hooks, read once when the module loads), "command" (one mempalace-pg command), "image" (the Docker
    #: image's entrypoint, which checks it)
    scope: str = "plugin"
    low: Optional[int] = None
    high: Optional[int] = None
    choices: tuple = ()

    def allowed(self) -> str:
        """The values it takes, in words (the reference's "allowed" column)."""
        if self.choices:
            return " or ".join(f"`{c}`" for c in self.choices)
        if self.kind is bool:
            return "true or false (also 1/0, yes/no, on/off)"
        if self.kind == "size":
            return "a PostgreSQL size: a number and kB, MB, GB or TB, at least 1MB"
        if self.kind is int:
            if self.high is not None:
                return f"a whole number from {self.low or 0} to {self.high}"
            return f"a whole number, {self.low or 0} or more"
        return "text"

    def parse(self, raw: Any, source: str) -> Any:
        """``raw`` as this setting's value, or :class:`ConfigError` naming the setting and ``source``."""
        if source == f"${self.env}":
            label = self.env
        elif source.startswith("config.json"):
            label = f"{source} ({self.env})"
        else:
            label = f"{self.name} ({source})"
        if self.kind is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ConfigError(f"{label} must be true or false, not {raw!r}")
        if self.kind is int:
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ConfigError(f"{label} must be {self.allowed()}, not {raw!r}") from None
            if value < (self.low or 0) or (self.high is not None and value > self.high):
                raise ConfigError(f"{label} must be {self.allowed()}, not {value}")
            return value
        value = str(raw).strip()
        if self.kind == "size" and not SIZE_RE.fullmatch(value):
            raise ConfigError(f"{label} must be {self.allowed()} (e.g. 512MB), not {raw!r}")
        if self.choices and value not in self.choices:
            raise ConfigError(f"{label} must be {self.allowed()}, not {raw!r}")
        return value


#: A PostgreSQL memory size as maintenance_work_mem takes it, from 1MB up.
SIZE_RE = re.compile(r"(?:[1-9][0-9]{3,}kB|[1-9][0-9]*(?:MB|GB|TB))")

#: Every setting the plugin, its commands and its Docker image read: the one table.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "dsn",
        "MEMPALACE_PG_DSN",
        "postgres_dsn",
        DEFAULT_DSN,
        str,
        "the PostgreSQL DSN (URL or `key=value` form); never printed with its password",
    ),
    # Where work that needs a session of its own goes (the vector index folder, bulk loads, maintenance)
    # when MEMPALACE_PG_DSN goes through a connection pooler: PostgreSQL itself, or a session-mode pool.
    Setting(
        "session_dsn",
        "MEMPALACE_PG_SESSION_DSN",
        "postgres_session_dsn",
        "",
        str,
        "DSN for work that needs a session (the folder, bulk loads) when the DSN goes through a "
        "pooler; empty: the DSN itself",
    ),
    Setting(
        "schema",
        "MEMPALACE_PG_SCHEMA",
        "postgres_schema",
        DEFAULT_SCHEMA,
        str,
        f"schema holding the tables (1-{NAME_MAX} characters a-z, 0-9, _, starting with a letter); "
        "the graph is `<schema>_kg`",
    ),
    Setting(
        "namespace",
        "MEMPALACE_PG_NAMESPACE",
        "postgres_namespace",
        "",
        str,
        "tenant namespace: palaces in two namespaces never see each other (1-64 characters "
        "A-Z, a-z, 0-9, _, . or -)",
    ),
    Setting(
        "pool_min_size",
        "MEMPALACE_PG_POOL_MIN_SIZE",
        "postgres_pool_min_size",
        1,
        int,
        "connections a process keeps open",
        low=0,
        high=1000,
    ),
    Setting(
        "pool_max_size",
        "MEMPALACE_PG_POOL_MAX_SIZE",
        "postgres_pool_max_size",
        8,
        int,
        "connections a process opens at most (count these against a role's connection limit)",
        low=1,
        high=1000,
    ),
    Setting(
        "statement_timeout_ms",
        "MEMPALACE_PG_STATEMENT_TIMEOUT_MS",
        "postgres_statement_timeout_ms",
        60_000,
        int,
        "statement timeout in milliseconds (0: none)",
        low=0,
    ),
    Setting(
        "connect_timeout_s",
        "MEMPALACE_PG_CONNECT_TIMEOUT_S",
        "postgres_connect_timeout_s",
        10,
        int,
        "how long to wait for a connection, in seconds",
        low=1,
        high=3600,
    ),
    Setting(
        "auto_upgrade",
        "MEMPALACE_PG_AUTO_UPGRADE",
        "postgres_auto_upgrade",
        True,
        bool,
        "upgrade an older schema on first use (false: `mempalace-pg db upgrade` does it)",
    ),
    Setting(
        "ef_search",
        "MEMPALACE_PG_EF_SEARCH",
        "postgres_ef_search",
        150,
        int,
        "HNSW `ef_search` for queries (pgvector's limit is 1000)",
        low=1,
        high=1000,
    ),
    Setting(
        "lexical",
        "MEMPALACE_PG_LEXICAL",
        "postgres_lexical",
        "bm25",
        str,
        "how `lexical_search` ranks (MemPalace's union search and closet boosts use it): `bm25`, "
        "SQLite FTS5's BM25 over the whole collection; `chroma`, as MemPalace's Chroma backend ranks, "
        "for the same answers as a Chroma palace (scans every drawer: for palaces of Chroma's size)",
        choices=LEXICAL_MODES,
    ),
    Setting(
        "folder",
        "MEMPALACE_PG_FOLDER",
        "",
        "on",
        str,
        "start folder processes that build the vector index (`off`: never; rows are then searched "
        "exactly until `mempalace-pg db reindex`)",
        scope="process",
        choices=("on", "off"),
    ),
    Setting(
        "build_memory",
        "MEMPALACE_PG_BUILD_MEMORY",
        "",
        "1GB",
        "size",
        "memory for building a vector index segment (`maintenance_work_mem`); it also bounds a "
        "segment's rows (about 650,000 of 384 dimensions at 1GB)",
        scope="process",
    ),
    Setting(
        "backlog_rows",
        "MEMPALACE_PG_BACKLOG_ROWS",
        "",
        16000,
        int,
        "rows waiting for the vector index past which a writer waits for the folder (0: never)",
        scope="process",
        low=0,
    ),
    Setting(
        "ef_construction",
        "MEMPALACE_PG_EF_CONSTRUCTION",
        "",
        256,
        int,
        "the construction search of a vector index segment's HNSW build (`ef_construction`): lower builds "
        "faster and finds fewer of the true nearest rows (the recall of each value: benchmarks/RESULTS.md, "
        '"Index parameters")',
        scope="process",
        low=32,
        high=1000,
    ),
    Setting(
        "build_workers",
        "MEMPALACE_PG_BUILD_WORKERS",
        "",
        1,
        int,
        "parallel workers of a segment build (0 where pgvector is older than 0.8.2, whatever this says)",
        scope="process",
        low=0,
        high=64,
    ),
    Setting(
        "mcp_tools",
        "MEMPALACE_PG_MCP_TOOLS",
        "",
        False,
        bool,
        "MemPalace's own MCP server (`mempalace serve`, `python -m mempalace.mcp_server`) offers the "
        "`pg_*` tools too",
        scope="process",
    ),
    Setting(
        "app_password",
        "MEMPALACE_APP_PASSWORD",
        "",
        "",
        str,
        "`mempalace-pg db bootstrap --app-role R`: the role's password (`--app-password-env` names "
        "another variable)",
        scope="command",
    ),
    Setting(
        "pgvector_dsn",
        "MEMPALACE_PGVECTOR_DSN",
        "",
        "",
        str,
        "`mempalace-pg migrate` from a built-in `pgvector` palace: that palace's database, as "
        "MemPalace reads it",
        scope="command",
    ),
    Setting(
        "image_postgres_password",
        "POSTGRES_PASSWORD",
        "",
        "",
        str,
        "the superuser's password, on the first start (an empty volume); or POSTGRES_PASSWORD_FILE, "
        "a file holding it (Docker secrets)",
        scope="image",
    ),
    Setting(
        "image_app_password",
        "MEMPALACE_APP_PASSWORD",
        "",
        "",
        str,
        "the application role's password, on the first start; or MEMPALACE_APP_PASSWORD_FILE",
        scope="image",
    ),
    Setting(
        "image_db",
        "POSTGRES_DB",
        "",
        "mempalace",
        str,
        "the database created on the first start",
        scope="image",
    ),
    Setting(
        "image_app_user",
        "MEMPALACE_APP_USER",
        "",
        "mempalace",
        str,
        "the application role (no superuser) created on the first start",
        scope="image",
    ),
    Setting(
        "image_app_connection_limit",
        "MEMPALACE_APP_CONNECTION_LIMIT",
        "",
        64,
        int,
        "the application role's connection limit",
        scope="image",
        low=1,
    ),
    Setting(
        "image_shared_buffers",
        "MEMPALACE_PG_SHARED_BUFFERS",
        "",
        "",
        "size",
        "`shared_buffers`; empty: a quarter of the container's memory, from 128MB to 8GB",
        scope="image",
    ),
    Setting(
        "image_tls_source",
        "MEMPALACE_PG_TLS_SOURCE",
        "",
        "/etc/mempalace-pg/tls",
        str,
        "a directory holding your `server.crt` and `server.key`; without them the image makes a CA "
        "and a certificate of its own",
        scope="image",
    ),
    Setting(
        "image_tls_hostnames",
        "MEMPALACE_PG_TLS_HOSTNAMES",
        "",
        "",
        str,
        "more names for the image's own certificate (space-separated), e.g. the host's LAN name",
        scope="image",
    ),
    Setting(
        "image_pgbouncer_pool",
        "PGBOUNCER_DEFAULT_POOL_SIZE",
        "",
        20,
        int,
        "PgBouncer (compose profile `pooler`): server connections per database and role",
        scope="image",
        low=1,
    ),
    Setting(
        "image_pgbouncer_clients",
        "PGBOUNCER_MAX_CLIENT_CONN",
        "",
        500,
        int,
        "PgBouncer: client connections it accepts",
        scope="image",
        low=1,
    ),
    Setting(
        "image_pgbouncer_prepared",
        "PGBOUNCER_MAX_PREPARED_STATEMENTS",
        "",
        200,
        int,
        "PgBouncer: prepared statements it carries per server connection (0 turns them off: slower searches)",
        scope="image",
    ),
    Setting(
        "image_pgbouncer_server_host",
        "PGBOUNCER_SERVER_HOST",
        "",
        "db",
        str,
        "PgBouncer: the PostgreSQL host it forwards to",
        scope="image",
    ),
    Setting(
        "image_pgbouncer_server_tls",
        "PGBOUNCER_SERVER_TLS_SSLMODE",
        "",
        "verify-full",
        str,
        "PgBouncer: TLS to PostgreSQL (libpq's sslmode values)",
        scope="image",
    ),
    Setting(
        "image_pgbouncer_client_tls",
        "PGBOUNCER_CLIENT_TLS_SSLMODE",
        "",
        "allow",
        str,
        "PgBouncer: TLS from clients (`require` refuses clients without it)",
        scope="image",
    ),
    Setting(
        "image_stack",
        "MEMPALACE_PG_IMAGE_STACK",
        "",
        "trixie",
        str,
        "which Debian the image is built from: `trixie` (PostgreSQL 17, AGE 1.5) or `sid` "
        "(PostgreSQL 18, AGE 1.8)",
        scope="image",
        choices=("trixie", "sid"),
    ),
)

_BY_NAME = {s.name: s for s in SETTINGS}


def process_setting(name: str) -> Any:
    """A setting only the environment gives (scope "process"), parsed and checked: a bad value raises
    :class:`ConfigError` naming the variable and what it takes."""
    setting = _BY_NAME[name]
    raw = os.environ.get(setting.env)
    if raw is None or raw.strip() == "":
        return setting.default
    return setting.parse(raw, f"${setting.env}")


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
        for setting in SETTINGS:
            if setting.scope != "plugin":
                continue
            name, env, key = setting.name, setting.env, setting.key
            if overrides.get(name) is not None:
                values[name] = setting.parse(overrides[name], "options")
                continue
            raw = os.environ.get(env)
            if raw is not None and raw.strip() != "":
                values[name] = setting.parse(raw, f"${env}")
                continue
            if file_config is None:
                file_config = _read_config_json()
            if file_config.get(key) not in (None, ""):
                values[name] = setting.parse(file_config[key], f"config.json key {key!r}")
                continue
            values[name] = setting.default
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
    "Setting",
    "SETTINGS",
    "process_setting",
    "validate_identifier",
    "redact_dsn",
    "dsn_target",
    "Settings",
]
