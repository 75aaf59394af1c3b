"""The database schema: plain SQL files under ``sql/``, versioned and applied by Alembic (``migrations/``).

``ensure_schema(settings)`` runs once per process per (DSN, schema), before the pool is used:

* a fresh database gets the extensions and the schema, under an advisory lock, so two processes
  starting at once apply it once;
* a schema behind the code is upgraded when ``auto_upgrade`` is on (the default), otherwise use
  stops with the exact command to run;
* a schema ahead of the code (a newer mempalace-pg wrote it) stops with an error.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Optional

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from mempalace_pg.config import ConfigError, Settings, dsn_target, validate_identifier
from mempalace_pg.db import defects, locks
from mempalace_pg.db.connect import connect
from mempalace_pg.db.defects import version_tuple
from mempalace_pg.errors import ExtensionMissingError, SchemaVersionError

log = logging.getLogger(__name__)

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # mempalace_pg/, above db/


def _data_dir(name: str) -> Path:
    """``sql/`` or ``migrations/``: shipped inside the wheel, or beside the package in a checkout."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"mempalace-pg's {name}/ directory is missing from the installation")


def sql_dir() -> Path:
    return _data_dir("sql")


def migrations_dir() -> Path:
    return _data_dir("migrations")


def _alembic_config(settings: Settings, scripts: Optional[Path] = None):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(scripts or migrations_dir()))
    cfg.attributes["settings"] = settings
    return cfg


#: The schema revision this code needs: the head of migrations/versions (a test keeps them equal).
#: Comparing against a constant spares every process importing Alembic and SQLAlchemy (~0.2 s)
#: when the database is already current, which is nearly always.
HEAD_REVISION = "0019_covering_bits"


@lru_cache(maxsize=1)
def head_revision() -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(migrations_dir()))
    heads = script.get_heads()
    if len(heads) != 1:
        raise SchemaVersionError(f"mempalace-pg's migrations have {len(heads)} heads; expected one")
    return heads[0]


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(migrations_dir()))
    return {rev.revision for rev in script.walk_revisions()}


def current_revision(conn: psycopg.Connection, schema: str) -> Optional[str]:
    """The revision recorded in ``<schema>.alembic_version``, or None for a fresh database."""
    exists = conn.execute(
        "SELECT to_regclass(format('%%I.alembic_version', %s::text)) IS NOT NULL", (schema,)
    ).fetchone()[0]
    if not exists:
        return None
    row = conn.execute(
        sql.SQL("SELECT version_num FROM {}").format(sql.Identifier(schema, "alembic_version"))
    ).fetchone()
    return row[0] if row else None


def server_major(conn: psycopg.Connection) -> int:
    return conn.info.server_version // 10000


#: Oldest versions this code runs on: PostgreSQL 15 (UNIQUE NULLS NOT DISTINCT), pgvector 0.8.0
#: (halfvec indexes, iterative index scans).
MIN_POSTGRES = 15
MIN_PGVECTOR = (0, 8, 0)


def check_server(conn: psycopg.Connection) -> None:
    """Refuse, with what to install, a server or pgvector older than this code needs, or a database
    that cannot hold every text MemPalace writes (the schema's key functions assume UTF-8)."""
    encoding = conn.execute("SELECT current_setting('server_encoding')").fetchone()[0]
    if encoding.upper() not in ("UTF8", "UTF-8"):
        raise ExtensionMissingError(
            f"database {conn.info.dbname!r} is encoded in {encoding}; mempalace-pg needs a UTF-8 database "
            "(create one with `CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0`)."
        )
    major = server_major(conn)
    if major < MIN_POSTGRES:
        raise ExtensionMissingError(
            f"mempalace-pg needs PostgreSQL {MIN_POSTGRES} or newer; this server is {major}. "
            "Upgrade the server."
        )
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if row and version_tuple(row[0]) < MIN_PGVECTOR:
        wanted = ".".join(map(str, MIN_PGVECTOR))
        raise ExtensionMissingError(
            f"mempalace-pg needs pgvector {wanted} or newer; database {conn.info.dbname!r} has {row[0]}. "
            f"Install a newer postgresql-{major}-pgvector, then run `ALTER EXTENSION vector UPDATE;`."
        )


def _extension_created(conn: psycopg.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (name,)).fetchone() is not None


def _extension_available(conn: psycopg.Connection, name: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", (name,)).fetchone() is not None
    )


def create_if_allowed(conn: psycopg.Connection, name: str) -> bool:
    """Create the optional extension ``name`` when the server has it and this role may; whether it is
    there afterwards. Never an error: ``doctor`` says what is missing and how to add it."""
    if _extension_created(conn, name):
        return True
    if not _extension_available(conn, name):
        return False
    try:
        with conn.transaction():
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(name)))
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UniqueViolation):
        pass  # not allowed (a superuser's bootstrap creates it), or created concurrently
    return _extension_created(conn, name)


def require_extension(conn: psycopg.Connection, name: str, package: str, project_url: str) -> None:
    """Create extension ``name`` if needed; raise ExtensionMissingError naming what to install."""
    if _extension_created(conn, name):
        return
    available = _extension_available(conn, name)
    major = server_major(conn)
    if not available:
        raise ExtensionMissingError(
            f"the PostgreSQL {major} server has no '{name}' extension: install the package "
            f"{package.format(major=major)} on the database server (Debian/Ubuntu/PGDG naming; "
            f"see {project_url}), then retry."
        )
    try:
        with conn.transaction():
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(name)))
    except psycopg.errors.InsufficientPrivilege:
        db = conn.info.dbname
        raise ExtensionMissingError(
            f"the '{name}' extension is installed on the server but not created in database "
            f"{db!r}, and this role may not create it: ask a superuser to run "
            f"`CREATE EXTENSION {name};` in {db!r} (or run `mempalace-pg db upgrade` as a superuser)."
        ) from None
    except psycopg.errors.UniqueViolation:
        pass  # created concurrently by another process


def ensure_schema(settings: Settings) -> str:
    """Make sure ``settings.schema`` is at the code's revision; return that revision."""

    with connect(settings, autocommit=True) as conn:
        check_server(conn)
        try:
            current = current_revision(conn, settings.schema)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise schema_access_error(settings, exc) from None
        if current == HEAD_REVISION:
            return current
        head = head_revision()
        if current is not None and current not in known_revisions():
            raise SchemaVersionError(
                f"schema {settings.schema!r} is at revision {current!r}, newer than this mempalace-pg "
                f"(head {head!r}): upgrade the package (pip install -U mempalace-pg)."
            )
        if conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
            raise SchemaVersionError(
                f"schema {settings.schema!r} is at revision {current or 'none'!r} but this mempalace-pg "
                f"needs {head!r}, and this server is a read-only hot standby: run `mempalace-pg db upgrade` "
                "against the primary (the standby follows it)."
            )
        if current is not None and not settings.auto_upgrade:
            raise SchemaVersionError(
                f"schema {settings.schema!r} is at revision {current!r} but this mempalace-pg needs "
                f"{head!r}: run `mempalace-pg db upgrade` (auto-upgrade is off: "
                "MEMPALACE_PG_AUTO_UPGRADE=0)."
            )
    upgrade(settings)
    return head


def schema_access_error(settings: Settings, exc: Exception) -> SchemaVersionError:
    """The error for a schema this role may not use (PostgreSQL's ``permission denied``, ``exc``)."""
    return SchemaVersionError(
        f"this role may not use schema {settings.schema!r} in {dsn_target(settings.dsn)['dbname']!r} "
        f"({str(exc).splitlines()[0]}): each person's palace lives in a schema their role owns. Set "
        "MEMPALACE_PG_SCHEMA to yours, or have a superuser give you one: MEMPALACE_APP_PASSWORD=... "
        "mempalace-pg db bootstrap --app-role <you> --schema <you>"
    )


def check_schema_is_for(settings: Settings, role: str) -> None:
    """ConfigError unless ``settings.schema`` and its graph are free, or ``role``'s already."""
    validate_identifier(role, "application role")
    with connect(settings, autocommit=True) as conn:
        owners = conn.execute(
            "SELECT 'schema ' || quote_literal(%s), pg_get_userbyid(nspowner) FROM pg_namespace "
            "WHERE nspname = %s",
            (settings.schema, settings.schema),
        ).fetchall()
        if conn.execute("SELECT to_regclass('ag_catalog.ag_graph')").fetchone()[0] is not None:
            owners += conn.execute(
                "SELECT 'graph ' || quote_literal(%s), pg_get_userbyid(n.nspowner) "
                "FROM ag_catalog.ag_graph g JOIN pg_namespace n ON n.oid = g.namespace WHERE g.name = %s",
                (settings.graph, settings.graph),
            ).fetchall()
    for what, owner in owners:
        if owner != role:
            raise ConfigError(
                f"the {what} already exists and belongs to {owner!r}, not {role!r}: choose another "
                "--schema, or drop it first"
            )


def create_schema_as(settings: Settings, role: str) -> str:
    """Make ``settings.schema`` (and its graph) at the code's revision as ``role``, over the superuser's
    connection with the role set (so everything in it is the role's own); a schema that exists must be
    the role's already. Returns the revision."""
    check_schema_is_for(settings, role)
    params = conninfo_to_dict(settings.dsn)
    params["options"] = " ".join(filter(None, [params.get("options"), f"-c role={role}"]))
    return upgrade(replace(settings, dsn=make_conninfo(**params)))


def upgrade(settings: Settings, revision: str = "head", *, scripts: Optional[Path] = None) -> str:
    """Apply migrations up to ``revision`` under an advisory lock; return the resulting revision.

    ``scripts``: an Alembic script directory to take the revisions from instead of the package's own
    ``migrations/`` (a copy with revisions of your own on top of ours)."""
    from alembic import command

    with connect(settings, autocommit=True) as conn:
        require_extension(
            conn, "vector", "postgresql-{major}-pgvector", "https://github.com/pgvector/pgvector#installation"
        )
        require_extension(
            conn, "age", "postgresql-{major}-age", "https://age.apache.org/getstarted/quickstart"
        )
        # optional: new vector index segments are read into shared buffers with it (engine/warm.py)
        create_if_allowed(conn, "pg_prewarm")
    cfg = _alembic_config(settings, scripts=scripts)
    with connect(settings, autocommit=True) as conn:
        try:
            current = current_revision(conn, settings.schema)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise schema_access_error(settings, exc) from None
        target = revision
        if revision == "head":
            from alembic.script import ScriptDirectory

            target = ScriptDirectory.from_config(cfg).get_current_head()
        # A revision that alters a collection's table would wait for a folder's concurrent build, which
        # waits for the revision's transaction: no build may run while one is applied (db/locks.py).
        pks = collection_pks(conn, settings.schema) if current not in (None, target) else []
        keys = [locks.segments_key(settings.schema, pk) for pk in pks]
        with locks.held(conn, keys, what=f"the upgrade of schema {settings.schema!r}"):
            command.upgrade(cfg, revision)
        return current_revision(conn, settings.schema) or ""


def drop(settings: Settings, *, lock_timeout_s: float = 30.0) -> dict:
    """Drop ``settings.schema`` (every palace in it) and its AGE graph; returns what was dropped.

    Safe beside the schema's folders: it first holds every collection's segments lock (waiting for a
    running build to end, db/locks.py), so no build meets the DROP; a folder then finds its schema gone
    and exits. A DROP that waits longer than ``lock_timeout_s`` for a table another session uses gives up
    with :class:`BusyError` and changes nothing."""
    from mempalace_pg.errors import BusyError

    validate_identifier(settings.schema, "schema")
    with connect(settings, autocommit=True) as conn:
        keys = [locks.segments_key(settings.schema, pk) for pk in collection_pks(conn, settings.schema)]
        with locks.held(conn, keys, what=f"dropping schema {settings.schema!r}"):
            try:
                with conn.transaction():
                    conn.execute(
                        "SELECT set_config('lock_timeout', %s, true)", (str(int(lock_timeout_s * 1000)),)
                    )
                    return _drop_schema_and_graph(conn, settings.schema, settings.graph)
            except psycopg.errors.LockNotAvailable:
                raise BusyError(
                    f"schema {settings.schema!r} is in use: another session held one of its tables for "
                    f"{lock_timeout_s:.0f} s. Nothing was dropped; stop what uses the palace (an MCP server, "
                    "a mine) and try again."
                ) from None
            except psycopg.errors.InsufficientPrivilege as exc:
                raise schema_access_error(settings, exc) from None


def _drop_schema_and_graph(conn: psycopg.Connection, schema: str, graph: str) -> dict:
    """The statements of :func:`drop`, in its transaction."""
    found = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()[0]
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    graphs = 0
    if conn.execute("SELECT to_regclass('ag_catalog.ag_graph')").fetchone()[0] is not None:  # AGE created
        # AGE's DDL functions need ag_catalog on the path even when called qualified (apache/age#2504)
        conn.execute("SELECT set_config('search_path', 'ag_catalog, public', true)")
        graphs = len(
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s", (graph,)
            ).fetchall()
        )
    return {"schema": schema if found else None, "graph": graph if graphs else None}


def records_table(pk: int) -> str:
    """The name of collection ``pk``'s partition of ``records`` (the one place it is spelled); its vector
    index segments are named after it (``<table>_vec_<hi>_<token>``)."""
    return f"records_c{int(pk)}"


def records_identifier(schema: str, pk: int) -> sql.Identifier:
    """Collection ``pk``'s partition of ``records`` in ``schema``, quoted for a statement."""
    return sql.Identifier(schema, records_table(pk))


def collection_pks(conn: psycopg.Connection, schema: str) -> list[int]:
    """The collections stored in ``schema`` (none when it has no collections table yet)."""
    table = sql.Identifier(schema, "collections")
    if conn.execute("SELECT to_regclass(%s)", (table.as_string(conn),)).fetchone()[0] is None:
        return []
    return [pk for (pk,) in conn.execute(sql.SQL("SELECT collection_pk FROM {} ORDER BY 1").format(table))]


# -- used by migrations/env.py and the revision files ------------------------------------


def run_migrations_online(context) -> None:
    """Body of migrations/env.py: connect, lock, set search_path, run the revisions."""
    import sqlalchemy as sa

    config = context.config
    settings: Settings = config.attributes.get("settings") or Settings.load()
    engine = sa.create_engine(
        "postgresql+psycopg://",
        creator=lambda: psycopg.connect(
            settings.dsn,
            connect_timeout=settings.connect_timeout_s,
            application_name="mempalace-pg migrate",
            prepare_threshold=None,  # as connect() does: safe through a transaction-mode pooler
        ),
        poolclass=sa.pool.NullPool,
    )
    with engine.connect() as connection:
        raw = connection.connection.driver_connection
        context.configure(
            connection=connection,
            version_table_schema=settings.schema,
            transactional_ddl=True,
        )
        with context.begin_transaction():
            # Serialize concurrent first use: the second process waits, then finds the head applied.
            locks.xact_lock(raw, locks.schema_key(settings.schema))
            # A revision that builds an HNSW index builds it serially where pgvector's parallel build
            # is unsafe (db/defects.py); PostgreSQL's default would use two workers on a large table.
            if not defects.parallel_hnsw_build_safe(raw):
                raw.execute("SELECT set_config('max_parallel_maintenance_workers', '0', true)")
            raw.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(settings.schema)))
            ext_schema = raw.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                "WHERE e.extname = 'vector'"
            ).fetchone()
            # ag_catalog last: AGE's DDL functions need it on the path (apache/age#2504), and our
            # unqualified CREATEs must land in our schema, not in ag_catalog.
            path = [settings.schema] + ([ext_schema[0]] if ext_schema else ["public"]) + ["ag_catalog"]
            raw.execute(
                "SELECT set_config('search_path', %s, true)",
                (", ".join(sql.Identifier(p).as_string(raw) for p in path),),
            )
            # what the revisions' sql/ files are rendered with (apply_sql_file reads it back)
            config.attributes["variables"] = {"schema": settings.schema, "graph": settings.graph}
            context.run_migrations()


def render_sql(text: str, variables: dict[str, str]) -> str:
    """Fill psql-style variables in a sql/ file: ``:"name"`` as an identifier, ``:'name'`` as a literal.

    Values must be plain lower-case identifiers (schema and graph names, the one rule of
    :data:`mempalace_pg.config.IDENTIFIER_RE`), so quoting them is enough; anything else is refused.
    """
    for name, value in variables.items():
        validate_identifier(value, f"the SQL variable {name}", longest=63)
        text = text.replace(f':"{name}"', '"' + value + '"').replace(f":'{name}'", "'" + value + "'")
    return text


def apply_sql_file(filename: str) -> None:
    """Run one DDL file from sql/ in the running revision, on the connection Alembic gives it
    (``op.get_bind()``; search_path = the target schema), its variables from the Alembic config."""
    from alembic import context, op

    conn: psycopg.Connection = op.get_bind().connection.driver_connection
    text = render_sql(
        (sql_dir() / filename).read_text(encoding="utf-8"), context.config.attributes["variables"]
    )
    conn.execute(text.encode("utf-8"))  # no parameters: psycopg sends it as one simple query


def bootstrap_statements(
    conn: psycopg.Connection, filename: str, variables: dict[str, str]
) -> list[tuple[str, bool]]:
    """The statements of a ``sql/bootstrap`` file, psql variables filled in as psql does (``:'v'`` a quoted
    literal, ``:"v"`` a quoted identifier), each with whether it ends in ``\\gexec`` (run its result too)."""

    text = (sql_dir() / "bootstrap" / filename).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    text = "\n".join(lines)

    def fill(match: "re.Match") -> str:
        quote, name = match.group(1), match.group(2)
        if name not in variables:
            raise ValueError(f"{filename} needs the variable {name!r}")
        value = variables[name]
        return (sql.Literal(value) if quote == "'" else sql.Identifier(value)).as_string(conn)

    out = []
    # split, keeping which separator ended each statement
    pieces = re.split(r"(;[ \t]*(?:\n|$)|\\gexec[ \t]*(?:\n|$))", text + "\n")
    for body, sep in zip(pieces[0::2], pieces[1::2] + [""]):
        body = body.strip()
        if body:
            out.append(
                (re.sub(r":(['\"])([a-z_][a-z0-9_]*)\1", fill, body), sep.strip().startswith("\\gexec"))
            )
    return out


def apply_bootstrap(
    conn: psycopg.Connection,
    *,
    app_role: Optional[str] = None,
    app_password: Optional[str] = None,
    connection_limit: int = 64,
    accept_defects: Iterable[str] = (),
    warn: Optional[Callable[[str], None]] = None,
) -> list[str]:
    """Apply sql/bootstrap/ to the database ``conn`` is connected to (as a superuser, autocommit): the
    extensions, with ``app_role`` the application role (at most ``connection_limit`` connections), and
    the policies that keep each role to its own graphs in AGE's catalog. Returns the files applied.

    A new ``app_role`` beside another palace role, on a server with a defect that lets one reach the
    other's palace (pgvector < 0.8.2), is refused with :class:`~mempalace_pg.errors.KnownDefectError`
    before anything changes, unless that defect's key is in ``accept_defects``; then ``warn`` (default:
    the log) gets why it is a risk."""
    applied = []
    files = ["01_extensions.sql"] + (["02_app_role.sql"] if app_role else []) + ["03_graph_catalog.sql"]
    variables = {
        "app_role": app_role or "",
        "app_password": app_password or "",
        "app_db": conn.info.dbname,
        "app_connection_limit": str(int(connection_limit)),
    }
    if app_role:
        validate_identifier(app_role, "application role")
        if not app_password:
            raise ValueError("the application role needs a password")
        # Before the first statement: a refusal must leave the server as it was (db/defects.py says who
        # a palace role is, and which defects put palace roles at each other's mercy).
        for warning in defects.check_new_palace_role(conn, app_role, accept_defects):
            (warn or log.warning)(warning)
    for filename in files:
        for statement, gexec in bootstrap_statements(conn, filename, variables):
            rows = conn.execute(statement).fetchall() if gexec else conn.execute(statement)
            if gexec:
                for row in rows:
                    for cell in row:
                        conn.execute(cell)
        applied.append(filename)
    return applied


__all__ = [
    "records_table",
    "collection_pks",
    "drop",
    "ensure_schema",
    "upgrade",
    "check_schema_is_for",
    "create_schema_as",
    "schema_access_error",
    "head_revision",
    "HEAD_REVISION",
    "known_revisions",
    "current_revision",
    "apply_sql_file",
    "sql_dir",
]
