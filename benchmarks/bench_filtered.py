"""Benchmark: filtered search on palaces shaped like real ones, as they grow (issue 26, item 2).

    python benchmarks/bench_filtered.py --sizes 100000,300000            # writes RESULTS.md
    python benchmarks/bench_filtered.py --sizes 20000 --stores postgres --no-write

For each size and store, in one run:

1. a *writer* process upserts the drawers of :class:`skewed_palace.SkewedPalace` (one wing with half the
   drawers, rooms of 50 beside rooms of thousands, files of ~7 chunks) in batches of 1,000, as
   ``mempalace mine`` and ``migrate`` write, through MemPalace's backend API, and exits;
2. for ``postgres``, the run waits until the folder has nothing left to do (writes over, segments
   merged, the process gone): the quiet palace a user searches the next day;
3. a *search* process opens the palace anew and runs k=10 queries that come from drawers, unfiltered,
   filtered to the wing of their nearest drawer and to its wing and room (p50/p95 ms, recall@10 against
   exact cosine ground truth, rows returned). ``postgres`` is searched twice: as shipped (statements
   prepared, one reusable plan each), and with every statement planned on each call with its values
   (``per_call``), the alternative design, to show what that planning costs and buys.

Stores: ``postgres`` (this package) and ``chroma`` (MemPalace's default).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import common
import numpy as np
from skewed_palace import SkewedPalace

QUERIES = 80
BATCH = 1000
FILTERS = ("unfiltered", "wing", "wing_room")


# ----------------------------------------------------------------------------- children
def child_write(store: str, n: int, dsn: str, workdir: str, tag: str) -> dict:
    palace = SkewedPalace(n)
    backend, col = common.open_collection(store, str(Path(workdir) / "palace"), dsn, tag)
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        ids, docs, metas, vecs = palace.batch(start, BATCH)
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    seconds = time.perf_counter() - t0
    backend.close()
    return {"seconds": seconds, "rows_per_s": n / seconds}


def per_call_plans() -> None:
    """Plan every statement of this process on each call, with its values (never prepared): the
    alternative to the reusable plans the plugin makes."""
    from mempalace_pg.db import sqlkit

    def execute(self, conn, values=None):
        if not isinstance(self.statement, bytes):
            self.statement = self.statement.as_bytes(conn)
        sqlkit.use_search_breadth(conn, self.breadth)
        return conn.execute(self.statement, {**self.params, **(values or {})}, prepare=False)

    sqlkit.Kept.execute = execute


def child_search(
    store: str, n: int, dsn: str, workdir: str, tag: str, queries_file: str, variant: str
) -> dict:
    if variant == "per_call":
        per_call_plans()
    queries = json.loads(Path(queries_file).read_text())
    backend, col = common.open_collection(store, str(Path(workdir) / "palace"), dsn, tag)
    out: dict = {"variant": variant, "query": {}}
    if store == "postgres":
        layout = col.partition.index.layout(fresh=True, start_folder=True)
        out["segments"] = len(layout.segments)
    for label in FILTERS:
        times, recalls, returned = [], [], []
        for q in queries:
            where, truth, _ = q["filters"][label]
            t0 = time.perf_counter()
            got = col.query(query_embeddings=[q["vector"]], n_results=10, where=where).ids[0]
            times.append((time.perf_counter() - t0) * 1000)
            recalls.append(len(set(got) & set(truth)) / 10)
            returned.append(len(got))
        out["query"][label] = {
            **common.summary(times),
            "recall_at_10": float(np.mean(recalls)),
            "rows_returned": float(np.mean(returned)),
            "matching_p50": statistics.median(q["filters"][label][2] for q in queries),
        }
    backend.close()
    return out


# ----------------------------------------------------------------------------- parent
def wait_quiet(dsn: str, tag: str, timeout: float = 3 * 3600) -> float:
    """Seconds until the palace's folder has exited with nothing waiting (one pass of its loop)."""
    import psycopg

    schema = f"bench_{tag}"
    t0 = time.time()
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.time() - t0 < timeout:
            running = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (f"mempalace-pg folder {schema}",),
            ).fetchone()[0]
            if not running:
                return time.time() - t0
            time.sleep(2)
    raise TimeoutError(f"the folder of {schema} still runs after {timeout} s")


def index_state(dsn: str, tag: str) -> dict:
    import psycopg

    schema = f"bench_{tag}"
    with psycopg.connect(dsn) as conn:
        segments, rows = conn.execute(
            f"SELECT count(*), COALESCE(sum(rows), 0) FROM {schema}.vector_segments"
        ).fetchone()
        size = conn.execute(
            "SELECT COALESCE(sum(pg_relation_size(to_regclass(quote_ident(%s) || '.' || "
            f"quote_ident(index_name)))), 0) FROM {schema}.vector_segments",
            (schema,),
        ).fetchone()[0]
    return {"segments": segments, "rows_in_segments": int(rows), "index_mb": float(size) / 1e6}


def run_case(store: str, n: int, dsn: str, queries_file: str) -> dict:
    tag = f"flt_{store}_{uuid.uuid4().hex[:6]}"
    workdir = tempfile.mkdtemp(prefix="mpbench_flt_")
    script = str(Path(__file__).resolve())
    case: dict = {"store": store, "n": n}
    try:
        case["write"] = common.child_json(script, ["write", store, n, dsn, workdir, tag], dsn)
        print(f"  {store} n={n}: written at {case['write']['rows_per_s']:.0f} rows/s", flush=True)
        if store == "postgres":
            case["settle_s"] = wait_quiet(dsn, tag)
            case["index"] = index_state(dsn, tag)
            print(f"  {store} n={n}: quiet after {case['settle_s']:.0f} s, {case['index']}", flush=True)
        variants = ("as_shipped", "per_call") if store == "postgres" else ("as_shipped",)
        case["searches"] = []
        for variant in variants:
            got = common.child_json(
                script, ["search", store, n, dsn, workdir, tag, queries_file, variant], dsn
            )
            case["searches"].append(got)
            print(
                f"  {store} n={n} {variant}: "
                + ", ".join(
                    f"{k} {v['p50']:.1f}/{v['p95']:.1f} ms r{v['recall_at_10']:.3f}"
                    for k, v in got["query"].items()
                ),
                flush=True,
            )
    finally:
        common.cleanup(store, dsn, tag, None)
        shutil.rmtree(workdir, ignore_errors=True)
    return case


def truth_file(n: int, directory: str, count: int = QUERIES) -> str:
    """A JSON file of ``count`` queries on the palace of ``n`` drawers, each with its exact top 10 under
    each filter; its path."""
    palace = SkewedPalace(n)
    matrix = palace.all_vectors()
    queries = palace.queries(count, matrix)
    path = Path(directory) / f"queries_{n}.json"
    path.write_text(
        json.dumps(
            [
                {"vector": q["vector"].tolist(), "filters": {k: list(v) for k, v in q["filters"].items()}}
                for q in queries
            ]
        )
    )
    return str(path)


def render(cases: list[dict], meta: dict) -> str:
    lines = [
        "## Filtered search at scale",
        "",
        f"`python benchmarks/bench_filtered.py --sizes {meta['sizes']}` ({meta['when']}, {meta['machine']}, "
        f"{meta['versions']}). A palace of skewed wings and rooms (`benchmarks/skewed_palace.py`: one wing "
        "holds half the drawers, rooms of 50 beside rooms of thousands, files of ~7 chunks) upserted in "
        "batches of 1,000 by a process that exits; postgres searched once its folder had finished (writes "
        "over, segments merged), from a new process. Queries come from drawers, filtered to the wing, or "
        "wing and room, of their nearest drawer; k=10, p50 / p95 ms, recall@10 against exact cosine. "
        "`per_call`: postgres with every statement planned on each call with its values instead of "
        "prepared once (the alternative design).",
        "",
        "| palace | store | segments | unfiltered | wing | wing + room | written |",
        "|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        for s in case["searches"]:
            figures = [s["query"][f] for f in FILTERS]
            cells = [f"{q['p50']:.1f} / {q['p95']:.1f} ({q['recall_at_10']:.3f})" for q in figures]
            name = case["store"] if s["variant"] == "as_shipped" else f"{case['store']} ({s['variant']})"
            segs = str(case.get("index", {}).get("segments", "-"))
            lines.append(
                f"| {case['n']:,} | {name} | {segs} | "
                + " | ".join(cells)
                + f" | {case['write']['rows_per_s']:.0f} rows/s |"
            )
    lines += [
        "",
        "Matching records per query (median): "
        + "; ".join(
            f"{c['n']:,}: wing {c['searches'][0]['query']['wing']['matching_p50']:,.0f}, wing + room "
            f"{c['searches'][0]['query']['wing_room']['matching_p50']:,.0f}"
            for c in cases
            if c["store"] == "postgres"
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        role, store, n, dsn, workdir, tag, *rest = sys.argv[2:]
        if role == "write":
            print(json.dumps(child_write(store, int(n), dsn, workdir, tag)))
        else:
            print(json.dumps(child_search(store, int(n), dsn, workdir, tag, rest[0], rest[1])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--stores", default="postgres,chroma")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = tempfile.mkdtemp(prefix="mpbench_flt_q_")
    cases = []
    try:
        for n in sizes:
            queries = truth_file(n, tmp)
            for store in args.stores.split(","):
                cases.append(run_case(store, n, dsn, queries))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = common.run_meta(dsn, sizes=args.sizes)
    common.save_run("filtered", meta, {"cases": cases}, render(cases, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
