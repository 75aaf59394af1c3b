"""Benchmark: ways to find the entities within N hops in the AGE graph, on the same graph, one run.

    python benchmarks/bench_walk.py                   # 100k facts, sparse (50k entities) and dense (5k)
    python benchmarks/bench_walk.py --no-write

Methods (all return the same set of vertices; checked):

* ``cypher *1..N``: AGE's variable-length MATCH, parameterised and prepared:
  ``MATCH (s:Entity {palace: $palace, entity_id: $id})-[:Fact*1..N]-(o:Entity) RETURN DISTINCT id(o)``
  (a property map cannot use our expression indexes), and the same starting from the vertex id;
* ``recursive CTE``: plain SQL ``WITH RECURSIVE`` over the label table, (vertex, depth) rows, ``UNION``;
* ``kg_neighbourhood()``: the PL/pgSQL function of sql/0003 (one set-based query per hop);
* ``unrolled walk``: the walk mempalace_pg.retrieval writes into its statements (one hashed
  anti-join per hop, planned with the statement).

Validity filtering is off (every fact counts) so that all four do the same work.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from pathlib import Path

import common
import numpy as np
from bench_retrieval import make_facts, report_head, report_options, save_and_report

HERE = Path(__file__).resolve().parent

TIMEOUT_MS = 10_000


def run(facts: int, entities: int, dsn: str, reps: int) -> dict:
    import os

    import psycopg
    from bench_kg import load_age

    from mempalace_pg.config import Settings
    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.retrieval import PalaceSearch

    schema = f"walk_{uuid.uuid4().hex[:6]}"
    os.environ["MEMPALACE_PG_DSN"], os.environ["MEMPALACE_PG_SCHEMA"] = dsn, schema
    settings = Settings.load()
    graph = settings.graph
    ents, triples = make_facts(facts, entities, [f"d{i}" for i in range(facts)])
    kg = AgeKnowledgeGraph(palace_key="walk", settings=settings)
    out: dict = {"facts": facts, "entities": entities, "methods": {}}
    try:
        load_age(kg, ents, triples)
        palace = kg.palace_pk()
        rng = random.Random(3)
        subjects = sorted({t["subject"] for t in triples})
        picks = [subjects[rng.randrange(len(subjects))] for _ in range(reps)]
        search = PalaceSearch(palace_key="walk", settings=settings)
        with psycopg.connect(dsn) as conn:
            vertex_ids = {
                e: int(str(v))
                for e, v in conn.execute(
                    f"SELECT {schema}.kg_text(properties, 'entity_id'), id::text FROM {graph}.\"Entity\""
                ).fetchall()
            }
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("LOAD 'age'")
            conn.execute(f"SET search_path = {schema}, public, ag_catalog")
            conn.execute(f"SET statement_timeout = {TIMEOUT_MS}")
            for hops in (1, 2, 3):
                walk, wparams = search.neighbourhood_ctes(palace, hops)
                unrolled = (
                    walk
                    + psycopg.sql.SQL(" SELECT array_agg(vertex::text::bigint) FROM hood WHERE depth > 0")
                ).as_string(conn)
                methods = {
                    "cypher *1..N": (
                        f"SELECT array_agg(v::text::bigint) FROM ag_catalog.cypher('{graph}', $$ MATCH "
                        "(s:Entity "
                        f"{{palace: $palace, entity_id: $id}})-[:Fact*1..{hops}]-(o:Entity) WHERE id(o) <> "
                        "id(s) "
                        f"RETURN DISTINCT id(o) $$, %s) AS (v ag_catalog.agtype)",
                        lambda e: [json.dumps({"palace": palace, "id": e})],
                    ),
                    "cypher *1..N, start by id": (
                        f"SELECT array_agg(v::text::bigint) FROM ag_catalog.cypher('{graph}', $$ MATCH "
                        "(s:Entity)"
                        f"-[:Fact*1..{hops}]-(o:Entity) WHERE id(s) = $vid AND id(o) <> id(s) "
                        f"RETURN DISTINCT id(o) $$, %s) AS (v ag_catalog.agtype)",
                        lambda e: [json.dumps({"vid": vertex_ids[e]})],
                    ),
                    "recursive CTE": (
                        f"WITH RECURSIVE walk(vertex, depth) AS ("
                        f" SELECT e.id, 0 FROM {graph}.\"Entity\" e WHERE kg_text(e.properties, 'palace') = "
                        "%s::text"
                        f"  AND kg_text(e.properties, 'entity_id') = %s"
                        f" UNION SELECT n.vertex, w.depth + 1 FROM walk w CROSS JOIN LATERAL ("
                        f'  SELECT f.end_id AS vertex FROM {graph}."Fact" f WHERE f.start_id = w.vertex'
                        f'  UNION ALL SELECT f.start_id FROM {graph}."Fact" f WHERE f.end_id = w.vertex) n'
                        f" WHERE w.depth < %s)"
                        f" SELECT array_agg(DISTINCT vertex::text::bigint) FROM walk"
                        f" WHERE vertex NOT IN (SELECT vertex FROM walk WHERE depth = 0)",
                        lambda e, h=hops: [palace, e, h],
                    ),
                    "kg_neighbourhood()": (
                        "SELECT array_agg(vertex::text::bigint) FROM kg_neighbourhood(%s, %s, %s) WHERE "
                        "depth > 0",
                        lambda e, h=hops: [palace, e, h],
                    ),
                    "unrolled walk": (
                        unrolled,
                        lambda e, wp=wparams: {**wp, "entity": e, "as_of": None},
                    ),
                }
                reference = None
                for name, (query, args) in methods.items():
                    times, answers, timed_out = [], [], False
                    for entity in picks:
                        t0 = time.perf_counter()
                        try:
                            row = conn.execute(query, args(entity), prepare=True).fetchone()
                        except psycopg.errors.QueryCanceled:
                            timed_out = True
                            break
                        times.append((time.perf_counter() - t0) * 1000)
                        answers.append(sorted(int(str(v)) for v in (row[0] or [])))
                    result = {"timed_out": timed_out}
                    if times:
                        result.update(
                            p50=float(np.percentile(times[1:] or times, 50)),
                            p95=float(np.percentile(times[1:] or times, 95)),
                            n=len(times),
                            reached=float(np.mean([len(a) for a in answers])),
                        )
                    if reference is None and not timed_out:
                        reference = answers
                    elif not timed_out:
                        result["same_answer"] = answers == reference[: len(answers)]
                    out["methods"].setdefault(name, {})[hops] = result
                    print(
                        f"[bench_walk] {entities} entities, {hops} hops, {name:20s} {result}",
                        file=sys.stderr,
                        flush=True,
                    )
        search.close()
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s", (graph,)
            )
    return out


def render(report: dict) -> str:
    v = report["versions"]
    lines = [
        f"## Finding the entities within N hops: four methods — {report['date']}",
        "",
        f"PostgreSQL {v['postgresql']}, AGE {v['age']}, {v['cpus']} CPUs. Command: `{report['command']}`. "
        f"p50 / p95 in ms over {report['reps']} random start entities (prepared statements); each graph has "
        "100k facts with uniformly random endpoints. `same` = the same vertex sets as the first method; "
        f"timeouts at {TIMEOUT_MS / 1000:.0f} s.",
        "",
    ]
    for run_ in report["runs"]:
        lines += [
            f"{run_['facts']:,} facts over {run_['entities']:,} entities:",
            "",
            "| method | 1 hop | 2 hops | 3 hops | entities reached (1/2/3) |",
            "|---|---|---|---|---|",
        ]
        for name, by_hops in run_["methods"].items():
            cells, reached = [], []
            for h in ("1", "2", "3"):
                r = by_hops.get(h) or by_hops.get(int(h)) or {}
                if r.get("timed_out"):
                    cells.append(f"> {TIMEOUT_MS / 1000:.0f} s")
                    reached.append("—")
                else:
                    same = "" if r.get("same_answer", True) else " (differs!)"
                    cells.append(f"{r['p50']:.2f} / {r['p95']:.2f}{same}")
                    reached.append(f"{r['reached']:.0f}")
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {' / '.join(reached)} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--entities", default="50000,5000")
    ap.add_argument("--reps", type=int, default=30)
    report_options(ap, "bench_walk")
    args = ap.parse_args()

    def make_report():
        dsn = common.provisioned_dsn()
        return {
            **report_head(dsn, "bench_walk"),
            "reps": args.reps,
            "runs": [run(args.facts, int(e), dsn, args.reps) for e in args.entities.split(",")],
        }

    return save_and_report(args, make_report, render)


if __name__ == "__main__":
    raise SystemExit(main())
