"""Benchmark: graph + vector retrieval in one SQL statement (mempalace_pg.retrieval) against doing the
same with two separate stores from Python, as MemPalace's own pieces allow.

    python benchmarks/bench_retrieval.py                       # 100k drawers, 100k facts, writes RESULTS.md
    python benchmarks/bench_retrieval.py --drawers 5000 --facts 5000 --no-write     # quick look

The stores, all on this machine in one run, each loaded, measured and dropped in its own process, one after
the other (so none is measured beside another's data in the server's caches, or another's threads):

* ``postgres``: this package: drawers in pgvector, the graph in AGE, one statement per retrieval;
* ``chroma+sqlite``: MemPalace's default Chroma backend and its SQLite knowledge graph;
* ``pgvector+sqlite``: MemPalace's built-in ``pgvector`` backend (as shipped) and the SQLite graph.

The two-store versions do the work in Python the straightforward way: the graph walk as one SQLite
query per hop (``IN`` lists over MemPalace's subject/object indexes), the drawers by ``get(ids)`` and
numpy, the nearest drawers by the backend's ``query``, full text by its ``lexical_search``, fusion in
Python. Each answer is compared with ours (agreement of the top 10, reported).

Data: drawers as in bench_backends.py (384-d vectors in 50 clusters, MemPalace metadata, ~60 words);
facts between ENTITIES entities with endpoints drawn uniformly (a sparse graph: ~4 facts per entity at
100k facts / 50k entities), each drawn from a random drawer (source_drawer_id), ~8% closed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import common
import numpy as np

HERE = Path(__file__).resolve().parent

RRF_K = 60
DEPTH = 50  # candidates per ranking (hybrid), nearest drawers (entities)


# ----------------------------------------------------------------------------- data
def make_facts(n_facts: int, n_entities: int, drawer_ids: list[str], seed: int = 11):
    """bench_kg.py's triples over ``n_entities`` entities, each drawn from one of ``drawer_ids``."""
    from bench_kg import make_rows

    return make_rows(
        n_facts,
        seed,
        n_entities=n_entities,
        entity_type="thing",
        first_year=2015,
        years=11,
        drawer_ids=drawer_ids,
        adapter_name="bench",
    )


# ----------------------------------------------------------------------------- the two-store way
class TwoStores:
    """A vector backend of MemPalace plus MemPalace's SQLite knowledge graph, joined in Python."""

    def __init__(self, col, sqlite_conn):
        self.col = col
        self.db = sqlite_conn

    def _embeddings(self, ids):
        got = self.col.get(ids=list(ids), include=["embeddings", "documents", "metadatas"])
        return got.ids, np.asarray(got.embeddings, dtype=np.float32), got.documents

    def around(self, entity_id, q, hops, n=10):
        seen, frontier, drawers = {entity_id}, [entity_id], set()
        for _ in range(hops):
            marks = ",".join("?" * len(frontier))
            rows = self.db.execute(
                f"SELECT subject, object, source_drawer_id FROM triples WHERE subject IN ({marks}) "
                f"UNION ALL SELECT subject, object, source_drawer_id FROM triples WHERE object IN ({marks})",
                frontier + frontier,
            ).fetchall()
            nxt = []
            for s, o, drawer in rows:
                if drawer:
                    drawers.add(drawer)
                for x in (s, o):
                    if x not in seen:
                        seen.add(x)
                        nxt.append(x)
            frontier = nxt
            if not frontier:
                break
        if not drawers:
            return []
        ids, emb, _docs = self._embeddings(drawers)
        dist = 1.0 - emb @ q
        order = np.argsort(dist, kind="stable")[:n]
        return [ids[i] for i in order]

    def facts(self, entity_id, q):
        rows = self.db.execute(
            "SELECT s.name, t.predicate, o.name, t.valid_from, t.valid_to, t.source_drawer_id FROM triples t "
            "JOIN entities s ON s.id = t.subject JOIN entities o ON o.id = t.object WHERE t.subject = ? "
            "UNION ALL SELECT s.name, t.predicate, o.name, t.valid_from, t.valid_to, t.source_drawer_id "
            "FROM triples t "
            "JOIN entities s ON s.id = t.subject JOIN entities o ON o.id = t.object WHERE t.object = ?",
            (entity_id, entity_id),
        ).fetchall()
        drawer_ids = {r[5] for r in rows if r[5]}
        sims = {}
        if drawer_ids:
            ids, emb, docs = self._embeddings(drawer_ids)
            sims = dict(zip(ids, (1.0 - (1.0 - emb @ q)).tolist()))
        out = [(sims.get(r[5]), r) for r in rows]
        out.sort(key=lambda x: (x[0] is None, -(x[0] or 0)))
        return [r[5] for _, r in out]

    def entities(self, q, n=10, depth=DEPTH):
        res = self.col.query(query_embeddings=[q.tolist()], n_results=depth, include=["distances"])
        ids, dists = res.ids[0], res.distances[0]
        sim = {i: 1 - d for i, d in zip(ids, dists)}
        marks = ",".join("?" * len(ids))
        rows = self.db.execute(
            f"SELECT subject, object, source_drawer_id FROM triples WHERE source_drawer_id IN ({marks})", ids
        ).fetchall()
        score: dict = {}
        for s, o, drawer in rows:
            for e in {s, o}:
                best, drawers = score.get(e, (-9.0, set()))
                drawers.add(drawer)
                score[e] = (max(best, sim[drawer]), drawers)
        top = sorted(score.items(), key=lambda kv: (-kv[1][0], -len(kv[1][1]), kv[0]))[:n]
        names = (
            dict(
                self.db.execute(
                    f"SELECT id, name FROM entities WHERE id IN ({','.join('?' * len(top))})",
                    [e for e, _ in top],
                ).fetchall()
            )
            if top
            else {}
        )
        return [(e, names.get(e)) for e, _ in top]

    def hybrid(self, q, text, n=10, wing=None, depth=DEPTH):
        where = {"wing": wing} if wing else None
        vec = self.col.query(
            query_embeddings=[q.tolist()],
            n_results=depth,
            where=where,
            include=["documents", "metadatas", "distances"],
        )
        lex = self.col.lexical_search(query=text, n_results=depth, where=where).hits
        fused: dict = {}
        for rank, did in enumerate(vec.ids[0], 1):
            fused[did] = fused.get(did, 0.0) + 1.0 / (RRF_K + rank)
        for rank, hit in enumerate(lex, 1):
            fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
        return [d for d, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


# ----------------------------------------------------------------------------- timing
#: Calls made before timing, on inputs that are not timed: a statement's first executions on a connection
#: are planned (psycopg prepares it at its fifth use; PostgreSQL then tries custom plans before settling
#: on a generic one), and a long-running process (MemPalace's MCP server) is past that.
WARMUP = 20
#: Inputs timed per retrieval.
MEASURED = 60


def timed(fn, args_list, budget_s=25.0, min_reps=5, warmup_budget_s=5.0):
    """Warm up on the first WARMUP inputs (fewer if a call is slow: at least one, within warmup_budget_s),
    then time the rest; returns stats and the timed calls' results."""
    times, results = [], []
    start = time.perf_counter()
    for args in args_list[:WARMUP]:
        fn(*args)
        if time.perf_counter() - start > warmup_budget_s:
            break
    start = time.perf_counter()
    for i, args in enumerate(args_list[WARMUP:]):
        t0 = time.perf_counter()
        results.append(fn(*args))
        times.append((time.perf_counter() - t0) * 1000)
        if i + 1 >= min_reps and time.perf_counter() - start > budget_s:
            break
    return {
        "p50": float(np.percentile(times, 50)),
        "p95": float(np.percentile(times, 95)),
        "n": len(times),
    }, results


def agreement(ours, theirs):
    """Mean share of the other store's top ids that ours also returned (1.0 = same answers)."""
    scores = [len(set(a) & set(b)) / len(b) for a, b in zip(ours, theirs) if b]
    return float(np.mean(scores)) if scores else None


# ----------------------------------------------------------------------------- run
OPS = [
    "around entity, 1 hop",
    "around entity, 2 hops",
    "around entity, 3 hops",
    "facts with evidence",
    "entities for a query",
    "hybrid (RRF)",
    "hybrid (RRF), wing",
]


def run_store(args, store: str) -> dict:
    """Load one store (its drawers and its graph) and time every retrieval on it; runs in a child process.

    Returns the load times, the settle time, and per retrieval its timing and the ids it returned (the
    parent compares those with ``postgres``'s)."""
    import psycopg

    dsn = common.provisioned_dsn()
    n, n_facts = args.drawers, args.facts
    centers = common.cluster_centers()
    tag = f"ret_{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="mpbench_ret_"))
    os.environ["MEMPALACE_CONFIG_DIR"] = str(workdir / "config")
    vector_store = store.split("+")[0]
    out: dict = {"store": store, "load_s": {}, "ops": {}}
    backend, col = common.open_collection(vector_store, str(workdir / f"palace_{vector_store}"), dsn, tag)
    try:
        print(f"[bench_retrieval] loading {n} drawers into {store} ...", file=sys.stderr, flush=True)
        out["load_s"][store] = round(common.load_drawers(col, vector_store, n, centers), 1)
        drawer_ids = [common.drawer_id(i) for i in range(n)]
        entities, triples = make_facts(n_facts, args.entities, drawer_ids)
        from bench_kg import load_age, load_sqlite

        if store == "postgres":
            from mempalace_pg.config import Settings
            from mempalace_pg.graph.kg import AgeKnowledgeGraph
            from mempalace_pg.retrieval import PalaceSearch

            settings = Settings.load()
            kg = AgeKnowledgeGraph(palace_key=col.palace.id, settings=settings)
            t0 = time.perf_counter()
            load_age(kg, entities, triples)
            out["load_s"]["age graph"] = round(time.perf_counter() - t0, 1)
            settle_tables = [(kg.graph_name, "Entity"), (kg.graph_name, "Fact")]
            kg.close()
            ours = PalaceSearch(palace_key=col.palace.id, settings=settings)
        else:
            from mempalace_pg.graph.routing import sqlite_class

            sqlite_kg = sqlite_class()(str(workdir / "knowledge_graph.sqlite3"))
            t0 = time.perf_counter()
            load_sqlite(sqlite_kg, entities, triples)
            out["load_s"]["sqlite graph"] = round(time.perf_counter() - t0, 1)
            sqlite_conn = sqlite_kg._conn()
            sqlite_conn.execute("ANALYZE")
            settle_tables = [(None, col._table)] if vector_store.startswith("pgvector") else []
            two = TwoStores(col, sqlite_conn)
        # what autovacuum would do to the freshly filled tables within a minute: done before measuring
        out["settle_s"] = round(common.settle(dsn, settle_tables), 1) if settle_tables else 0.0

        # -- inputs: query vectors near the data, entities that have facts (the same in every child) ----
        rng = random.Random(5)
        queries = common.query_vectors(WARMUP + MEASURED, 4242, centers)
        with_facts = sorted({t["subject"] for t in triples})
        picks = [with_facts[rng.randrange(len(with_facts))] for _ in range(WARMUP + MEASURED)]
        names = {e["id"]: e["name"] for e in entities}
        texts = [" ".join(rng.sample(common.VOCAB[:4000], 1) + ["palace"]) for _ in range(WARMUP + MEASURED)]

        if store == "postgres":
            ways = {
                f"around entity, {h} hop{'s' if h > 1 else ''}": (
                    lambda e, q, h=h: [x["id"] for x in ours.around_entity(e, q.tolist(), hops=h)["hits"]],
                    [(names[picks[i]], queries[i]) for i in range(WARMUP + MEASURED)],
                )
                for h in (1, 2, 3)
            }
            ways["facts with evidence"] = (
                lambda e, q: [
                    f["source_drawer_id"] for f in ours.facts_with_evidence(e, q.tolist())["facts"]
                ],
                [(names[picks[i]], queries[i]) for i in range(WARMUP + MEASURED)],
            )
            ways["entities for a query"] = (
                lambda q: [e["entity_id"] for e in ours.entities_for_query(q.tolist(), drawers=DEPTH)],
                [(q,) for q in queries],
            )
            for wing, op in ((None, "hybrid (RRF)"), ("wing_3", "hybrid (RRF), wing")):
                ways[op] = (
                    lambda q, t, w=wing: [h["id"] for h in ours.hybrid(t, q.tolist(), wing=w)],
                    [(queries[i], texts[i]) for i in range(WARMUP + MEASURED)],
                )
        else:
            ways = {
                f"around entity, {h} hop{'s' if h > 1 else ''}": (
                    lambda e, q, h=h: two.around(e, q, h),
                    [(picks[i], queries[i]) for i in range(WARMUP + MEASURED)],
                )
                for h in (1, 2, 3)
            }
            ways["facts with evidence"] = (
                two.facts,
                [(picks[i], queries[i]) for i in range(WARMUP + MEASURED)],
            )
            ways["entities for a query"] = (
                lambda q: [e for e, _ in two.entities(q)],
                [(q,) for q in queries],
            )
            for wing, op in ((None, "hybrid (RRF)"), ("wing_3", "hybrid (RRF), wing")):
                ways[op] = (
                    lambda q, t, w=wing: two.hybrid(q, t, wing=w),
                    [(queries[i], texts[i]) for i in range(WARMUP + MEASURED)],
                )
        for op in OPS:
            fn, argl = ways[op]
            stats, results = timed(fn, argl)
            out["ops"][op] = {**stats, "ids": results}
            print(
                f"[bench_retrieval] {op:28s} {store:16s} p50 {stats['p50']:9.2f} ms  p95 "
                f"{stats['p95']:9.2f} ms",
                file=sys.stderr,
                flush=True,
            )
        if store == "postgres":
            sizes = [
                ours.around_entity(names[picks[i]], queries[i].tolist(), hops=h)["entities"]
                for h in (1, 2, 3)
                for i in range(10)
            ]
            out["neighbourhood_entities_mean"] = {
                h: float(np.mean(sizes[(h - 1) * 10 : h * 10])) for h in (1, 2, 3)
            }
            ours.close()
        else:
            sqlite_kg.close()
    finally:
        try:
            common.cleanup(vector_store, dsn, tag, col)
        finally:
            backend.close()
            if store == "postgres":
                with psycopg.connect(dsn, autocommit=True) as conn:
                    conn.execute(
                        "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
                        (f"bench_{tag}_kg",),
                    )
            shutil.rmtree(workdir, ignore_errors=True)
    return out


def run(args) -> dict:
    """Each store in its own process, one after the other: loaded, settled, measured, dropped. So no store
    is measured beside another's data in the server's caches or another's threads in its process."""
    if "postgres" not in args.stores:
        raise SystemExit("--stores must include postgres (the others are compared with it)")
    dsn = common.provisioned_dsn()
    children = {}
    for store in args.stores:
        kept = Path(args.children) / f"{store}.json" if args.children else None
        if kept is not None and kept.exists():
            # a store measured by an earlier invocation with the same sizes: at 1M, one store per run keeps
            # each run under 30 minutes, and the report still compares every store with postgres's answers
            children[store] = json.loads(kept.read_text())
            if children[store]["sizes"] != [args.drawers, args.facts, args.entities]:
                raise SystemExit(f"{kept} was measured at other sizes: {children[store]['sizes']}")
            continue
        try:
            children[store] = common.child_json(
                __file__,
                [store, "--drawers", args.drawers, "--facts", args.facts, "--entities", args.entities],
                dsn,
            )
        except common.ChildFailed as exc:
            raise SystemExit(f"the {store} child failed ({exc}); its log is above") from None
        children[store]["sizes"] = [args.drawers, args.facts, args.entities]
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(children[store]))
    pg = children["postgres"]
    out: dict = {
        "drawers": args.drawers,
        "facts": args.facts,
        "entities": args.entities,
        "load_s": {},
        "settle_s": {},
        "warmup": WARMUP,
        "ops": {op: {} for op in OPS},
        "neighbourhood_entities_mean": pg["neighbourhood_entities_mean"],
    }
    for store, child in children.items():
        out["load_s"].update(child["load_s"])
        out["settle_s"][store] = child["settle_s"]
        for op in OPS:
            got = dict(child["ops"][op])
            ids = got.pop("ids")
            got["agreement"] = None if store == "postgres" else agreement(pg["ops"][op]["ids"], ids)
            out["ops"][op][store] = got
    return out


def _settle_text(r: dict) -> str:
    """The report's sentence on VACUUM (ANALYZE) before measuring (older reports kept one total)."""
    if "settle_s" not in r:
        return ""
    settle = r["settle_s"]
    took = ", ".join(f"{k} {x} s" for k, x in settle.items()) if isinstance(settle, dict) else f"{settle} s"
    return (
        f" Then the AGE label tables and the built-in pgvector table were VACUUM (ANALYZE)d before measuring "
        f"({took}), as autovacuum would do anyway."
    )


def render(report: dict) -> str:
    r = report["result"]
    v = report["versions"]
    lines = [
        f"## Graph + vector retrieval at {r['drawers']:,} drawers and {r['facts']:,} facts — "
        f"{report['date']}",
        "",
        f"PostgreSQL {v['postgresql']}, pgvector {v['pgvector']}, AGE {v['age']}, MemPalace "
        f"{v['mempalace']}, "
        f"chromadb {v['chromadb']}, Python {v['python']}, {v['cpus']} CPUs. Command: `{report['command']}`.",
        f"Facts between {r['entities']:,} entities (endpoints uniform; mean entities reached from a picked "
        "entity: "
        + ", ".join(
            f"{h} hop{'s' if int(h) > 1 else ''} {x:.0f}" for h, x in r["neighbourhood_entities_mean"].items()
        )
        + "), each drawn from a random drawer. Load times (s): "
        + ", ".join(f"{k} {x}" for k, x in r["load_s"].items())
        + "."
        + _settle_text(r),
        "",
        (
            "Each store was loaded, measured and dropped in its own process, one after the other, so none "
            "was "
            "measured beside another's data or threads. "
            if isinstance(r.get("settle_s"), dict)
            else "The pgvector+sqlite way is measured after all the others (its exact scans of whole tables "
            "evict the caches the next measurement would read). "
        )
        + (
            f"Each retrieval was first called on up to {r['warmup']} inputs that are not timed (a "
            "long-running process "
            "is past its statements' first planned executions; fewer for a way whose calls take seconds), "
            "then "
            "timed on the next ones. "
            if r.get("warmup")
            else "Each retrieval was called once before timing. "
        )
        + "Latencies in ms, p50 / p95. Ratio: p50 of the faster two-store way over p50 of `postgres` "
        "(target ≥ 5x). Agreement: share of that store's top ids that `postgres` also returned.",
        "",
        "| retrieval | postgres | chroma+sqlite | pgvector+sqlite | ratio | agreement (chroma / pgvector) |",
        "|---|---|---|---|---|---|",
    ]
    for op, impls in r["ops"].items():
        pg = impls["postgres"]
        others = {k: x for k, x in impls.items() if k != "postgres"}
        best = min(x["p50"] for x in others.values()) if others else None

        def cell(x):
            return f"{x['p50']:.2f} / {x['p95']:.2f}" if x else "—"

        agree = " / ".join(
            "—" if x.get("agreement") is None else f"{x['agreement']:.2f}" for x in others.values()
        )
        ratio = "—" if best is None else f"{best / pg['p50']:.1f}x"
        lines.append(
            f"| {op} | {cell(pg)} | {cell(impls.get('chroma+sqlite'))} | "
            f"{cell(impls.get('pgvector+sqlite'))} | "
            f"{ratio} | {agree} |"
        )
    ops = r["ops"]
    one, three = (
        ops["around entity, 1 hop"]["postgres"]["p50"],
        ops["around entity, 3 hops"]["postgres"]["p50"],
    )
    lines += [
        "",
        f"Search around an entity, 3 hops over 1 hop (postgres p50): {three / one:.2f}x (target ≤ 2.5x).",
        "",
    ]
    return "\n".join(lines)


def report_options(ap: argparse.ArgumentParser, name: str) -> None:
    """The options of every benchmark that ends with save_and_report: where its report and JSON go."""
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--json", default=str(HERE / "out" / f"{name}.json"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--from-json")
    ap.set_defaults(benchmark=name)  # its section of RESULTS.md


def report_head(dsn: str, name: str) -> dict:
    """What every report starts with: when, on which versions, by which command."""
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": common.versions(dsn),
        "command": f"python benchmarks/{name}.py " + " ".join(sys.argv[1:]),
    }


def save_and_report(args, make_report, render_report) -> int:
    """The end of every benchmark here: take the report (``--from-json``, or run it and keep its JSON),
    render it, put it at the top of RESULTS.md unless ``--no-write``, print it."""
    if args.from_json:
        report = json.loads(Path(args.from_json).read_text())
    else:
        report = make_report()
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1))
    text = render_report(report)
    if not args.no_write:
        common.record_report(Path(args.out), args.benchmark, text)
    print(text)
    return 0


def run_benchmark(ap: argparse.ArgumentParser, name: str, run_child, run_all, render_report) -> int:
    """The main() of a benchmark whose stores each run in a child process (``--stores a,b``): with
    ``--child STORE``, ``run_child(args)`` measures that store and its JSON is printed for the parent;
    otherwise ``run_all(args)`` runs the children and the report is saved (see save_and_report)."""
    ap.add_argument("--child", help=argparse.SUPPRESS)
    report_options(ap, name)
    args = ap.parse_args()
    args.stores = args.stores.split(",")
    if args.child:
        print(json.dumps(run_child(args)))
        return 0
    return save_and_report(
        args, lambda: {**report_head(common.provisioned_dsn(), name), "result": run_all(args)}, render_report
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drawers", type=int, default=100_000)
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--entities", type=int, default=50_000)
    ap.add_argument("--stores", default="postgres,chroma+sqlite,pgvector+sqlite")
    ap.add_argument(
        "--children",
        help="a directory keeping each store's measurements (<store>.json): a store found there is not "
        "measured again, so the stores of a large run can be measured by separate invocations",
    )
    return run_benchmark(ap, "bench_retrieval", lambda args: run_store(args, args.child), run, render)


if __name__ == "__main__":
    raise SystemExit(main())
