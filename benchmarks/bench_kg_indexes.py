"""Index designs for the knowledge graph's reads, each measured on the same graph in one run.

Issue 27 asks for the label tables' indexes for ``query_entity`` (and ``as_of``) to be measured, not
argued. A lookup returns an entity's facts with the other endpoint's name: the shipped indexes find
the facts by ``start_id``/``end_id`` and then read each fact's heap row and each other endpoint's
vertex row, wherever they lie. The design tried here keeps what a lookup reads inside the indexes
(``INCLUDE``): the facts of one vertex side by side in one index's leaf pages, and each vertex's
properties in its id index, so PostgreSQL can answer by index-only scans.

For each size the graph is loaded once (bench_kg's rows and bulk path) and each design is measured in
turn, A-B-A (shipped, covering, shipped again), through MemPalace's ``KnowledgeGraph`` surface:
``query_entity(direction="both")`` with and without ``as_of``: p50/p95 of the call, the statement's
execution in the server and the buffers it touches (EXPLAIN ANALYZE), ``add_triple``'s rate (what the
extra index entries cost a write), and the size of the indexes.

Usage:  python benchmarks/bench_kg_indexes.py --dsn postgresql://... [--sizes 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from bench_kg import entities_for, fresh_schema, load_age, make_rows, pct, timed, versions

HERE = Path(__file__).resolve().parent

#: The covering design: (index name, table, definition after ON).
COVERING = [
    ("fact_start_cover", "Fact", "(start_id) INCLUDE (end_id, properties)"),
    ("fact_end_cover", "Fact", "(end_id) INCLUDE (start_id, properties)"),
    ("entity_id_cover", "Entity", "(id) INCLUDE (properties)"),
]


def apply(conn, graph: str, design: str) -> float:
    """Put the graph's indexes in ``design`` ("shipped" or "covering"); VACUUM (ANALYZE) after, so the
    visibility map lets index-only scans skip the heap, as autovacuum would. Returns the seconds the
    index builds took."""
    t = time.perf_counter()
    for name, table, definition in COVERING:
        if design == "covering":
            conn.execute(f'CREATE INDEX IF NOT EXISTS {name} ON "{graph}"."{table}" {definition}')
        else:
            conn.execute(f'DROP INDEX IF EXISTS "{graph}".{name}')
    built = time.perf_counter() - t
    conn.execute(f'VACUUM (ANALYZE) "{graph}"."Entity", "{graph}"."Fact"')
    return built


def index_mb(conn, graph: str) -> dict:
    rows = conn.execute(
        "SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
        "WHERE n.nspname = %s AND t.relname IN ('Entity', 'Fact')",
        (graph,),
    ).fetchall()
    return {
        "all_indexes": round(sum(r[1] for r in rows) / 2**20),
        **{r[0]: round(r[1] / 2**20) for r in rows},
    }


def server(kg, names, as_of):
    """p50 of the lookup statement's execution in the server, and mean buffers (hit, read) a call."""
    import psycopg
    from psycopg import sql

    from mempalace_pg.graph.statements import statements
    from mempalace_pg.graph.values import entity_id_of, start_key

    st = statements(kg.settings.schema, kg.graph_name)
    statement = sql.SQL("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) ") + sql.SQL(
        st.query_entity("both", bool(as_of))
    )
    palace = kg.palace_pk()
    times, hit, read, index_only = [], 0, 0, 0
    with psycopg.connect(kg.settings.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("SET search_path = {}, public, ag_catalog").format(sql.Identifier(kg.settings.schema))
        )
        for name in names:
            params = {"palace": palace, "eid": entity_id_of(name), "as_of": start_key(as_of)}
            plan = conn.execute(statement, params)
            top = plan.fetchone()[0][0]
            times.append(top["Execution Time"] / 1000)
            hit += top["Plan"].get("Shared Hit Blocks", 0)
            read += top["Plan"].get("Shared Read Blocks", 0)
            index_only += "Index Only Scan" in json.dumps(top["Plan"])
    n = len(names)
    return {
        "execution_p50_ms": round(pct(times, 0.5), 3),
        "buffers_hit": round(hit / n, 1),
        "buffers_read": round(read / n, 1),
        "index_only_share": round(index_only / n, 2),
    }


def measure(kg, names, adds, tag) -> dict:
    out = {}
    for key, as_of in (("query_entity", None), ("query_entity_as_of", "2018-06-01")):
        fn = lambda i, a=as_of: kg.query_entity(names[i], as_of=a, direction="both")  # noqa: E731
        timed(fn, 20)  # warm-up (psycopg prepares a statement on its fifth use)
        xs = timed(fn, len(names))
        out[key] = {"p50_ms": round(pct(xs, 0.5), 3), "p95_ms": round(pct(xs, 0.95), 3)}
        out[key].update(server(kg, names[:300], as_of))
    # a predicate of the design's own, so that each call writes a new fact
    xs = timed(lambda i: kg.add_triple(adds[i][0], f"{adds[i][1]}_{tag}", adds[i][2]), len(adds))
    out["add_triple_per_s"] = round(len(xs) / sum(xs))
    return out


def run_size(n: int, dsn: str, schema: str) -> dict:
    import psycopg

    from mempalace_pg.config import Settings
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    n_entities = entities_for(n)
    entities, triples = make_rows(n, n_entities=n_entities)
    kg = AgeKnowledgeGraph(
        palace_key=f"idx-{n}-{uuid.uuid4().hex[:8]}", settings=Settings.load({"dsn": dsn, "schema": schema})
    )
    t = time.perf_counter()
    load_age(kg, entities, triples)
    result = {
        "triples": n,
        "entities": n_entities,
        "load_s": round(time.perf_counter() - t, 1),
        "designs": [],
    }
    rng = random.Random(n)
    names = [f"Entity {rng.randrange(n_entities)}" for _ in range(2000)]
    adds = [
        (
            f"Entity {rng.randrange(n_entities)}",
            f"idx_rel_{rng.randrange(10)}",
            f"Entity {rng.randrange(n_entities)}",
        )
        for _ in range(1000)
    ]
    with psycopg.connect(dsn, autocommit=True) as conn:
        for step, design in enumerate(("shipped", "covering", "shipped")):
            built = apply(conn, kg.graph_name, design)
            row = {"design": design, "index_build_s": round(built, 1), **measure(kg, names, adds, f"d{step}")}
            row["index_mb"] = index_mb(conn, kg.graph_name)
            print(json.dumps(row), file=sys.stderr, flush=True)
            result["designs"].append(row)
    kg.close()
    return result


def render(report) -> str:
    v = report["versions"]
    lines = [
        f"## Index designs for the graph's lookups, measured each ({report['date']})",
        "",
        f"PostgreSQL {v['postgres']}, AGE {v['age']}, MemPalace {v['mempalace']}, Python {v['python']}; "
        "`python benchmarks/bench_kg_indexes.py --sizes "
        f"{' '.join(str(r['triples']) for r in report['runs'])}`. Each size's graph loaded once, then the "
        "designs in turn (shipped, covering, shipped again), each after VACUUM (ANALYZE). Latencies in ms; "
        "execution and buffers: the lookup statement in the server (EXPLAIN ANALYZE), mean buffers a call.",
        "",
        "| facts | design | query_entity p50 / p95 | execution p50 | buffers hit / read | index-only "
        "| as_of p50 / p95 | as_of execution p50 | add_triple /s | indexes MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in report["runs"]:
        for d in run["designs"]:
            q, a = d["query_entity"], d["query_entity_as_of"]
            lines.append(
                f"| {run['triples']:,} | {d['design']} | {q['p50_ms']} / {q['p95_ms']} "
                f"| {q['execution_p50_ms']} "
                f"| {q['buffers_hit']} / {q['buffers_read']} | {q['index_only_share']:.0%} "
                f"| {a['p50_ms']} / {a['p95_ms']} | {a['execution_p50_ms']} | {d['add_triple_per_s']} "
                f"| {d['index_mb']['all_indexes']} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", default=os.environ.get("MEMPALACE_PG_DSN"))
    parser.add_argument("--schema", default="mempalace_bench_idx")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--json", default=str(HERE / "out" / "bench_kg_indexes.json"))
    parser.add_argument("--write-results", action="store_true")
    parser.add_argument("--from-json", help="re-render a saved report")
    args = parser.parse_args(argv)
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
    else:
        if not args.dsn:
            parser.error("--dsn or MEMPALACE_PG_DSN is required")
        report = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "versions": versions(args.dsn),
            "runs": [],
        }
        for n in args.sizes:
            # a schema per size: this process has prepared the previous one and keeps it in mind
            schema = f"{args.schema}_{n}"
            fresh_schema(args.dsn, schema)
            print(f"[bench_kg_indexes] {n} facts ...", file=sys.stderr, flush=True)
            report["runs"].append(run_size(n, args.dsn, schema))
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
            fresh_schema(args.dsn, schema)
    text = render(report)
    print(text)
    if args.write_results:
        import common

        common.record_report(HERE / "RESULTS.md", "bench_kg_indexes", text)


if __name__ == "__main__":
    main()
