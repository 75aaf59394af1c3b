"""``mempalace-pg doctor``: what is wrong with this installation, and the command that fixes it.

Each check gives ``ok``, ``warn`` (works, but worth knowing) or ``fail`` (something needs fixing), a
one-line finding and, when not ok, a fix. The checks read; the only thing they change is a rolled-back
``LOAD`` test, and one more connection is opened without the password, to see whether the server asks
for one. A failed connection stops the checks that need one. Passwords are never printed.

    report = run_checks(Settings.load())
    report.ok          # False when any check failed (the command then exits 1)
"""

from __future__ import annotations

from typing import Optional

import psycopg

from mempalace_pg.config import Settings
from mempalace_pg.tools.doctor.connections import (
    check_authentication,
    check_encryption,
    check_pool,
    check_pooler,
    check_role,
    encryption_finding,
    is_local_host,
)
from mempalace_pg.tools.doctor.palace import check_palace
from mempalace_pg.tools.doctor.report import Check, Report, render
from mempalace_pg.tools.doctor.schema import (
    autoprewarm_finding,
    check_indexes,
    check_schema,
    index_memory_finding,
)
from mempalace_pg.tools.doctor.server import check_age_load, check_extensions, check_server


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
        check_palace(report, settings, palace_path)
        return report
    with conn:
        info = conn.info
        report.add("connect", "ok", f"connected to {info.host}:{info.port}/{info.dbname} as {info.user}")
        for name, check in (
            ("postgresql", check_server),
            ("extensions", check_extensions),
            ("age load", check_age_load),
            ("schema", check_schema),
            ("indexes", check_indexes),
            ("pool", check_pool),
            ("pooler", check_pooler),
            ("role", check_role),
            ("encryption", check_encryption),
            ("authentication", check_authentication),
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
    check_palace(report, settings, palace_path)
    return report


__all__ = [
    "run_checks",
    "render",
    "Report",
    "Check",
    "is_local_host",
    "encryption_finding",
    "index_memory_finding",
    "autoprewarm_finding",
]
