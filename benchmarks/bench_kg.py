"""The AGE knowledge graph against MemPalace's SQLite KnowledgeGraph, same machine, one run.

For each size (triples over 5,000 entities, ~8% of them closed), both graphs are filled with the same
rows through their bulk paths (SQLite: executemany in one transaction; AGE: the replication primitive
in batches), ANALYZEd (what autovacuum does within a minute), then timed on the public API:

* ``add_triple``: throughput of the next 2,000 new facts at that size;
* ``invalidate``: throughput of closing 1,000 open facts at that size;
* ``query_entity(direction="both")`` with and without ``as_of``, ``timeline(limit=100)``: p50/p95;
* for reference, the same entity lookup written as a parameterised Cypher ``MATCH`` (prepared);
* the floor under any single write from Python: a round trip, and a one-row INSERT committed with and
  without waiting for its WAL flush (``synchronous_commit``).

Usage:  python benchmarks/bench_kg.py --dsn postgresql://... [--sizes 10000 100000] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent

ENTITIES = 5000


def entities_for(n: int) -> int:
    """Entities of a graph of ``n`` facts: 5,000 up to 100,000 facts (the sizes measured first), then one
    per 20 facts, so that an entity has as many facts at 1M as at 100k and what a lookup returns stays
    the same size while the graph grows."""
    return max(ENTITIES, n // 20)


PREDICATES = [f"rel_{i}" for i in range(40)]


def make_rows(
    n: int,
    seed: int = 7,
    *,
    n_entities: int = ENTITIES,
    entity_type: str = "unknown",
    first_year: int = 2010,
    years: int = 16,
    drawer_ids: list | None = None,
    adapter_name: str | None = None,
):
    """Entities and ``n`` triples between uniformly drawn endpoints, ~8% of them closed; with
    ``drawer_ids``, each drawn from a random one of those drawers (bench_retrieval.py's data)."""
    rng = random.Random(seed)
    entities = [
        {
            "id": f"entity_{i}",
            "name": f"Entity {i}",
            "type": entity_type,
            "properties": "{}",
            "created_at": "2026-01-01 00:00:00",
        }
        for i in range(n_entities)
    ]
    triples = []
    for i in range(n):
        s, o = rng.randrange(n_entities), rng.randrange(n_entities)
        year = first_year + rng.randrange(years)
        vf = f"{year}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
        vt = f"{year + 1 + rng.randrange(3)}-06-30" if rng.random() < 0.08 else None
        drawer = drawer_ids[rng.randrange(len(drawer_ids))] if drawer_ids else None
        triples.append(
            {
                "id": f"t_entity_{s}_{PREDICATES[i % 40]}_entity_{o}_{i:012x}",
                "subject": f"entity_{s}",
                "predicate": PREDICATES[i % 40],
                "object": f"entity_{o}",
                "valid_from": vf,
                "valid_to": vt,
                "confidence": 1.0,
                "source_closet": None,
                "source_file": None,
                "source_drawer_id": drawer,
                "adapter_name": adapter_name,
                "extracted_at": "2026-01-01 00:00:00",
            }
        )
    return entities, triples


def load_sqlite(kg, entities, triples):
    conn = kg._conn()
    with conn:
        conn.executemany(
            "INSERT INTO entities (id, name, type, properties, created_at) "
            "VALUES (:id, :name, :type, :properties, :created_at)",
            entities,
        )
        conn.executemany(
            "INSERT INTO triples (id, subject, predicate, object, valid_from, valid_to, confidence, "
            "source_closet, source_file, source_drawer_id, adapter_name, extracted_at) VALUES "
            "(:id, :subject, :predicate, :object, :valid_from, :valid_to, :confidence, :source_closet, "
            ":source_file, :source_drawer_id, :adapter_name, :extracted_at)",
            triples,
        )


def load_age(kg, entities, triples):
    from mempalace_pg.graph.kg_import import write_batch

    for table, rows in (("entities", entities), ("triples", triples)):
        for i in range(0, len(rows), 1000):
            write_batch(kg, table, rows[i : i + 1000])
    kg.database().run(lambda c: c.execute(f'ANALYZE "{kg.graph_name}"."Entity", "{kg.graph_name}"."Fact"'))


def timed(fn, n):
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t)
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def sqlite_setup(kg, directory: str) -> dict:
    """How the SQLite graph runs here, as MemPalace opens it: its journal mode and ``synchronous`` (MemPalace
    sets WAL and leaves synchronous at SQLite's default), the file system under it, and the p50 of one 4 KB
    write + fsync in that directory: in WAL mode with synchronous=FULL every commit waits for one."""
    conn = kg._conn()  # MemPalace's own connection (its KnowledgeGraph API)
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    synchronous = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(
        conn.execute("PRAGMA synchronous").fetchone()[0]
    )
    # findmnt names ext4 as such (stat -f says "ext2/ext3" for every ext)
    fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", directory], capture_output=True, text=True)
    fs = fs.stdout.strip() or "unknown"
    probe = os.path.join(directory, "fsync-probe")
    xs = []
    with open(probe, "wb") as f:
        for _ in range(300):
            t = time.perf_counter()
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())
            xs.append(time.perf_counter() - t)
    os.unlink(probe)
    return {
        "journal_mode": journal,
        "synchronous": synchronous,
        "filesystem": fs,
        "directory": directory,
        "fsync_p50_ms": round(pct(xs, 0.5), 3),
    }


def run_size(n: int, dsn: str, schema: str, sqlite_dir: Optional[str] = None) -> dict:
    from mempalace_pg.config import Settings
    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.graph.routing import sqlite_class

    n_entities = entities_for(n)
    entities, triples = make_rows(n, n_entities=n_entities)
    tmp = tempfile.mkdtemp(prefix="kgbench-", dir=sqlite_dir)
    sqlite_kg = sqlite_class()(os.path.join(tmp, "knowledge_graph.sqlite3"))
    age_kg = AgeKnowledgeGraph(
        palace_key=f"bench-{n}-{uuid.uuid4().hex[:8]}", settings=Settings.load({"dsn": dsn, "schema": schema})
    )
    t = time.perf_counter()
    load_sqlite(sqlite_kg, entities, triples)
    load_s_sqlite = time.perf_counter() - t
    t = time.perf_counter()
    load_age(age_kg, entities, triples)
    load_s_age = time.perf_counter() - t
    result = {
        "triples": n,
        "entities": n_entities,
        "load_s": {"sqlite": round(load_s_sqlite, 2), "age": round(load_s_age, 2)},
    }

    rng = random.Random(n)
    adds = [
        (
            f"Entity {rng.randrange(n_entities)}",
            f"new_rel_{rng.randrange(10)}",
            f"Entity {rng.randrange(n_entities)}",
            f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
        )
        for _ in range(2000)
    ]
    open_facts = [t for t in triples if t["valid_to"] is None]
    closes = rng.sample(open_facts, min(1000, len(open_facts)))
    names = [f"Entity {rng.randrange(n_entities)}" for _ in range(2000)]
    result["sqlite_setup"] = sqlite_setup(sqlite_kg, tmp)
    for label, kg in (("sqlite", sqlite_kg), ("age", age_kg)):
        r = result.setdefault(label, {})
        xs = timed(lambda i: kg.add_triple(*adds[i][:3], valid_from=adds[i][3]), len(adds))
        r["add_triple_per_s"] = round(len(xs) / sum(xs))
        r["add_triple_p50_ms"] = round(pct(xs, 0.5), 3)
        # a new user's first facts: both entities new, so each call also writes two entities
        xs = timed(lambda i: kg.add_triple(f"Person {n}-{i}", "knows", f"Thing {n}-{i}"), 1000)
        r["add_triple_new_entities_per_s"] = round(len(xs) / sum(xs))
        xs = timed(
            lambda i: kg.invalidate(
                closes[i]["subject"].replace("entity_", "Entity "),
                closes[i]["predicate"],
                closes[i]["object"].replace("entity_", "Entity "),
                ended="2027-01-01",
            ),
            len(closes),
        )
        r["invalidate_per_s"] = round(len(xs) / sum(xs))
        for key, fn in (
            ("query_entity", lambda i: kg.query_entity(names[i], direction="both")),
            ("query_entity_as_of", lambda i: kg.query_entity(names[i], as_of="2018-06-01", direction="both")),
            ("timeline_100", lambda i: kg.timeline(limit=100)),
        ):
            count = 300 if key == "timeline_100" else len(names)
            timed(fn, 20)  # warm-up (psycopg prepares a statement on its fifth use)
            xs = timed(fn, count)
            r[key] = {"p50_ms": round(pct(xs, 0.5), 3), "p95_ms": round(pct(xs, 0.95), 3)}
    result["age"]["cypher_match_out"] = cypher_lookup(age_kg, names)
    result["age"]["write_floor"] = write_floor(age_kg)
    result["age"]["server_side"] = server_side(age_kg, names, adds)
    result["age"]["graph_mb"], result["age"]["shared_buffers"] = graph_size(age_kg)
    result["facts_per_query_entity"] = round(
        sum(len(age_kg.query_entity(x, direction="both")) for x in names[:200]) / 200, 1
    )
    sqlite_kg.close()
    return result


def cypher_lookup(kg, names):
    """The same one-entity lookup as a parameterised, prepared Cypher query (for reference)."""
    import psycopg

    with psycopg.connect(kg.settings.dsn, autocommit=True) as conn:
        conn.execute("LOAD 'age'")
        conn.execute('SET search_path = ag_catalog, "$user", public')
        conn.execute("SET statement_timeout = '20s'")
        query = (
            f"SELECT * FROM cypher('{kg.graph_name}', $$ MATCH (v:Entity "
            f"{{palace: $palace, entity_id: $eid}})"
            "-[f:Fact]->(o:Entity) RETURN f.predicate, o.name, f.valid_from, f.valid_to $$, %s) "
            "AS (p agtype, o agtype, vf agtype, vt agtype)"
        )
        palace = kg.palace_pk()

        def one(i):
            eid = names[i].lower().replace(" ", "_")
            conn.execute(query, (json.dumps({"palace": palace, "eid": eid}),), prepare=True).fetchall()

        few = kg.stats()["triples"] > 50_000  # seconds a call at 100k: a handful is plenty
        try:
            timed(one, 1 if few else 6)
            xs = timed(one, 3 if few else 60)
        except psycopg.errors.QueryCanceled:
            return {"p50_ms": "> 20000 (timed out)", "p95_ms": "> 20000"}
    return {"p50_ms": round(pct(xs, 0.5), 3), "p95_ms": round(pct(xs, 0.95), 3)}


def server_side(kg, names, adds):
    """Where a call's time goes, p50 ms: the statement's execution in the server (EXPLAIN ANALYZE with
    TIMING OFF; the writes inside a transaction that is rolled back), and add_triple as one SQL call of
    its function with and without waiting for the WAL flush (no Python of ours around it). timeline's
    figure stays in the JSON only: planned afresh for EXPLAIN and instrumented loop by loop, it came out
    above the whole prepared call a user makes, so it says nothing about that call."""
    import psycopg
    from psycopg import sql

    from mempalace_pg.graph.statements import statements
    from mempalace_pg.graph.values import entity_id_of

    st = statements(kg.settings.schema, kg.graph_name)
    palace = kg.palace_pk()
    call = sql.SQL("SELECT {}(%s, %s, %s, %s, %s, %s, %s, %s, NULL, 1.0, NULL, NULL, NULL, NULL)").format(
        sql.Identifier(kg.settings.schema, "kg_add_triple")
    )

    def args(i, tag):
        sub, pred, obj, vf = adds[i % len(adds)]
        return (
            palace,
            entity_id_of(sub),
            sub,
            f"{pred}_{tag}",
            entity_id_of(obj),
            obj,
            f"t_bench_{tag}_{i}_{uuid.uuid4().hex[:8]}",
            vf,
        )

    out = {}
    with psycopg.connect(kg.settings.dsn) as conn:
        conn.execute(
            sql.SQL("SET search_path = {}, public, ag_catalog").format(sql.Identifier(kg.settings.schema))
        )

        def executed(statement, params):
            plan = conn.execute(sql.SQL("EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ") + statement, params)
            return plan.fetchone()[0][0]["Execution Time"]

        for key, statement, params in (
            (
                "query_entity",
                sql.SQL(st.query_entity("both", False)),
                lambda i: {"palace": palace, "eid": entity_id_of(names[i]), "as_of": None},
            ),
            ("timeline_100", sql.SQL(st.timeline(False, 100, 0)), lambda i: {"palace": palace}),
            ("add_triple", call, lambda i: args(i, "x")),
        ):
            xs = [executed(statement, params(i)) / 1000 for i in range(300)]  # ms, as seconds for pct()
            out[f"{key}_execution_ms"] = round(pct(xs, 0.5), 3)
        conn.rollback()
        conn.autocommit = True
        for key, setting in (("add_triple_sql_durable_ms", "on"), ("add_triple_sql_no_flush_ms", "off")):
            conn.execute(f"SET synchronous_commit = {setting}")
            xs = timed(lambda i: conn.execute(call, args(i, setting), prepare=True), 600)
            out[key] = round(pct(xs[100:], 0.5), 3)
    return out


def graph_size(kg):
    """The graph's label tables with their indexes (every palace of the schema), MB, and the server's
    shared_buffers: whether what a lookup reads can stay in PostgreSQL's own cache."""
    import psycopg

    with psycopg.connect(kg.settings.dsn, autocommit=True) as conn:
        size = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname IN ('Entity', 'Fact')",
            (kg.graph_name,),
        ).fetchone()[0]
        buffers = conn.execute("SHOW shared_buffers").fetchone()[0]
    return round(int(size or 0) / 2**20), buffers


def write_floor(kg):
    """p50 ms of what any single write costs on this server, whatever it writes: a round trip (``SELECT 1``),
    and a one-row INSERT into a scratch table committed with and without waiting for the WAL flush."""
    import psycopg

    table = f'"{kg.settings.schema}".bench_commit_floor'
    out = {}
    with psycopg.connect(kg.settings.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (i int)")
        try:
            for key, setting, statement in (
                ("round_trip", "on", "SELECT 1"),
                ("durable_commit", "on", f"INSERT INTO {table} VALUES (1)"),
                ("commit_without_flush", "off", f"INSERT INTO {table} VALUES (1)"),
            ):
                conn.execute(f"SET synchronous_commit = {setting}")
                timed(lambda i: conn.execute(statement), 50)  # warm-up
                out[key] = round(pct(timed(lambda i: conn.execute(statement), 2000), 0.5), 3)
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    return out


def fresh_schema(dsn, schema):
    """Start from an empty schema and graph, so earlier runs' rows do not weigh on this one."""
    import psycopg

    from mempalace_pg.config import validate_identifier

    validate_identifier(schema, "schema")
    with psycopg.connect(dsn, autocommit=True) as conn:
        for attempt in range(10):
            # An index folder still building in the schema (CREATE INDEX CONCURRENTLY) can deadlock with
            # the DROP, and PostgreSQL cancels the DROP: try again once the build has moved on.
            try:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                break
            except psycopg.errors.DeadlockDetected:
                if attempt == 9:
                    raise
                time.sleep(2)
        conn.execute(
            "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
            (f"{schema}_kg",),
        )


def versions(dsn):
    import mempalace
    import psycopg

    with psycopg.connect(dsn) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]
        age = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'age'").fetchone()
    return {
        "postgres": pg,
        "age": age[0] if age else None,
        "mempalace": mempalace.__version__,
        "python": platform.python_version(),
        "sqlite": __import__("sqlite3").sqlite_version,
    }


def render(report) -> str:
    lines = [
        f"## Knowledge graph: AGE vs MemPalace's SQLite KnowledgeGraph ({report['date']})",
        "",
        f"PostgreSQL {report['versions']['postgres']}, AGE {report['versions']['age']}, MemPalace "
        f"{report['versions']['mempalace']}, SQLite {report['versions']['sqlite']}, Python "
        f"{report['versions']['python']}; "
        + ", ".join(
            f"{r.get('entities', ENTITIES):,} entities at {r['triples']:,} facts" for r in report["runs"]
        )
        + "; ~8% of loaded facts closed; "
        f"`python benchmarks/bench_kg.py --sizes {' '.join(str(r['triples']) for r in report['runs'])}`.",
        "",
        "SQLite as MemPalace opens it: "
        + "; ".join(
            f"{r['triples']:,} facts: journal_mode={s['journal_mode']}, synchronous={s['synchronous']}, on "
            f"{s['filesystem']} ({s['directory']})"
            for r in report["runs"]
            if (s := r.get("sqlite_setup"))
        )
        + ". Each add_triple there is one commit that waits for an fsync of the WAL; each AGE add_triple one "
        "durable commit of PostgreSQL.",
        "",
        "| triples | metric | SQLite | AGE | ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        n, s, a = r["triples"], r["sqlite"], r["age"]
        big = n >= 100_000
        rows = [
            (
                "add_triple /s",
                s["add_triple_per_s"],
                a["add_triple_per_s"],
                a["add_triple_per_s"] / s["add_triple_per_s"],
                "≥ 1x",
            ),
            (
                "add_triple, both entities new /s",
                s["add_triple_new_entities_per_s"],
                a["add_triple_new_entities_per_s"],
                a["add_triple_new_entities_per_s"] / s["add_triple_new_entities_per_s"],
                "≥ 1x",
            ),
            (
                "invalidate /s",
                s["invalidate_per_s"],
                a["invalidate_per_s"],
                a["invalidate_per_s"] / s["invalidate_per_s"],
                "≥ 10x" if big else "",
            ),
        ]
        for key, label, target in (
            ("query_entity", "query_entity both p50 ms", "≤ 1x"),
            ("query_entity_as_of", "query_entity as_of p50 ms", "≤ 1x"),
            ("timeline_100", "timeline(100) p50 ms", "≤ 1x"),
        ):
            rows.append(
                (
                    label,
                    s[key]["p50_ms"],
                    a[key]["p50_ms"],
                    a[key]["p50_ms"] / s[key]["p50_ms"],
                    target,
                )
            )
            rows.append(
                (
                    label.replace("p50", "p95"),
                    s[key]["p95_ms"],
                    a[key]["p95_ms"],
                    a[key]["p95_ms"] / s[key]["p95_ms"],
                    "",
                )
            )
        rows.append(
            ("outgoing lookup as prepared Cypher MATCH p50 ms", "", a["cypher_match_out"]["p50_ms"], None, "")
        )
        floor = a.get("write_floor")
        if floor:
            rows += [
                ("floor: round trip (SELECT 1) p50 ms", "", floor["round_trip"], None, ""),
                ("floor: one-row INSERT, durable commit p50 ms", "", floor["durable_commit"], None, ""),
                (
                    "floor: one-row INSERT, synchronous_commit off p50 ms",
                    "",
                    floor["commit_without_flush"],
                    None,
                    "",
                ),
            ]
        side = a.get("server_side")
        if side:
            rows += [
                (
                    "AGE add_triple: the statement's execution in the server p50 ms",
                    "",
                    side["add_triple_execution_ms"],
                    None,
                    "",
                ),
                (
                    "AGE add_triple as one SQL call, durable commit p50 ms",
                    "",
                    side["add_triple_sql_durable_ms"],
                    None,
                    "",
                ),
                (
                    "AGE add_triple as one SQL call, synchronous_commit off p50 ms",
                    "",
                    side["add_triple_sql_no_flush_ms"],
                    None,
                    "",
                ),
                (
                    "AGE query_entity both: execution in the server p50 ms",
                    "",
                    side["query_entity_execution_ms"],
                    None,
                    "",
                ),
            ]
        if "graph_mb" in a:
            rows.append(
                (
                    f"AGE graph, label tables and indexes, MB (shared_buffers {a['shared_buffers']})",
                    "",
                    a["graph_mb"],
                    None,
                    "",
                )
            )
        if "facts_per_query_entity" in r:
            rows.append(
                ("facts a query_entity (both) returns, mean", "", r["facts_per_query_entity"], None, "")
            )
        setup = r.get("sqlite_setup")
        if setup:
            rows.append(("floor: SQLite, one 4 KB write + fsync p50 ms", setup["fsync_p50_ms"], "", None, ""))
        rows.append(("bulk load s", r["load_s"]["sqlite"], r["load_s"]["age"], None, ""))
        for label, sv, av, ratio, target in rows:
            lines.append(
                f"| {n:,} | {label} | {sv} | {av} | {'' if ratio is None else f'{ratio:.2f}x'} | {target} |"
            )
    if len(report["runs"]) >= 2:
        small, large = report["runs"][0]["age"], report["runs"][-1]["age"]
        lines += [
            "",
            "AGE flatness, largest/smallest size: "
            + ", ".join(
                f"{k} {large[k]['p50_ms'] / small[k]['p50_ms']:.2f}x"
                for k in ("query_entity", "query_entity_as_of", "timeline_100")
            )
            + f", add_triple/s {large['add_triple_per_s'] / small['add_triple_per_s']:.2f}x",
        ]
    lines += [
        "",
        "Ratios: AGE/SQLite for throughput (higher is better), AGE/SQLite for latency (lower is better).",
        "",
    ]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("MEMPALACE_PG_DSN"))
    parser.add_argument("--schema", default="mempalace_bench")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--sqlite-dir",
        help="where the SQLite graph's file goes (default: the system's temporary directory); put it where "
        "a user's palace lives to measure SQLite on that disk",
    )
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="put the table at the top of benchmarks/RESULTS.md (newest first)",
    )
    parser.add_argument("--from-json", help="re-render a saved report")
    args = parser.parse_args(argv)
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
    else:
        if not args.dsn:
            parser.error("--dsn or MEMPALACE_PG_DSN is required")
        fresh_schema(args.dsn, args.schema)
        report = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "versions": versions(args.dsn),
            "runs": [],
        }
        for n in args.sizes:
            print(f"[bench_kg] {n} triples ...", file=sys.stderr, flush=True)
            report["runs"].append(run_size(n, args.dsn, args.schema, args.sqlite_dir))
            print(json.dumps(report["runs"][-1]), file=sys.stderr, flush=True)
        out = HERE / "out"
        out.mkdir(exist_ok=True)
        (out / "bench_kg.json").write_text(json.dumps(report, indent=2) + "\n")
    text = render(report)
    print(text)
    if args.write_results:
        import common

        common.record_report(HERE / "RESULTS.md", "bench_kg", text)


if __name__ == "__main__":
    main()
