"""``mempalace-pg doctor``: what is wrong with this installation, and the command that fixes it.

Each check gives ``ok``, ``warn`` (works, but worth knowing) or ``fail`` (something needs fixing), a
one-line finding and, when not ok, a fix. The checks read; the only thing they change is a rolled-back
``LOAD`` test, and one more connection is opened without the password, to see whether the server asks
for one. A failed connection stops the checks that need one. Passwords are never printed.

    report = run_checks(Settings.load())
    report.ok          # False when any check failed (the command then exits 1)
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Optional

import psycopg
from psycopg import sql

from mempalace_pg.config import Settings, redact_dsn
from mempalace_pg.db import defects
from mempalace_pg.db.connect import scrub_password
from mempalace_pg.store.indexing import HNSW_MAX_DIM


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    finding: str
    fix: Optional[str] = None
    # a known defect of an extension's version (db/defects.py), as data: key, extension, version,
    # fixed_in, what, consequence, fix, reference (and, for one that breaks isolation, palace_roles)
    defect: Optional[dict] = None

    def as_dict(self) -> dict:
        """The check for --json; ``defect`` only on the checks that name one."""
        out = asdict(self)
        if self.defect is None:
            del out["defect"]
        return out


@dataclass
class Report:
    target: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.status != "fail" for c in self.checks)

    def add(
        self, name: str, status: str, finding: str, fix: Optional[str] = None, defect: Optional[dict] = None
    ) -> Check:
        check = Check(name, status, finding, fix, defect)
        self.checks.append(check)
        return check

    def as_dict(self) -> dict:
        return {"target": self.target, "ok": self.ok, "checks": [c.as_dict() for c in self.checks]}


def _version(text: Optional[str]) -> tuple:
    from mempalace_pg.db.defects import version_tuple

    return version_tuple(text) if text else ()


def run_checks(settings: Settings, *, palace_path: Optional[str] = None) -> Report:
    """Run every check against the configured database (and MemPalace's configured palace)."""
    from mempalace_pg.db.connect import describe_connect_error

    report = Report(target=settings.redacted_dsn)
    try:
        conn = psycopg.connect(
            settings.dsn,
            autocommit=True,
            connect_timeout=settings.connect_timeout_s,
            application_name="mempalace-pg doctor",
        )
    except psycopg.OperationalError as exc:
        report.add(
            "connect",
            "fail",
            " ".join(str(describe_connect_error(settings, exc)).split()),
            "start the server, or point MEMPALACE_PG_DSN (config.json: postgres_dsn) at it",
        )
        _check_palace(report, settings, palace_path)
        return report
    with conn:
        info = conn.info
        report.add("connect", "ok", f"connected to {info.host}:{info.port}/{info.dbname} as {info.user}")
        for name, check in (
            ("postgresql", _check_server),
            ("extensions", _check_extensions),
            ("age load", _check_age_load),
            ("schema", _check_schema),
            ("indexes", _check_indexes),
            ("pool", _check_pool),
            ("pooler", _check_pooler),
            ("role", _check_role),
            ("encryption", _check_encryption),
            ("authentication", _check_authentication),
        ):
            try:
                check(report, conn, settings)
            except psycopg.Error as exc:  # a check this role may not run says so instead of stopping
                report.add(
                    name,
                    "warn",
                    f"could not check: {' '.join(str(exc).split())}",
                    "run `mempalace-pg doctor` as the database owner or a superuser for this check",
                )
    _check_palace(report, settings, palace_path)
    return report


def _check_server(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
    from mempalace_pg.db.schema import MIN_POSTGRES

    major = conn.info.server_version // 10000
    version = conn.execute("SHOW server_version").fetchone()[0]
    if major < MIN_POSTGRES:
        report.add(
            "postgresql",
            "fail",
            f"PostgreSQL {version}: mempalace-pg needs {MIN_POSTGRES} or newer",
            "upgrade the server (e.g. pg_upgradecluster)",
        )
    else:
        report.add("postgresql", "ok", f"PostgreSQL {version}")


def _check_extensions(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
    """Each extension: there and recent enough, then one check per known defect of its version."""
    rows = conn.execute(
        "SELECT a.name, a.default_version, e.extversion FROM pg_available_extensions a "
        "LEFT JOIN pg_extension e ON e.extname = a.name WHERE a.name IN ('vector', 'age')"
    ).fetchall()
    found = {name: (available, installed) for name, available, installed in rows}
    palace: Optional[list[str]] = None  # the palace roles, read once, when a defect needs them
    for name in ("vector", "age"):
        available, installed = found.get(name, (None, None))
        # Defects by default_version, not extversion: a bug in an extension's C code is the library's, and
        # the server loads the installed package's library, whose version is default_version; extversion
        # only says which SQL objects were created, and lags until ALTER EXTENSION ... UPDATE.
        known = defects.defects_of(name, available) if available else []
        _check_extension(report, conn, name, available, installed, len(known))
        for defect in known:
            if defect.isolation and palace is None:
                palace = defects.palace_roles(conn)
            _check_defect(report, defect, available, palace or [])


def _check_extension(
    report: Report,
    conn: psycopg.Connection,
    name: str,
    available: Optional[str],
    installed: Optional[str],
    known: int,
) -> None:
    from mempalace_pg.db.schema import MIN_PGVECTOR

    major = conn.info.server_version // 10000
    label, package = {
        "vector": ("pgvector", f"postgresql-{major}-pgvector"),
        "age": ("Apache AGE", f"postgresql-{major}-age"),
    }[name]
    if available is None:
        report.add(
            name,
            "fail",
            f"{label} is not installed on the server",
            f"install the package {package} on the database server (Debian/PGDG naming), then "
            "`mempalace-pg db upgrade`",
        )
    elif installed is None:
        report.add(
            name,
            "fail",
            f"{label} {available} is available but not created in database {conn.info.dbname!r}",
            f"as a superuser: psql -d {conn.info.dbname} -c 'CREATE EXTENSION {name};' "
            "(or `mempalace-pg db upgrade` as a superuser)",
        )
    elif name == "vector" and _version(installed) < MIN_PGVECTOR:
        report.add(
            name,
            "fail",
            f"pgvector {installed}: mempalace-pg needs "
            f"{'.'.join(map(str, MIN_PGVECTOR))} or newer (iterative index scans)",
            f"install a newer {package}, then `ALTER EXTENSION vector UPDATE;`",
        )
    else:
        finding = f"{label} {installed}" + (f" (server has {available})" if available != installed else "")
        known_text = f"{known} known defect(s) of {available}, below" if known else "no known defects"
        report.add(name, "ok", f"{finding}; {known_text}")


def _check_defect(report: Report, defect: defects.Defect, version: str, palace: list[str]) -> None:
    """One known defect of the server's ``version`` (the library's: db/defects.py says why that one and
    not ``extversion``), as a check ``<extension>: <key>``. A warning, but a failure for a defect that
    lets one palace role reach another's palace while more than one palace role exists (as
    db/defects.py defines them): the plugin cannot keep them apart there, only an upgrade can."""
    label = {"vector": "pgvector", "age": "Apache AGE"}[defect.extension]
    data = {
        "key": defect.key,
        "extension": defect.extension,
        "version": version,
        "fixed_in": defect.fixed_in_text,
        "what": defect.what,
        "consequence": defect.consequence,
        "fix": defect.fix,
        "reference": defect.reference,
    }
    name = f"{defect.extension}: {defect.key}"
    finding = f"{label} {version}: {defect.what} ({defect.fixed_text}; {defect.reference}); for this plugin: "
    consequence = defect.consequence
    if not defect.isolation:
        report.add(name, "warn", f"{finding}{consequence}", defect.fix, data)
        return
    data["palace_roles"] = palace
    if len(palace) > 1:
        report.add(
            name,
            "fail",
            f"{finding}{len(palace)} palace roles share this server ({', '.join(palace)}), and "
            f"{defect.isolation}",
            defect.fix,
            data,
        )
    else:
        here = f"the one palace role here is {palace[0]}" if palace else "no palace role here yet"
        report.add(
            name,
            "warn",
            f"{finding}{consequence}; {here}, and `db bootstrap --app-role` refuses a second",
            defect.fix,
            data,
        )


def _check_age_load(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
    """Can this role load AGE for Cypher? (mempalace-pg itself needs no LOAD: it writes through SQL.)"""
    if not conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'age'").fetchone():
        return
    # shared_preload_libraries is readable only with pg_read_all_settings; pg_settings then just omits it
    preload = (
        conn.execute(
            "SELECT string_agg(setting, ' ') FROM pg_settings "
            "WHERE name IN ('shared_preload_libraries', 'session_preload_libraries')"
        ).fetchone()[0]
        or ""
    )
    if "age" in preload:
        report.add("age load", "ok", "AGE is preloaded (shared/session_preload_libraries)")
        return
    for statement in ("LOAD 'age'", "LOAD '$libdir/plugins/age'"):
        try:
            with conn.transaction():
                conn.execute(statement)
                raise _RollBack
        except _RollBack:
            report.add("age load", "ok", f"this role can `{statement}` (needed for Cypher in psql)")
            return
        except psycopg.Error:
            continue
    report.add(
        "age load",
        "warn",
        f"role {conn.info.user!r} cannot LOAD AGE, so Cypher (cypher()) fails "
        "for it; mempalace-pg itself does not need it",
        'as root on the server: ln -s ../age.so "$(pg_config --pkglibdir)/plugins/age.so" '
        "(then LOAD '$libdir/plugins/age'), or add age to session_preload_libraries",
    )


class _RollBack(Exception):
    pass


def _check_schema(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    from mempalace_pg.db.schema import HEAD_REVISION, current_revision, known_revisions

    current, head = current_revision(conn, settings.schema), HEAD_REVISION
    if current is None and conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'age'").fetchone():
        # A graph left behind by a dropped schema makes the next schema creation fail half way.
        leftover = conn.execute(
            "SELECT 1 FROM ag_catalog.ag_graph WHERE name = %(graph)s", {"graph": settings.graph}
        ).fetchone()
        if leftover:
            report.add(
                "schema",
                "fail",
                f"schema {settings.schema!r} is gone but its AGE graph "
                f"{settings.graph!r} is still there: creating the schema again "
                "would fail",
                f"psql -c \"SELECT ag_catalog.drop_graph('{settings.graph}', true);\" (it only holds "
                "the old palace's graph), or restore the schema from a backup",
            )
            return
    if current == head:
        report.add("schema", "ok", f"schema {settings.schema!r} at revision {head}")
    elif current is None:
        report.add(
            "schema",
            "warn",
            f"schema {settings.schema!r} not created yet (made on first use)",
            "mempalace-pg db upgrade",
        )
    elif current not in known_revisions():
        report.add(
            "schema",
            "fail",
            f"schema {settings.schema!r} is at {current}, newer than this code ({head})",
            "upgrade mempalace-pg (pip install -U mempalace-pg)",
        )
    else:
        report.add(
            "schema",
            "fail",
            f"schema {settings.schema!r} is at {current}; this code needs {head}",
            "mempalace-pg db upgrade",
        )


def _check_indexes(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    schemas = [settings.schema, settings.graph]
    # A vector segment is listed once its build is done: one still building is invalid until then,
    # and a folder drops what an interrupted build left; so segments are not reported here.
    invalid = conn.execute(
        """
        SELECT n.nspname || '.' || c.relname
        FROM pg_index i
        JOIN pg_class c ON c.oid = i.indexrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = ANY(%(schemas)s) AND NOT i.indisvalid
          AND c.relname NOT LIKE 'records\\_c%%\\_vec\\_%%'
    """,
        {"schemas": schemas},
    ).fetchall()
    if invalid:
        names = ", ".join(r[0] for r in invalid)
        report.add(
            "indexes",
            "fail",
            f"invalid indexes (an interrupted build): {names}",
            "; ".join(f"REINDEX INDEX {r[0]}" for r in invalid),
        )
    else:
        report.add("indexes", "ok", "all indexes valid")
    segments_table = f"{settings.schema}.vector_segments"
    if conn.execute("SELECT to_regclass(%(table)s)", {"table": segments_table}).fetchone()[0]:
        _check_vector_segments(report, conn, settings)


def _check_vector_segments(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    """Per collection: its vector index segments, the rows waiting for one (searched exactly meanwhile),
    and what its folder process last did."""
    rows = conn.execute(
        sql.SQL("""
        SELECT c.collection_pk, c.name, p.palace_key, c.dimension,
               (SELECT count(*) FROM {s}.vector_segments v WHERE v.collection_pk = c.collection_pk),
               (SELECT COALESCE(sum(pg_relation_size(
                           to_regclass(quote_ident({schema}) || '.' || quote_ident(v.index_name)))), 0)
                FROM {s}.vector_segments v WHERE v.collection_pk = c.collection_pk),
               (SELECT COALESCE(max(hi), -1) FROM {s}.vector_segments v
                WHERE v.collection_pk = c.collection_pk),
               f.activity, f.updated_at, f.last_error, now() - f.updated_at
        FROM {s}.collections c
        JOIN {s}.palaces p USING (palace_pk)
        LEFT JOIN {s}.vector_folders f USING (collection_pk)
        WHERE c.dimension IS NOT NULL
        ORDER BY c.collection_pk
    """).format(s=sql.Identifier(settings.schema), schema=sql.Placeholder("schema")),
        {"schema": settings.schema},
    ).fetchall()
    for pk, name, palace, dim, segments, size, top, activity, _updated, error, age in rows:
        table = sql.Identifier(settings.schema, f"records_c{pk}")
        waiting = conn.execute(
            sql.SQL("SELECT count(*) FROM {records} WHERE vector_seq > {top}").format(
                records=table, top=sql.Placeholder("top")
            ),
            {"top": top},
        ).fetchone()[0]
        what = (
            f"{palace} {name}: {segments} HNSW segment(s), {float(size) / 1e6:.1f} MB, "
            f"{waiting} rows waiting for the index"
        )
        folder = (
            f"; folder: {activity} ({age.total_seconds():.0f} s ago)" if activity else "; no folder has run"
        )
        if error:
            report.add(
                "vector index",
                "warn",
                what + folder + f"; its last error: {error}",
                "the rows stay searchable exactly; check the server log, then write once or run "
                "MemPalace's maintenance (`run_maintenance('reindex')`)",
            )
        elif dim > HNSW_MAX_DIM:
            report.add(
                "vector index",
                "ok",
                f"{palace} {name}: {dim}-dimension vectors are searched exactly "
                f"(pgvector's HNSW indexes at most {HNSW_MAX_DIM})",
            )
        elif waiting and (activity in (None, "exited") or age.total_seconds() > 60):
            report.add(
                "vector index",
                "warn",
                what + folder,
                "the next write or search starts a folder; or run `run_maintenance('reindex')`",
            )
        else:
            report.add("vector index", "ok", what + folder)


def _check_pool(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    max_conn = int(conn.execute("SHOW max_connections").fetchone()[0])
    used = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
    ).fetchone()[0]
    finding = (
        f"pool {settings.pool_min_size}-{settings.pool_max_size} connections per process, "
        f"statement timeout {settings.statement_timeout_ms} ms, ef_search {settings.ef_search}; "
        f"server max_connections {max_conn}, {used} in use"
    )
    if settings.pool_max_size * 4 > max_conn - used:
        report.add(
            "pool",
            "warn",
            finding + ": four processes at their pool maximum would not fit",
            "lower MEMPALACE_PG_POOL_MAX_SIZE or raise max_connections on the server",
        )
    else:
        report.add("pool", "ok", finding)


def _server_pid(dsn: str, timeout: int) -> int:
    with psycopg.connect(
        dsn, autocommit=True, connect_timeout=timeout, application_name="mempalace-pg doctor"
    ) as c:
        return c.execute("SELECT pg_backend_pid()").fetchone()[0]


def _check_pooler(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    """Is a connection pooler (PgBouncer) between us and the server, in which mode, and has the work
    that needs a session of its own somewhere to go? One check: the worst of what it finds."""
    from mempalace_pg.db.pool import pooler_carries_prepared_statements

    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    if pid == conn.info.backend_pid:
        report.add("pooler", "ok", "no connection pooler: the DSN reaches PostgreSQL itself")
        return
    # A pooler answered the handshake itself (its process id is not the server's). In transaction
    # mode the server connection our statement just used is free again, and the next client gets it.
    mode = (
        "transaction pooling"
        if _server_pid(settings.dsn, settings.connect_timeout_s) == pid
        else "session pooling (or a pool with spare server connections)"
    )
    findings = [
        f"a connection pooler is between (likely {mode}): mempalace-pg runs each unit of work as one "
        "transaction with its settings made for that transaction alone"
    ]
    status, fixes = "ok", []

    def worse(level: str, finding: str, fix: str) -> None:
        nonlocal status
        findings.append(finding)
        fixes.append(fix)
        status = "fail" if "fail" in (status, level) else level

    if pooler_carries_prepared_statements(conn):
        findings.append("the pooler carries prepared statements to its server connections, and they are used")
    else:
        worse(
            "warn",
            "the pooler does not carry prepared statements, so mempalace-pg makes none and every search is "
            "planned again (slower: benchmarks/RESULTS.md, 'Through PgBouncer')",
            "PgBouncer 1.21 or later: set max_prepared_statements = 200 in pgbouncer.ini, then RELOAD",
        )
    if not settings.session_dsn:
        worse(
            "warn",
            "MEMPALACE_PG_SESSION_DSN is not set, so no vector index folder runs (new rows are searched "
            "exactly: correct, slower as they grow) and bulk loads and maintenance refuse to run",
            "set MEMPALACE_PG_SESSION_DSN (config.json: postgres_session_dsn) to PostgreSQL's own address "
            "(or a session-mode pool) for the work that needs a session of its own",
        )
    else:
        try:
            _server_pid(settings.session_dsn, settings.connect_timeout_s)
        except psycopg.OperationalError as exc:
            worse(
                "fail",
                f"MEMPALACE_PG_SESSION_DSN ({redact_dsn(settings.session_dsn)}) cannot be reached: "
                + scrub_password(" ".join(str(exc).split()), settings.session_dsn),
                "point MEMPALACE_PG_SESSION_DSN at PostgreSQL's own address",
            )
        else:
            findings.append(
                f"the index folder, bulk loads and maintenance go to {redact_dsn(settings.session_dsn)}"
            )
    report.add("pooler", status, "; ".join(findings), "; ".join(fixes) or None)


def _check_role(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
    user = conn.info.user
    superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[0]
    if superuser:
        report.add(
            "role",
            "warn",
            f"connected as {user}, a superuser: anything that reaches the plugin's connection (a bad "
            "statement, a leaked password) can do anything to the server",
            "as the superuser once: MEMPALACE_APP_PASSWORD=... mempalace-pg db bootstrap --app-role "
            "mempalace; then put that role in MEMPALACE_PG_DSN",
        )
    else:
        report.add("role", "ok", f"{user} is not a superuser")


def is_local_host(host: Optional[str]) -> bool:
    """Whether a connection to ``host`` (as libpq reports it) stays on this machine: a Unix socket
    directory, ``localhost``, or a loopback address."""
    import ipaddress

    if not host or host.startswith("/") or host.startswith("@") or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def encryption_finding(host: Optional[str], ssl: bool, sslmode: Optional[str]) -> tuple[str, str, str]:
    """(status, finding, fix) for a connection to ``host``: encrypted or not, and whether the client
    checks the server's certificate (only ``verify-full`` checks that it is the server named)."""
    fix = (
        "turn TLS on at the server (ssl = on, a certificate), then add sslmode=verify-full and "
        "sslrootcert=<the CA's certificate> to MEMPALACE_PG_DSN"
    )
    if is_local_host(host):
        state = "encrypted" if ssl else "not encrypted"
        return "ok", f"connection to {host or 'the local socket'} stays on this machine ({state})", ""
    if not ssl:
        return (
            "warn",
            f"the connection to {host} is not encrypted: passwords and memories cross the network",
            fix,
        )
    if sslmode != "verify-full":
        return (
            "warn",
            f"the connection to {host} is encrypted, but sslmode={sslmode or 'prefer'} does not check that "
            "the server is the one named (a machine in between could read it)",
            fix,
        )
    return (
        "ok",
        f"the connection to {host} is encrypted and the server's certificate checked (verify-full)",
        "",
    )


def _check_encryption(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
    row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    sslmode = conn.info.get_parameters().get("sslmode")
    status, finding, fix = encryption_finding(conn.info.host, bool(row and row[0]), sslmode)
    report.add("encryption", status, finding, fix or None)


def _check_authentication(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
    """Whether the server lets this role in with no password at all: the same connection, its password
    left out and no password file."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(settings.dsn)
    params.pop("password", None)
    # a password file that does not exist (libpq complains about /dev/null, which is not a plain file)
    params.update(passfile=os.path.join(os.path.dirname(os.path.abspath(__file__)), "no-such-passfile"))
    params.update(connect_timeout=settings.connect_timeout_s)
    env_password = os.environ.pop("PGPASSWORD", None)  # libpq would read it
    try:
        with psycopg.connect(make_conninfo(**params), application_name="mempalace-pg doctor"):
            trusted = True
    except psycopg.OperationalError:
        trusted = False
    finally:
        if env_password is not None:
            os.environ["PGPASSWORD"] = env_password
    where = conn.info.host or "the local socket"
    if trusted:
        report.add(
            "authentication",
            "warn",
            f"the server let {conn.info.user} in at {where} without a password (trust authentication): "
            "anyone who can reach it can connect as any role",
            "in pg_hba.conf use scram-sha-256 for these connections (host ... scram-sha-256), then "
            "SELECT pg_reload_conf()",
        )
    else:
        report.add("authentication", "ok", f"the server asks {conn.info.user} for a password at {where}")


def _check_palace(report: Report, settings: Settings, palace_path: Optional[str]) -> None:
    """What MemPalace will use for its configured palace (or --palace)."""
    from mempalace_pg.graph.routing import configured_palace
    from mempalace_pg.marker import MARKER_FILENAME, check_marker_target

    palace = os.path.realpath(os.path.expanduser(palace_path)) if palace_path else configured_palace()
    if not palace:
        report.add(
            "palace", "warn", "no MemPalace palace configured", "mempalace init <dir> --backend postgres"
        )
        return
    marker = os.path.join(palace, MARKER_FILENAME)
    if not os.path.isfile(marker):
        report.add("palace", "warn", *_unmarked_palace(palace, configured=not palace_path))
        return
    try:
        namespace, key = check_marker_target(palace, settings)
    except Exception as exc:  # reported as the finding
        report.add(
            "palace",
            "fail",
            f"palace {palace}: {exc}",
            "point MEMPALACE_PG_DSN / MEMPALACE_PG_SCHEMA at the database its marker names",
        )
        return
    report.add(
        "palace",
        "ok",
        f"MemPalace's palace {palace} uses the postgres backend here "
        f"(key {key!r}, namespace {namespace!r}); its knowledge graph is in AGE",
    )


def _mempalace_config_json() -> tuple:
    """(directory, settings) of MemPalace's config.json; settings are {} when it is absent or unreadable."""
    import json

    from mempalace.config import MempalaceConfig

    config_dir = str(MempalaceConfig().config_dir)
    try:
        with open(os.path.join(config_dir, "config.json"), encoding="utf-8-sig") as f:
            settings = json.load(f)
    except (OSError, ValueError):
        settings = {}
    return config_dir, settings if isinstance(settings, dict) else {}


def _unmarked_palace(palace: str, *, configured: bool) -> tuple:
    """(finding, fix) for a palace directory without the marker: which backend MemPalace will give it,
    and, for the configured palace, a config.json that selects postgres but names no palace."""
    from mempalace_pg.marker import BACKEND_NAME

    try:
        from mempalace.palace import resolve_backend_name

        selected, refusal = resolve_backend_name(palace), None
    except Exception as exc:  # MemPalace's own refusal is the finding
        selected, refusal = None, f"MemPalace refuses it: {exc}"
    config_dir, config = _mempalace_config_json()
    config_json = os.path.join(config_dir, "config.json")
    default_palace = os.path.realpath(os.path.join(config_dir, "palace"))
    if configured and config.get("backend") == BACKEND_NAME and palace == default_palace:
        # MemPalace 3.11's `init --backend` wrote {"backend": ...} over the config.json init() had
        # written (mempalace_pg.hooks keeps that now), so the user's palace is named nowhere
        return (
            f"{config_json} selects the postgres backend but names no palace_path, so MemPalace's "
            f"commands without --palace, `mempalace serve` among them, use {palace}, which "
            + ("does not exist" if not os.path.exists(palace) else "holds no postgres palace"),
            f'put "palace_path": "/path/to/your/palace" in {config_json} (until then: '
            "mempalace serve --palace /path/to/your/palace, serve's own flag)",
        )
    kind = "does not exist yet" if not os.path.exists(palace) else "holds no postgres palace (no marker)"
    if selected == BACKEND_NAME:
        return (
            f"MemPalace's palace {palace} is set to the postgres backend and {kind}: its first write "
            "creates it (`mempalace init` does not); until then `mempalace serve` answers status with "
            '"Backend open failed"',
            "mempalace mine <dir>  (or file a first memory through the server)",
        )
    return (
        f"MemPalace's palace {palace} {kind}: "
        + (refusal or f"MemPalace will use the {selected} backend there"),
        "mempalace --backend postgres mine <dir>  (or: mempalace-pg migrate --from <it> --to <new dir>)",
    )


def render(report: Report) -> str:
    marks = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
    lines = [f"mempalace-pg doctor: {report.target}"]
    for c in report.checks:
        lines.append(f"  [{marks[c.status]}] {c.name}: {c.finding}")
        if c.fix and c.status != "ok":
            lines.append(f"         fix: {c.fix}")
    failed = sum(c.status == "fail" for c in report.checks)
    warned = sum(c.status == "warn" for c in report.checks)
    lines.append("all good" if not failed and not warned else f"{failed} to fix, {warned} warning(s)")
    return "\n".join(lines)


__all__ = ["run_checks", "render", "Report", "Check", "is_local_host", "encryption_finding"]
