"""Whole-palace jobs: ``export``, ``import``, ``migrate``, ``move-out``, ``switch``, ``backup``,
``restore``."""

from __future__ import annotations

import sys
from typing import Iterator

from mempalace_pg.cli.common import palace_args, palace_handles, report, settings_of


def cmd_export(args) -> int:
    from mempalace_pg.marker import write_atomically
    from mempalace_pg.tools.portable import export_palace

    drawers, kg = palace_handles(args, create=False)
    with write_atomically(args.file) as out:  # a cut-short export never looks complete
        counts = export_palace(out, drawers, kg)
    line = f"exported {', '.join(f'{v} {k}' for k, v in counts.items())} of {kg.palace_key!r} to {args.file}"
    return report(args, counts, lambda: [line])


def cmd_import(args) -> int:
    from mempalace_pg.tools.portable import import_palace

    drawers, kg = palace_handles(args, create=True)
    done = import_palace(args.file, drawers, kg)

    def lines():
        for key, expected in done.expected.items():
            yield (
                f"{key}: {expected} in {args.file}; {done.written.get(key, 0)} written; "
                f"{done.found.get(key, 0)} in the palace"
            )
        yield ("OK" if done.ok else "MISMATCH") + f" ({kg.palace_key!r})"

    return report(args, done, lines, ok=done.ok)


def _read_back(report) -> str:
    """The line a copy (migrate, move-out) ends with: how its sampled records compared."""
    found = report.mismatches
    return f"read back {report.sampled} sampled records: " + (
        "identical" if not found else f"{len(found)} differences: {found[:3]}"
    )


def cmd_migrate(args) -> int:
    from mempalace_pg.tools.migrate import migrate
    from mempalace_pg.tools.progress import print_collection_progress

    show = print_collection_progress if (not args.json and (args.progress or sys.stderr.isatty())) else None
    done = migrate(
        args.source,
        args.target,
        settings=settings_of(args),
        dry_run=args.dry_run,
        page=args.batch,
        progress=show,
    )
    return report(args, done, lambda: _migrate_lines(done), ok=done.ok)


def _migrate_lines(done) -> Iterator[str]:
    verb = "would copy" if done.dry_run else "copied"
    yield f"{done.source} ({done.source_backend}) -> {done.target} (postgres)"
    for name, c in done.collections.items():
        extra = (
            ""
            if done.dry_run
            else (f": {c['written']} written, {c['skipped']} already there, {c['target']} in the target")
        )
        read = done.reader.get(name)
        via = f", read from {'its files' if read == 'files' else read}" if read else ""
        yield f"  {name}: {verb} {c['source']} records{extra}{via}"
    if done.graph is not None:
        g = done.graph
        verified = "" if done.dry_run else f" ({'verified' if g.get('ok') else 'NOT verified'})"
        yield f"  knowledge graph: {verb} {g['entities']} entities, {g['triples']} triples into AGE{verified}"
    if done.dry_run:
        yield "dry run: nothing was written"
        return
    yield _read_back(done)
    if done.ok:
        yield (
            f"done in {done.seconds:.0f} s. Switch MemPalace over: `mempalace --palace {done.target} "
            "status`, "
            f'or set "palace_path": "{done.target}" in MemPalace\'s config.json (with MEMPALACE_PG_DSN '
            "set wherever MemPalace runs). The source palace is unchanged."
        )


def cmd_move_out(args) -> int:
    from mempalace_pg.cli.common import palace_target
    from mempalace_pg.tools.move_out import move_out
    from mempalace_pg.tools.progress import print_collection_progress

    show = print_collection_progress if (not args.json and (args.progress or sys.stderr.isatty())) else None
    done = move_out(
        palace_target(args),
        args.target,
        backend=args.backend,
        graph_file=args.graph,
        page=args.batch,
        progress=show,
    )
    return report(args, done, lambda: _move_out_lines(done), ok=done.ok)


def _move_out_lines(done) -> Iterator[str]:
    yield f"{done.source} (postgres) -> {done.target} ({done.backend})"
    for name, c in done.collections.items():
        yield f"  {name}: {c['source']} records copied, {c['target']} in the new palace"
    g = done.graph
    yield (
        f"  knowledge graph: {g['entities']['target']} entities, {g['triples']['target']} facts "
        f"in {done.graph_file}"
    )
    yield _read_back(done)
    if done.ok:
        yield (
            f"done in {done.seconds:.0f} s. Use it: `mempalace --palace {done.target} status`; "
            f"the postgres palace is unchanged."
        )


def cmd_switch(args) -> int:
    from mempalace_pg.tools.switch import switch

    result = switch(args.palace_dir)

    def lines():
        before = result["before"]
        yield (
            f"MemPalace now opens {result['palace_path']} ({result['backend']}) by default "
            f"({result['config_file']}); before: {before['palace_path'] or 'its default palace'} "
            f"({before['backend'] or 'chroma'})."
        )
        if result["backend"] == "postgres":
            yield "Every process that opens it needs MEMPALACE_PG_DSN (or postgres_dsn in that file)."

    return report(args, result, lines)


def cmd_backup(args) -> int:
    from mempalace_pg.tools.backup import backup

    result = backup(args.file, settings_of(args), pg_dump=args.pg_dump)
    line = (
        f"backed up schema {result['schema']} and graph {result['graph']} to {result['file']} "
        f"({result['bytes'] / 1e6:.1f} MB); restore with `mempalace-pg restore {result['file']}`"
    )
    return report(args, result, lambda: [line])


def cmd_restore(args) -> int:
    from mempalace_pg.tools.backup import restore

    result = restore(args.file, settings_of(args), pg_restore=args.pg_restore, jobs=args.jobs)
    line = (
        f"restored schema {result['schema']} and graph {result['graph']} from {result['file']}; "
        f"AGE sees {result['facts_seen_by_cypher']} facts. Check with `mempalace-pg doctor`."
    )
    return report(args, result, lambda: [line])


def register(sub) -> None:
    """Add this group's commands to the ``mempalace-pg`` parser's subcommands ``sub``."""
    exp = sub.add_parser(
        "export", help="one palace (records with embeddings, knowledge graph) to portable JSON lines"
    )
    exp.add_argument("file")
    palace_args(exp)
    exp.set_defaults(func=cmd_export)
    imp2 = sub.add_parser("import", help="load an export into a palace (idempotent, verified)")
    imp2.add_argument("file")
    palace_args(imp2)
    imp2.set_defaults(func=cmd_import)

    mig = sub.add_parser("migrate", help="copy a Chroma / sqlite_exact / pgvector palace (and its graph) in")
    mig.add_argument("--from", dest="source", required=True, help="the existing palace directory (read only)")
    mig.add_argument("--to", dest="target", required=True, help="the new postgres palace directory")
    mig.add_argument("--dry-run", action="store_true", help="say what would be copied; write nothing")
    mig.add_argument("--batch", type=int, default=1000, help="records per batch (default 1000)")
    mig.add_argument("--progress", action="store_true", help="show progress even when not on a terminal")
    mig.add_argument("--json", action="store_true", help="machine-readable output")
    mig.set_defaults(func=cmd_migrate)

    out = sub.add_parser(
        "move-out", help="the way back: copy a postgres palace to a new Chroma palace and SQLite graph"
    )
    out.add_argument("--to", dest="target", required=True, help="the new palace directory (empty or new)")
    out.add_argument(
        "--backend", default="chroma", choices=("chroma", "sqlite_exact"), help="the new palace's backend"
    )
    out.add_argument(
        "--graph", help="the new SQLite knowledge graph file (default: knowledge_graph.sqlite3 in --to)"
    )
    out.add_argument("--batch", type=int, default=500, help="records per batch (default 500)")
    out.add_argument("--progress", action="store_true", help="show progress even when not on a terminal")
    palace_args(out)
    out.set_defaults(func=cmd_move_out)

    sw = sub.add_parser(
        "switch", help="make a palace MemPalace's default (palace_path and backend in its config.json)"
    )
    sw.add_argument("palace_dir", help="the palace directory: a postgres palace, or a Chroma one to go back")
    sw.add_argument("--json", action="store_true", help="machine-readable output")
    sw.set_defaults(func=cmd_switch)

    bak = sub.add_parser("backup", help="pg_dump of the schema and its AGE graph (restorable with `restore`)")
    bak.add_argument("file")
    bak.add_argument(
        "--pg-dump",
        default="pg_dump",
        help="the pg_dump command, of the server's major version (default: pg_dump on PATH)",
    )
    bak.add_argument("--json", action="store_true", help="machine-readable output")
    bak.set_defaults(func=cmd_backup)
    res = sub.add_parser("restore", help="pg_restore a backup, then re-register its graph with AGE")
    res.add_argument("file")
    res.add_argument("--pg-restore", default="pg_restore", help="the pg_restore command (default: on PATH)")
    res.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="pg_restore sessions side by side (default 1: one transaction, the file on stdin; more: "
        "the file must be where pg_restore runs, and a failed restore drops what it began)",
    )
    res.add_argument("--json", action="store_true", help="machine-readable output")
    res.set_defaults(func=cmd_restore)


__all__ = [
    "register",
    "cmd_export",
    "cmd_import",
    "cmd_migrate",
    "cmd_move_out",
    "cmd_switch",
    "cmd_backup",
    "cmd_restore",
]
