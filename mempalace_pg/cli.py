"""``mempalace-pg``: the command line of mempalace-pg.

    mempalace-pg db upgrade     apply the schema migrations (sql/ via Alembic) to the configured database
    mempalace-pg db current     show the schema revision of the database and of this code

Settings come from the same places as the plugin's (MEMPALACE_PG_* / config.json postgres_*),
and ``--dsn`` / ``--schema`` override them. Errors print one line, never a password, and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from mempalace.backends.base import BackendError

from .config import ConfigError, Settings


def _settings(args) -> Settings:
    return Settings.load({"dsn": getattr(args, "dsn", None), "schema": getattr(args, "schema", None)})


def cmd_db_upgrade(args) -> int:
    from .schema import head_revision, upgrade

    settings = _settings(args)
    revision = upgrade(settings)
    print(f"schema {settings.schema} at {settings.redacted_dsn}: revision {revision} (head {head_revision()})")
    return 0


def cmd_db_current(args) -> int:
    from .database import connect
    from .schema import current_revision, head_revision

    settings = _settings(args)
    with connect(settings) as conn:
        current = current_revision(conn, settings.schema)
    head = head_revision()
    state = "up to date" if current == head else ("not created" if current is None else "behind the code")
    if args.json:
        print(json.dumps({"schema": settings.schema, "database": settings.redacted_dsn,
                          "current": current, "head": head, "up_to_date": current == head}))
    else:
        print(f"schema {settings.schema} at {settings.redacted_dsn}: {current or '(none)'} "
              f"(code head {head}: {state})")
        if current != head:
            print("run `mempalace-pg db upgrade` to bring it to the code's revision")
    return 0 if current == head else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mempalace-pg", description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: MEMPALACE_PG_DSN, config.json postgres_dsn)")
    parser.add_argument("--schema", help="schema name (default: MEMPALACE_PG_SCHEMA or 'mempalace')")
    sub = parser.add_subparsers(dest="command", required=True)
    db = sub.add_parser("db", help="the database schema").add_subparsers(dest="db_command", required=True)
    up = db.add_parser("upgrade", help="apply migrations up to the code's revision")
    up.set_defaults(func=cmd_db_upgrade)
    cur = db.add_parser("current", help="show the schema revision (exit 1 when behind)")
    cur.add_argument("--json", action="store_true", help="machine-readable output")
    cur.set_defaults(func=cmd_db_current)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (BackendError, ConfigError) as exc:
        print(f"mempalace-pg: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
