"""``mempalace-pg``: the command line of mempalace-pg.

    mempalace-pg db upgrade     apply the schema migrations (sql/ via Alembic) to the configured database
    mempalace-pg db current     show the schema revision of the database and of this code
    mempalace-pg kg import F    copy a MemPalace SQLite knowledge graph into the palace's AGE graph
    mempalace-pg kg query E     what the palace's knowledge graph knows about an entity
    mempalace-pg kg stats       counts of the palace's knowledge graph

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


def _kg(args):
    """The AGE knowledge graph of the palace named by --palace (or --palace-key), else of the palace
    holding the SQLite file being imported, else of MemPalace's configured palace."""
    import os

    from .graph import AgeKnowledgeGraph
    from .routing import _configured_palace, _has_marker

    settings = _settings(args)
    if getattr(args, "palace_key", None):
        return AgeKnowledgeGraph(palace_key=args.palace_key, namespace=args.namespace, settings=settings)
    candidates = []
    if getattr(args, "palace", None):
        candidates.append(os.path.realpath(os.path.expanduser(args.palace)))
    else:
        if getattr(args, "sqlite", None):
            candidates.append(os.path.dirname(os.path.realpath(args.sqlite)))
        configured = _configured_palace()
        if configured:
            candidates.append(configured)
    for palace in candidates:
        if _has_marker(palace):
            return AgeKnowledgeGraph(palace_path=palace, settings=settings)
    raise ConfigError(
        f"no postgres palace found (looked at {', '.join(candidates) or 'nothing'}): pass --palace DIR "
        "(a palace created with `mempalace --backend postgres ...`) or --palace-key KEY")


def cmd_kg_import(args) -> int:
    import os

    from .kg_import import import_sqlite, print_progress

    if not os.path.isfile(args.sqlite):
        raise ConfigError(f"{args.sqlite}: no such file")
    kg = _kg(args)
    show = print_progress if (not args.json and (args.progress or sys.stderr.isatty())) else None
    report = import_sqlite(args.sqlite, kg, batch_size=args.batch, progress=show)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        for table in ("entities", "triples"):
            w = report.written[table]
            print(f"{table}: {report.source_counts[table]} in {args.sqlite}; {w['inserted']} inserted, "
                  f"{w['updated']} updated, {w['unchanged']} unchanged; "
                  f"{report.verified[table]}/{report.source_counts[table]} verified in graph {kg._graph}")
        print(f"{'OK' if report.ok else 'MISMATCH'} in {report.seconds:.1f} s ({kg!r})")
    return 0 if report.ok else 1


def cmd_kg_query(args) -> int:
    kg = _kg(args)
    rows = kg.query_entity(args.entity, as_of=args.as_of, direction=args.direction)
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print(f"nothing known about {args.entity!r}"
              + (f" as of {args.as_of}" if args.as_of else ""))
    for r in rows:
        span = f"[{r['valid_from'] or '…'} → {r['valid_to'] or 'now'}]"
        print(f"{r['subject']} —{r['predicate']}→ {r['object']}  {span}")
    return 0


def cmd_kg_stats(args) -> int:
    stats = _kg(args).stats()
    if args.json:
        print(json.dumps(stats))
    else:
        print(f"{stats['entities']} entities, {stats['triples']} facts ({stats['current_facts']} current, "
              f"{stats['expired_facts']} ended); predicates: {', '.join(stats['relationship_types']) or '-'}")
    return 0


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

    kg = sub.add_parser("kg", help="the palace's knowledge graph (Apache AGE)").add_subparsers(
        dest="kg_command", required=True)

    def palace_args(p):
        p.add_argument("--palace", help="the postgres palace directory (default: MemPalace's configured palace)")
        p.add_argument("--palace-key", help="the palace key, for a palace without a directory")
        p.add_argument("--namespace", help="the palace's namespace (with --palace-key)")
        p.add_argument("--json", action="store_true", help="machine-readable output")

    imp = kg.add_parser("import", help="copy a MemPalace SQLite knowledge graph into AGE (idempotent)")
    imp.add_argument("sqlite", help="path of knowledge_graph.sqlite3")
    imp.add_argument("--batch", type=int, default=500, help="rows per transaction (default 500)")
    imp.add_argument("--progress", action="store_true", help="show a progress bar even when not on a terminal")
    palace_args(imp)
    imp.set_defaults(func=cmd_kg_import)
    q = kg.add_parser("query", help="facts about an entity")
    q.add_argument("entity")
    q.add_argument("--as-of", help="only facts valid at this date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ)")
    q.add_argument("--direction", choices=("outgoing", "incoming", "both"), default="both")
    palace_args(q)
    q.set_defaults(func=cmd_kg_query)
    st = kg.add_parser("stats", help="entity and fact counts")
    palace_args(st)
    st.set_defaults(func=cmd_kg_stats)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (BackendError, ConfigError, ValueError) as exc:
        print(f"mempalace-pg: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
