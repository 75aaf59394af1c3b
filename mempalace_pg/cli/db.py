"""``mempalace-pg db``: the schema (upgrade, current, bootstrap, drop)."""

from __future__ import annotations

import json
import os
import sys

from mempalace_pg.cli.common import (
    settings_of,
)
from mempalace_pg.config import ConfigError


def cmd_db_upgrade(args) -> int:
    from mempalace_pg.db.schema import head_revision, upgrade

    settings = settings_of(args)
    revision = upgrade(settings)
    print(
        f"schema {settings.schema} at {settings.redacted_dsn}: revision {revision} (head {head_revision()})"
    )
    return 0


def cmd_db_drop(args) -> int:
    from mempalace_pg.db.schema import drop

    settings = settings_of(args)
    if not args.yes:
        raise ConfigError(
            f"db drop deletes schema {settings.schema!r} (every palace in it) and its graph "
            f"{settings.graph!r} at {settings.redacted_dsn}: add --yes to do it"
        )
    dropped = drop(settings)
    gone = [f"{kind} {name!r}" for kind, name in dropped.items() if name]
    print(f"dropped {' and '.join(gone)}" if gone else f"nothing to drop: no schema {settings.schema!r}")
    return 0


def cmd_db_current(args) -> int:
    from mempalace_pg.db.connect import connect
    from mempalace_pg.db.schema import HEAD_REVISION, current_revision

    settings = settings_of(args)
    with connect(settings) as conn:
        current = current_revision(conn, settings.schema)
    head = HEAD_REVISION  # what the migrations end at (a unit test holds them equal); no Alembic import
    state = "up to date" if current == head else ("not created" if current is None else "behind the code")
    if args.json:
        print(
            json.dumps(
                {
                    "schema": settings.schema,
                    "database": settings.redacted_dsn,
                    "current": current,
                    "head": head,
                    "up_to_date": current == head,
                }
            )
        )
    else:
        print(
            f"schema {settings.schema} at {settings.redacted_dsn}: {current or '(none)'} "
            f"(code head {head}: {state})"
        )
        if current != head:
            print("run `mempalace-pg db upgrade` to bring it to the code's revision")
    return 0 if current == head else 1


def cmd_db_bootstrap(args) -> int:

    from mempalace_pg.db.connect import connect
    from mempalace_pg.db.schema import apply_bootstrap

    settings = settings_of(args)
    password = None
    if args.app_role:
        password = os.environ.get(args.app_password_env or "")
        if not password:
            raise ConfigError(
                f"set the application role's password in ${args.app_password_env} "
                "(--app-password-env names the variable; never on the command line)"
            )
    if args.own_schema and not args.app_role:
        raise ConfigError("--schema with db bootstrap gives a role its own schema: name it with --app-role")
    if args.accept_known_defect and not args.app_role:
        raise ConfigError("--accept-known-defect goes with the --app-role it lets db bootstrap make")
    if args.own_schema:
        from dataclasses import replace

        from mempalace_pg.db.schema import check_schema_is_for

        own = replace(settings, schema=args.own_schema)
        own.validate()
        check_schema_is_for(own, args.app_role)  # before anything is changed
    with connect(settings, autocommit=True) as conn:
        applied = apply_bootstrap(
            conn,
            app_role=args.app_role,
            app_password=password,
            connection_limit=args.connection_limit,
            accept_defects=args.accept_known_defect,
            warn=lambda text: print(f"mempalace-pg: warning: {text}", file=sys.stderr),
        )
        database = conn.info.dbname
    print(f"applied {', '.join(applied)} to database {database!r} at {settings.redacted_dsn}")
    if args.own_schema:
        from mempalace_pg.db.schema import create_schema_as

        revision = create_schema_as(own, args.app_role)
        print(
            f"schema {own.schema!r} and its graph {own.graph!r} (revision {revision}) "
            f"belong to {args.app_role!r}; "
            f"no other role but a superuser can read or change them. Connect as {args.app_role!r} with "
            f"MEMPALACE_PG_SCHEMA={own.schema}"
        )
    return 0


def register(sub) -> None:
    """Add this group's commands to the ``mempalace-pg`` parser's subcommands ``sub``."""
    db = sub.add_parser("db", help="the database schema").add_subparsers(dest="db_command", required=True)
    up = db.add_parser("upgrade", help="apply migrations up to the code's revision")
    up.set_defaults(func=cmd_db_upgrade)
    boot = db.add_parser("bootstrap", help="as a superuser: create the extensions (and an application role)")
    boot.add_argument(
        "--app-role", help="also create/update this non-superuser role for MemPalace to connect as"
    )
    boot.add_argument(
        "--app-password-env",
        default="MEMPALACE_APP_PASSWORD",
        help="environment variable holding the role's password (default MEMPALACE_APP_PASSWORD)",
    )
    boot.add_argument(
        "--schema",
        dest="own_schema",
        metavar="SCHEMA",
        help="with --app-role: make this schema and its graph now, owned by that role alone (a person's or "
        "an agent's own palace; others cannot read, count, search or change it)",
    )
    boot.add_argument(
        "--connection-limit",
        type=int,
        default=64,
        help="with --app-role: most connections the role may hold at once (default 64)",
    )
    boot.add_argument(
        "--accept-known-defect",
        action="append",
        default=[],
        metavar="KEY",
        help="with --app-role: make the role although the server has this known defect, which lets one "
        "palace role reach another's palace (parallel-hnsw-build-overflow: pgvector before 0.8.2, "
        "CVE-2026-3172), and another palace role exists; refused otherwise. Prints a warning; "
        "`mempalace-pg doctor` fails until the server is fixed. Repeat for several",
    )
    boot.set_defaults(func=cmd_db_bootstrap)
    dropping = db.add_parser(
        "drop", help="delete the schema (every palace in it) and its AGE graph; its index folders stop"
    )
    dropping.add_argument("--yes", action="store_true", help="really drop it")
    dropping.set_defaults(func=cmd_db_drop)
    cur = db.add_parser("current", help="show the schema revision (exit 1 when behind)")
    cur.add_argument("--json", action="store_true", help="machine-readable output")
    cur.set_defaults(func=cmd_db_current)


__all__ = ["register", "cmd_db_upgrade", "cmd_db_drop", "cmd_db_current", "cmd_db_bootstrap"]
