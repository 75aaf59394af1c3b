"""``mempalace-pg``: the command line of mempalace-pg.

    mempalace-pg db upgrade     apply the schema migrations (sql/ via Alembic) to the configured database
    mempalace-pg db current     show the schema revision of the database and of this code
    mempalace-pg db bootstrap   as a superuser: the extensions and a least-privilege application role
    mempalace-pg db drop --yes  delete the schema (every palace in it) and its graph; its folders stop
    mempalace-pg kg import F    copy a MemPalace SQLite knowledge graph into the palace's AGE graph
    mempalace-pg kg query E     what the palace's knowledge graph knows about an entity
    mempalace-pg kg stats       counts of the palace's knowledge graph
    mempalace-pg search around ENTITY QUERY   drawers similar to QUERY around an entity (N hops)
    mempalace-pg search facts ENTITY          facts about an entity with their source drawers
    mempalace-pg search entities QUERY        entities ranked by their drawers' similarity to QUERY
    mempalace-pg search hybrid QUERY          vector + full-text search fused (RRF)
    mempalace-pg migrate --from DIR --to DIR   a Chroma/sqlite_exact/pgvector palace into PostgreSQL
    mempalace-pg export FILE    one palace to portable JSON lines;  mempalace-pg import FILE: and back
    mempalace-pg backup FILE    pg_dump of schema + graph;  mempalace-pg restore FILE: pg_restore + the AGE
    fix-up
    mempalace-pg mcp            the palace's graph-aware tools for an AI client (an MCP server on stdio)
    mempalace-pg doctor         what is wrong with this installation, and how to fix it (exit 1 if anything)

Settings come from the same places as the plugin's (MEMPALACE_PG_* / config.json postgres_*),
and ``--dsn`` / ``--schema`` override them. Errors print one line, never a password, and exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional

from mempalace_pg.config import ConfigError, Settings


def _settings(args) -> Settings:
    return Settings.load({"dsn": getattr(args, "dsn", None), "schema": getattr(args, "schema", None)})


def cmd_db_upgrade(args) -> int:
    from mempalace_pg.db.schema import head_revision, upgrade

    settings = _settings(args)
    revision = upgrade(settings)
    print(
        f"schema {settings.schema} at {settings.redacted_dsn}: revision {revision} (head {head_revision()})"
    )
    return 0


def cmd_db_drop(args) -> int:
    from mempalace_pg.db.schema import drop

    settings = _settings(args)
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

    settings = _settings(args)
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


def _palace_target(args) -> dict:
    """Which palace a command means: --palace DIR (or --palace-key), else the palace holding the SQLite
    file being imported, else MemPalace's configured palace. Keyword arguments for AgeKnowledgeGraph
    and PalaceSearch."""
    import os

    from mempalace_pg.graph.routing import configured_palace
    from mempalace_pg.marker import has_marker

    settings = _settings(args)
    if getattr(args, "palace_key", None):
        return {"palace_key": args.palace_key, "namespace": args.namespace, "settings": settings}
    candidates = []
    if getattr(args, "palace", None):
        candidates.append(os.path.realpath(os.path.expanduser(args.palace)))
    else:
        if getattr(args, "sqlite", None):
            candidates.append(os.path.dirname(os.path.realpath(args.sqlite)))
        configured = configured_palace()
        if configured:
            candidates.append(configured)
    for palace in candidates:
        if has_marker(palace):
            return {"palace_path": palace, "settings": settings}
    raise ConfigError(
        f"no postgres palace found (looked at {', '.join(candidates) or 'nothing'}): pass --palace DIR "
        "(a palace created with `mempalace --backend postgres ...`) or --palace-key KEY"
    )


def cmd_db_bootstrap(args) -> int:
    import os

    from mempalace_pg.db.connect import connect
    from mempalace_pg.db.schema import apply_bootstrap

    settings = _settings(args)
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


def _kg(args):
    """The AGE knowledge graph of the palace the command means (see _palace_target)."""
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    return AgeKnowledgeGraph(**_palace_target(args))


def cmd_kg_import(args) -> int:
    import os

    from mempalace_pg.graph.kg_import import import_sqlite
    from mempalace_pg.tools.progress import print_table_progress

    if not os.path.isfile(args.sqlite):
        raise ConfigError(f"{args.sqlite}: no such file")
    kg = _kg(args)
    show = print_table_progress if (not args.json and (args.progress or sys.stderr.isatty())) else None
    report = import_sqlite(args.sqlite, kg, batch_size=args.batch, progress=show)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        for table in ("entities", "triples"):
            w = report.written[table]
            print(
                f"{table}: {report.source_counts[table]} in {args.sqlite}; {w['inserted']} inserted, "
                f"{w['updated']} updated, {w['unchanged']} unchanged; "
                f"{report.verified[table]}/{report.source_counts[table]} verified in graph {kg.graph_name}"
            )
        print(f"{'OK' if report.ok else 'MISMATCH'} in {report.seconds:.1f} s ({kg!r})")
    return 0 if report.ok else 1


def cmd_kg_query(args) -> int:
    kg = _kg(args)
    rows = kg.query_entity(args.entity, as_of=args.as_of, direction=args.direction)
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print(f"nothing known about {args.entity!r}" + (f" as of {args.as_of}" if args.as_of else ""))
    for r in rows:
        span = f"[{r['valid_from'] or '…'} → {r['valid_to'] or 'now'}]"
        print(f"{r['subject']} —{r['predicate']}→ {r['object']}  {span}")
    return 0


def cmd_kg_stats(args) -> int:
    stats = _kg(args).stats()
    if args.json:
        print(json.dumps(stats))
    else:
        print(
            f"{stats['entities']} entities, {stats['triples']} facts ({stats['current_facts']} current, "
            f"{stats['expired_facts']} ended); predicates: {', '.join(stats['relationship_types']) or '-'}"
        )
    return 0


# -- search: the graph joined with the drawers (mempalace_pg.retrieval) ------------------------------
def _search(args):
    from mempalace_pg.retrieval import PalaceSearch

    return PalaceSearch(**_palace_target(args))


def _embed(text: str) -> list:
    from mempalace_pg.retrieval import embed_query

    try:
        return embed_query(text)
    except Exception as exc:  # any embedder failure: say what to fix
        if isinstance(exc, ValueError) or _is_backend_error(exc):
            raise
        raise ConfigError(
            f"could not embed the query with MemPalace's configured embedder ({exc}); "
            "check MemPalace's embedding settings (`mempalace status`)"
        ) from None


def _snippet(text: Optional[str], width: int = 100) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _fact_line(f: dict) -> str:
    span = f"[{f.get('valid_from') or '…'} → {f.get('valid_to') or 'now'}]"
    return f"{f['subject']} —{f['predicate']}→ {f['object']}  {span}"


def cmd_search_around(args) -> int:
    with _search(args) as search:
        result = search.around_entity(
            args.entity,
            _embed(args.query),
            hops=args.hops,
            as_of=args.as_of,
            n_results=args.n,
            mode=args.mode,
            boost=args.boost,
            wing=args.wing,
            room=args.room,
        )
    if args.json:
        print(json.dumps(result))
        return 0
    if not result["entity_found"]:
        print(f"no entity {args.entity!r} in this palace's knowledge graph: nothing to search around")
        return 0
    print(
        f"{args.entity}: {result['entities'] - 1} entities within {args.hops} hop(s), {result['facts']} "
        "facts, "
        f"{result['evidence_drawers']} source drawers" + (f" (as of {args.as_of})" if args.as_of else "")
    )
    if not result["hits"]:
        print("no drawers found")
    for i, hit in enumerate(result["hits"], 1):
        mark = "*" if hit["evidence"] else " "
        meta = hit.get("metadata") or {}
        print(
            f"{i:2d}.{mark} {hit['id']}  similarity {hit['similarity']:.3f}  "
            f"[{meta.get('wing', '-')}/{meta.get('room', '-')}]  {_snippet(hit['document'])}"
        )
        for fact in hit["facts"]:
            print(f"       {_fact_line(fact)}")
    if args.mode == "boost":
        print("(* = source of a fact in the neighbourhood, boosted)")
    return 0


def cmd_search_facts(args) -> int:
    with _search(args) as search:
        vector = _embed(args.query) if args.query else None
        result = search.facts_with_evidence(
            args.entity, vector, as_of=args.as_of, direction=args.direction, limit=args.n
        )
    if args.json:
        print(json.dumps(result))
        return 0
    if not result["entity_found"]:
        print(f"no entity {args.entity!r} in this palace's knowledge graph")
        return 0
    if not result["facts"]:
        print(f"nothing known about {args.entity!r}" + (f" as of {args.as_of}" if args.as_of else ""))
    for fact in result["facts"]:
        sim = f"similarity {fact['similarity']:.3f}" if fact.get("similarity") is not None else ""
        print(f"{_fact_line(fact)}  {sim}")
        if fact["source_drawer_id"]:
            print(
                f"    from drawer {fact['source_drawer_id']} ({fact['evidence']}): "
                f"{_snippet(fact.get('document'))}"
            )
    return 0


def cmd_search_entities(args) -> int:
    with _search(args) as search:
        rows = search.entities_for_query(
            _embed(args.query),
            n_results=args.n,
            drawers=args.drawers,
            as_of=args.as_of,
            wing=args.wing,
            room=args.room,
        )
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no entities are linked to the drawers nearest to this query")
    for i, row in enumerate(rows, 1):
        print(
            f"{i:2d}. {row['name'] or row['entity_id']} ({row['type']})  best similarity {row['score']:.3f}  "
            f"{row['drawers']} drawer(s), {row['facts']} fact(s); best: {row['best_drawer']}"
        )
    return 0


def cmd_search_hybrid(args) -> int:
    with _search(args) as search:
        rows = search.hybrid(args.query, _embed(args.query), n_results=args.n, wing=args.wing, room=args.room)
    if args.json:
        print(json.dumps(rows))
        return 0
    if not rows:
        print("no drawers found")
    for i, row in enumerate(rows, 1):
        ranks = f"vector #{row['vector_rank'] or '-'}, text #{row['text_rank'] or '-'}"
        meta = row.get("metadata") or {}
        print(
            f"{i:2d}. {row['id']}  rrf {row['score']:.4f} ({ranks})  [{meta.get('wing', '-')}/"
            f"{meta.get('room', '-')}]  {_snippet(row['document'])}"
        )
    return 0


def _palace_handles(args, *, create: bool):
    """(drawers collection, knowledge graph) of the palace a command means; with ``create`` a palace
    directory that is not one yet becomes a postgres palace."""
    import os

    from mempalace_pg.atomic import open_drawers
    from mempalace_pg.marker import has_marker

    settings = _settings(args)
    if create and getattr(args, "palace", None) and not has_marker(os.path.expanduser(args.palace)):
        from mempalace.backends import PalaceRef

        from mempalace_pg.store.backend import PostgresBackend
        from mempalace_pg.store.partition import DRAWERS_COLLECTION

        path = os.path.realpath(os.path.expanduser(args.palace))
        PostgresBackend().open_collection(
            settings,
            palace=PalaceRef(id=path, local_path=path),
            collection_name=DRAWERS_COLLECTION,
            create=True,
        )
    target = _palace_target(args)
    return open_drawers(
        target.get("palace_path"),
        palace_key=target.get("palace_key"),
        namespace=target.get("namespace"),
        settings=settings,
        create=create,
    )


def cmd_export(args) -> int:
    from mempalace_pg.marker import write_atomically
    from mempalace_pg.tools.portable import export_palace

    drawers, kg = _palace_handles(args, create=False)
    with write_atomically(args.file) as out:  # a cut-short export never looks complete
        counts = export_palace(out, drawers, kg)
    print(
        json.dumps(counts)
        if args.json
        else f"exported {', '.join(f'{v} {k}' for k, v in counts.items())} of {kg.palace_key!r} "
        f"to {args.file}"
    )
    return 0


def cmd_import(args) -> int:
    from mempalace_pg.tools.portable import import_palace

    drawers, kg = _palace_handles(args, create=True)
    report = import_palace(args.file, drawers, kg)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        for key, expected in report.expected.items():
            print(
                f"{key}: {expected} in {args.file}; {report.written.get(key, 0)} written; "
                f"{report.found.get(key, 0)} in the palace"
            )
        print(("OK" if report.ok else "MISMATCH") + f" ({kg.palace_key!r})")
    return 0 if report.ok else 1


def cmd_migrate(args) -> int:
    from mempalace_pg.tools.migrate import migrate
    from mempalace_pg.tools.progress import print_collection_progress

    show = print_collection_progress if (not args.json and (args.progress or sys.stderr.isatty())) else None
    report = migrate(
        args.source,
        args.target,
        settings=_settings(args),
        dry_run=args.dry_run,
        page=args.batch,
        progress=show,
    )
    if args.json:
        print(json.dumps(report.as_dict()))
        return 0 if report.ok else 1
    verb = "would copy" if report.dry_run else "copied"
    print(f"{report.source} ({report.source_backend}) -> {report.target} (postgres)")
    for name, c in report.collections.items():
        extra = (
            ""
            if report.dry_run
            else (f": {c['written']} written, {c['skipped']} already there, {c['target']} in the target")
        )
        read = report.reader.get(name)
        via = f", read from {'its files' if read == 'files' else read}" if read else ""
        print(f"  {name}: {verb} {c['source']} records{extra}{via}")
    if report.graph is not None:
        g = report.graph
        done = "" if report.dry_run else f" ({'verified' if g.get('ok') else 'NOT verified'})"
        print(f"  knowledge graph: {verb} {g['entities']} entities, {g['triples']} triples into AGE{done}")
    if report.dry_run:
        print("dry run: nothing was written")
        return 0
    print(
        f"read back {report.sampled} sampled records: "
        + (
            "identical"
            if not report.mismatches
            else f"{len(report.mismatches)} differences: {report.mismatches[:3]}"
        )
    )
    if report.ok:
        print(
            f"done in {report.seconds:.0f} s. Switch MemPalace over: `mempalace --palace {report.target} "
            "status`, "
            f'or set "palace_path": "{report.target}" in MemPalace\'s config.json (with MEMPALACE_PG_DSN '
            "set wherever MemPalace runs). The source palace is unchanged."
        )
    return 0 if report.ok else 1


def cmd_backup(args) -> int:
    from mempalace_pg.tools.backup import backup

    result = backup(args.file, _settings(args), pg_dump=args.pg_dump)
    print(
        json.dumps(result)
        if args.json
        else f"backed up schema {result['schema']} and graph {result['graph']} to {result['file']} "
        f"({result['bytes'] / 1e6:.1f} MB); restore with `mempalace-pg restore {result['file']}`"
    )
    return 0


def cmd_restore(args) -> int:
    from mempalace_pg.tools.backup import restore

    result = restore(args.file, _settings(args), pg_restore=args.pg_restore)
    print(
        json.dumps(result)
        if args.json
        else f"restored schema {result['schema']} and graph {result['graph']} from {result['file']}; "
        f"AGE sees {result['facts_seen_by_cypher']} facts. Check with `mempalace-pg doctor`."
    )
    return 0


def cmd_mcp(args) -> int:
    from mempalace_pg.mcp_tools.server import main as serve

    return serve(_palace_target(args)["palace_path"])


def cmd_doctor(args) -> int:
    from mempalace_pg.tools.doctor import render, run_checks

    report = run_checks(_settings(args), palace_path=args.palace)
    print(json.dumps(report.as_dict()) if args.json else render(report))
    return 0 if report.ok else 1


# Long on purpose: one flat declaration of every subcommand and its options, read top to bottom.
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mempalace-pg", description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: MEMPALACE_PG_DSN, config.json postgres_dsn)")
    parser.add_argument("--schema", help="schema name (default: MEMPALACE_PG_SCHEMA or 'mempalace')")
    sub = parser.add_subparsers(dest="command", required=True)
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

    kg = sub.add_parser("kg", help="the palace's knowledge graph (Apache AGE)").add_subparsers(
        dest="kg_command", required=True
    )

    def palace_args(p):
        p.add_argument(
            "--palace", help="the postgres palace directory (default: MemPalace's configured palace)"
        )
        p.add_argument("--palace-key", help="the palace key, for a palace without a directory")
        p.add_argument("--namespace", help="the palace's namespace (with --palace-key)")
        p.add_argument("--json", action="store_true", help="machine-readable output")

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
    res.add_argument("--json", action="store_true", help="machine-readable output")
    res.set_defaults(func=cmd_restore)

    doc = sub.add_parser("doctor", help="check the installation; each problem with the command that fixes it")
    doc.add_argument(
        "--palace", help="the palace directory to check (default: MemPalace's configured palace)"
    )
    doc.add_argument("--json", action="store_true", help="machine-readable output")
    doc.set_defaults(func=cmd_doctor)

    mcp = sub.add_parser("mcp", help="serve the palace's graph-aware tools to an AI client (MCP over stdio)")
    mcp.add_argument(
        "--palace", help="the postgres palace directory (default: MemPalace's configured palace)"
    )
    mcp.set_defaults(func=cmd_mcp)

    search = sub.add_parser(
        "search", help="the knowledge graph joined with the drawers, one SQL statement each"
    ).add_subparsers(dest="search_command", required=True)

    def filters(p, *, n=10):
        p.add_argument("-n", type=int, default=n, help=f"how many results (default {n})")
        p.add_argument("--wing", help="only drawers of this wing")
        p.add_argument("--room", help="only drawers of this room")

    around = search.add_parser(
        "around", help="drawers similar to a query among what is known around an entity"
    )
    around.add_argument("entity")
    around.add_argument("query", help="text to embed with MemPalace's configured embedder")
    around.add_argument("--hops", type=int, default=1, help="neighbourhood radius in facts (1-6, default 1)")
    around.add_argument("--as-of", help="only facts valid at this date")
    around.add_argument(
        "--mode",
        choices=("restrict", "boost"),
        default="restrict",
        help="restrict: only the neighbourhood's source drawers; boost: all drawers, those ranked up",
    )
    around.add_argument(
        "--boost", type=float, default=0.1, help="similarity bonus in boost mode (default 0.1)"
    )
    filters(around)
    palace_args(around)
    around.set_defaults(func=cmd_search_around)
    facts = search.add_parser("facts", help="facts about an entity with the drawers they came from")
    facts.add_argument("entity")
    facts.add_argument("--query", help="rank the facts by how similar their drawer is to this text")
    facts.add_argument("--as-of", help="only facts valid at this date")
    facts.add_argument("--direction", choices=("outgoing", "incoming", "both"), default="both")
    facts.add_argument("-n", type=int, default=100, help="at most this many facts (default 100)")
    palace_args(facts)
    facts.set_defaults(func=cmd_search_facts)
    ents = search.add_parser("entities", help="entities ranked by the similarity of their drawers to a query")
    ents.add_argument("query")
    ents.add_argument("--drawers", type=int, default=50, help="nearest drawers to take (default 50)")
    ents.add_argument("--as-of", help="only facts valid at this date")
    filters(ents)
    palace_args(ents)
    ents.set_defaults(func=cmd_search_entities)
    hyb = search.add_parser("hybrid", help="vector and full-text rankings fused (reciprocal rank fusion)")
    hyb.add_argument("query")
    filters(hyb)
    palace_args(hyb)
    hyb.set_defaults(func=cmd_search_hybrid)
    return parser


def _is_backend_error(exc: BaseException) -> bool:
    """``exc`` is MemPalace's ``BackendError`` (ours are too). Asked without importing MemPalace's
    backends, which import chromadb: a command that never imported them raised none."""
    base = sys.modules.get("mempalace.backends.base")
    return base is not None and isinstance(exc, base.BackendError)


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`... | head`): stop quietly, as other Unix tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as exc:  # ours and bad input are reported; anything else is a bug
        if not (isinstance(exc, (ConfigError, ValueError)) or _is_backend_error(exc)):
            raise
        print(f"mempalace-pg: error: {exc}", file=sys.stderr)
        return 2


__all__ = ["main", "build_parser"]


if __name__ == "__main__":
    sys.exit(main())
