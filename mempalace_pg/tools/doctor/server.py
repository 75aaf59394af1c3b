"""The server's checks: PostgreSQL's version, the extensions and their known defects, loading AGE."""

from __future__ import annotations

from typing import Optional

import psycopg

from mempalace_pg.config import Settings
from mempalace_pg.db import defects
from mempalace_pg.tools.doctor.report import Report


def _version(text: Optional[str]) -> tuple:
    from mempalace_pg.db.defects import version_tuple

    return version_tuple(text) if text else ()


def check_server(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
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


def check_extensions(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
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


def check_age_load(report: Report, conn: psycopg.Connection, settings: Settings = None) -> None:
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


__all__ = ["check_server", "check_extensions", "check_age_load"]
