"""``mempalace-pg kg``: the palace's knowledge graph (import, query, stats)."""

from __future__ import annotations

import os
import sys

from mempalace_pg.cli.common import open_kg, palace_args, report
from mempalace_pg.config import ConfigError


def cmd_kg_import(args) -> int:

    from mempalace_pg.graph.kg_import import import_sqlite
    from mempalace_pg.tools.progress import print_table_progress

    if not os.path.isfile(args.sqlite):
        raise ConfigError(f"{args.sqlite}: no such file")
    kg = open_kg(args)
    show = print_table_progress if (not args.json and (args.progress or sys.stderr.isatty())) else None
    done = import_sqlite(args.sqlite, kg, batch_size=args.batch, progress=show)

    def lines():
        for table in ("entities", "triples"):
            w = done.written[table]
            yield (
                f"{table}: {done.source_counts[table]} in {args.sqlite}; {w['inserted']} inserted, "
                f"{w['updated']} updated, {w['unchanged']} unchanged; "
                f"{done.verified[table]}/{done.source_counts[table]} verified in graph {kg.graph_name}"
            )
        yield f"{'OK' if done.ok else 'MISMATCH'} in {done.seconds:.1f} s ({kg!r})"

    return report(args, done, lines, ok=done.ok)


def cmd_kg_query(args) -> int:
    kg = open_kg(args)
    rows = kg.query_entity(args.entity, as_of=args.as_of, direction=args.direction)

    def lines():
        if not rows:
            yield f"nothing known about {args.entity!r}" + (f" as of {args.as_of}" if args.as_of else "")
        for r in rows:
            span = f"[{r['valid_from'] or '…'} → {r['valid_to'] or 'now'}]"
            yield f"{r['subject']} —{r['predicate']}→ {r['object']}  {span}"

    return report(args, rows, lines)


def cmd_kg_stats(args) -> int:
    stats = open_kg(args).stats()
    line = (
        f"{stats['entities']} entities, {stats['triples']} facts ({stats['current_facts']} current, "
        f"{stats['expired_facts']} ended); predicates: {', '.join(stats['relationship_types']) or '-'}"
    )
    return report(args, stats, lambda: [line])


def register(sub) -> None:
    """Add this group's commands to the ``mempalace-pg`` parser's subcommands ``sub``."""
    kg = sub.add_parser("kg", help="the palace's knowledge graph (Apache AGE)").add_subparsers(
        dest="kg_command", required=True
    )

    imp = kg.add_parser("import", help="copy a MemPalace SQLite knowledge graph into AGE (idempotent)")
    imp.add_argument("sqlite", help="path of knowledge_graph.sqlite3")
    imp.add_argument("--batch", type=int, default=500, help="rows per transaction (default 500)")
    imp.add_argument(
        "--progress", action="store_true", help="show a progress bar even when not on a terminal"
    )
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


__all__ = ["register", "cmd_kg_import", "cmd_kg_query", "cmd_kg_stats"]
