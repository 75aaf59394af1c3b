"""How the plugin connects: its pool, a pooler in front, its role, encryption and authentication."""

from __future__ import annotations

import os
from typing import Optional

import psycopg

from mempalace_pg.config import Settings, redact_dsn
from mempalace_pg.db.connect import scrub_password
from mempalace_pg.tools.doctor.report import Report


def check_pool(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
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


def check_pooler(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
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


def check_role(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
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


def check_encryption(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
    row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    sslmode = conn.info.get_parameters().get("sslmode")
    status, finding, fix = encryption_finding(conn.info.host, bool(row and row[0]), sslmode)
    report.add("encryption", status, finding, fix or None)


def check_authentication(report: Report, conn: psycopg.Connection, settings: Settings) -> None:
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


__all__ = [
    "check_pool",
    "check_pooler",
    "check_role",
    "check_encryption",
    "check_authentication",
    "is_local_host",
    "encryption_finding",
]
