"""Benchmark: searching a vector index made of several segments (search breadth, candidates, merges).

    python benchmarks/bench_segments.py                        # 100k drawers, writes RESULTS.md
    python benchmarks/bench_segments.py --n 20000 --no-write --json /tmp/seg.json

What the folder's choices rest on (mempalace_pg/engine/indexing.py): a palace written through ``upsert`` is
searched, until the folder has merged everything, over several HNSW segments at once. Here one palace of
``--n`` drawers (bench_backends' 384-d vectors in 50 clusters, written through MemPalace's backend API with
no folder running) is given, in turn, the segment layouts a 100k ingest leaves behind (one segment; 74% +
26%; 34/30/22/14%), each built in one go. For each layout, k=10 queries unfiltered and in a wing, each
in a fresh process:

* at fixed search breadths (``hnsw.ef_search`` 40, 60, 100, 150 for every segment), and
* as the backend runs them (``policy``: the breadth of indexing.search_breadth and the per-segment
  candidates of collection.nearest_sql),

with p50/p95 ms and recall@10 against exact cosine ground truth. Then, on the four-segment layout, the same
policy queries while a merge of every row is built (``CREATE INDEX CONCURRENTLY``, as a folder builds) with
0 and with 1 parallel worker, against the same queries for IDLE_S with nothing building (the same ten
queries over and over, p50/p95 of their medians).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import bench_real_path as rp
import common
import numpy as np

HERE = Path(__file__).resolve().parent

LAYOUTS = {"one": (1.0,), "two": (0.74, 0.26), "four": (0.34, 0.30, 0.22, 0.14)}
BREADTHS = (40, 60, 100, 150)
QUERIES = 60
FILTERS = {"unfiltered": None, "wing": {"wing": "wing_3"}}
#: Seconds of the no-merge baseline beside the merge runs.
IDLE_S = 20.0


# ----------------------------------------------------------------------------- children
def child_load(n: int, dsn: str, workdir: str, tag: str) -> dict:
    os.environ["MEMPALACE_CONFIG_DIR"] = str(Path(workdir) / "config")
    os.environ["MEMPALACE_PG_FOLDER"] = "off"  # the layouts are built by this benchmark
    centers = common.cluster_centers()
    backend, col = common.open_collection("postgres", str(Path(workdir) / "palace"), dsn, tag)
    t0 = time.perf_counter()
    for ids, docs, metas, vecs in rp.batches(n, 1000, centers):
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    seconds = time.perf_counter() - t0
    pk = col.partition.pk
    backend.close()
    return {"seconds": seconds, "pk": pk}


def child_layout(dsn: str, tag: str, pk: int, shares: str) -> dict:
    """Replace the collection's segments with ones over the given shares of its rows (in write order)."""
    import psycopg
    from psycopg import sql

    from mempalace_pg.engine import builds, indexing

    schema = f"bench_{tag}"
    table = sql.Identifier(schema, f"records_c{pk}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(schema)))
        builds.build_session(conn)
        n, top = conn.execute(sql.SQL("SELECT count(*), max(vector_seq) FROM {}").format(table)).fetchone()
        old = [
            r[0]
            for r in conn.execute(
                sql.SQL("SELECT index_name FROM {} WHERE collection_pk = %s").format(
                    sql.Identifier(schema, "vector_segments")
                ),
                (pk,),
            )
        ]
        bounds, lo, done = [], -1, 0
        for share in [float(s) for s in shares.split(",")]:
            done += round(share * n)
            hi = (
                top
                if done >= n
                else conn.execute(
                    sql.SQL("SELECT vector_seq FROM {} ORDER BY vector_seq OFFSET %s LIMIT 1").format(table),
                    (done - 1,),
                ).fetchone()[0]
            )
            bounds.append((lo, hi))
            lo = hi
        build_times = []
        for i, (lo, hi) in enumerate(bounds):
            name = indexing.segment_name(pk, hi)
            t0 = time.perf_counter()
            conn.execute(indexing.segment_ddl(name, table, 384, lo, hi, concurrently=False))
            build_times.append(time.perf_counter() - t0)
            builds.register(
                conn,
                schema,
                pk,
                index=name,
                lo=lo,
                hi=hi,
                seconds=build_times[-1],
                replaced=old if i == 0 else [],
            )
        for name in old:
            builds.drop_index(conn, schema, name, concurrently=False)
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
        rows = [
            r[0]
            for r in conn.execute(
                sql.SQL("SELECT rows FROM {} WHERE collection_pk = %s ORDER BY lo").format(
                    sql.Identifier(schema, "vector_segments")
                ),
                (pk,),
            )
        ]
    return {"rows": rows, "build_seconds": build_times}


def measure(col, queries, truth, label, where) -> dict:
    times, recalls = [], []
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        got = col.query(query_embeddings=[q.tolist()], n_results=10, where=where).ids[0]
        times.append((time.perf_counter() - t0) * 1000)
        recalls.append(len(set(got) & set(truth[label][i])) / 10)
    return {**common.summary(times), "recall_at_10": float(np.mean(recalls))}


def child_query(dsn: str, workdir: str, tag: str, truth_file: str, breadth: str, merge_workers: str) -> dict:
    """Query the palace; ``breadth`` 'policy' or a fixed hnsw.ef_search; ``merge_workers`` '-' (no build)
    or the parallel workers of a merge built meanwhile."""
    os.environ["MEMPALACE_CONFIG_DIR"] = str(Path(workdir) / "config")
    os.environ["MEMPALACE_PG_FOLDER"] = "off"
    from mempalace_pg.engine import indexing

    if breadth != "policy":
        # every segment walked at exactly this breadth: the configured one, and no narrower
        os.environ["MEMPALACE_PG_EF_SEARCH"] = breadth
        indexing.MIN_SEARCH_BREADTH = int(breadth)
    truth = json.loads(Path(truth_file).read_text())
    backend, col = common.open_collection("postgres", str(Path(workdir) / "palace"), dsn, tag)
    queries = common.query_vectors(QUERIES, 777, common.cluster_centers())
    current = col.partition.index.layout(fresh=True, start_folder=True)
    out = {
        "segments": len(current.segments),
        "breadth": indexing.search_breadth(current, col.partition.db.settings.ef_search),
        "query": {},
    }
    if merge_workers == "-":
        for label, where in FILTERS.items():
            out["query"][label] = measure(col, queries, truth, label, where)
    elif merge_workers == "idle":  # the baseline of the merge runs, measured their way
        stop = time.perf_counter() + IDLE_S
        out["query"]["unfiltered"] = ten_query_medians(
            col, queries, truth, lambda: time.perf_counter() < stop
        )
    else:
        import psycopg
        from psycopg import sql

        from mempalace_pg.engine import builds

        schema, done = f"bench_{tag}", []

        def build():
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("SET search_path = {}, public").format(sql.Identifier(schema)))
                builds.build_session(conn, int(merge_workers))
                t0 = time.perf_counter()
                conn.execute(
                    indexing.segment_ddl(
                        "bench_merge",
                        sql.Identifier(schema, f"records_c{col.partition.pk}"),
                        384,
                        -1,
                        current.newest,
                        concurrently=True,
                    )
                )
                done.append(time.perf_counter() - t0)
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, "bench_merge")))

        thread = threading.Thread(target=build)
        thread.start()
        time.sleep(2.0)  # past the build's start
        out["query"]["unfiltered"] = ten_query_medians(col, queries, truth, lambda: not done)
        thread.join()
        out["merge_seconds"] = done[0]
    backend.close()
    return out


def ten_query_medians(col, queries, truth, going) -> dict:
    """The first ten queries, unfiltered, over and over while ``going()``: p50/p95 of each round's median."""
    first = {label: rows[:10] for label, rows in truth.items()}
    times = []
    while going():
        times.append(measure(col, queries[:10], first, "unfiltered", None)["p50"])
    if not times:
        raise SystemExit("the merge ended before the first round of queries: use a larger --n")
    return {
        "p50": float(np.median(times)),
        "p95": float(np.percentile(times, 95)),
        "n": len(times) * 10,
        "note": "p50/p95 of per-10-query medians",
    }


# ----------------------------------------------------------------------------- parent
def render(result: dict, meta: dict) -> str:
    n = result["n"]
    lines = [
        f"## Search breadth over segments, {n:,} drawers — {meta['date']}",
        "",
        f"Machine: {meta['machine']}. Command: `{meta['command']}`. The palace was written through "
        f"`upsert` (batches of 1,000, no folder: {result['load_seconds']:.1f} s), then given each layout "
        "below, built in one go. k=10, 60 queries, each configuration in a fresh process; p50 / p95 ms "
        "(recall@10 against exact). `policy` is what the backend runs: the breadth of "
        "`indexing.search_breadth` (shown in brackets) and per-segment candidates scaled by the largest "
        "segment's share.",
        "",
        "| layout (rows per segment) | breadth | unfiltered | wing |",
        "|---|---|---|---|",
    ]
    for name, layout in result["layouts"].items():
        rows = "/".join(f"{r // 1000}k" for r in layout["rows"])
        for breadth, probe in layout["queries"].items():
            cells = [
                f"{q['p50']:.2f} / {q['p95']:.2f} ({q['recall_at_10']:.3f})"
                for q in (probe["query"]["unfiltered"], probe["query"]["wing"])
            ]
            shown = f"policy ({probe['breadth']})" if breadth == "policy" else breadth
            lines.append(f"| {name}: {rows} | {shown} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        "While a merge of every row is built beside the queries (four segments, policy breadth; "
        "p50 / p95 of per-10-query medians, unfiltered):",
        "",
        "| merge built with | merge, s | unfiltered p50 / p95 ms |",
        "|---|---|---|",
    ]
    for workers, probe in result["contention"].items():
        q = probe["query"]["unfiltered"]
        if workers == "idle":
            lines.append(f"| nothing building | — | {q['p50']:.2f} / {q['p95']:.2f} |")
            continue
        lines.append(
            f"| {workers} parallel worker{'s' if workers != '1' else ''} | {probe['merge_seconds']:.1f} | "
            f"{q['p50']:.2f} / {q['p95']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--json", type=Path, default=HERE / "out" / "segments.json")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument("--child", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.child:
        kind, *rest = args.child
        fn = {
            "load": lambda n, dsn, w, t: child_load(int(n), dsn, w, t),
            "layout": child_layout,
            "query": child_query,
        }[kind]
        if kind == "layout":
            rest[2] = int(rest[2])
        print(json.dumps(fn(*rest)))
        return 0
    dsn = common.provisioned_dsn()
    script = str(Path(__file__).resolve())
    tag = f"seg_{uuid.uuid4().hex[:6]}"
    workdir = tempfile.mkdtemp(prefix="mpbench_seg_")
    truth_file = str(Path(workdir) / "truth.json")
    Path(truth_file).write_text(json.dumps(rp.truths(args.n)))
    result: dict = {"n": args.n, "layouts": {}, "contention": {}}
    try:
        load = common.child_json(script, ["load", args.n, dsn, workdir, tag], dsn)
        result["load_seconds"] = load["seconds"]
        for name, shares in LAYOUTS.items():
            built = common.child_json(
                script, ["layout", dsn, tag, load["pk"], ",".join(map(str, shares))], dsn
            )
            entry = {**built, "queries": {}}
            for breadth in [*map(str, BREADTHS), "policy"]:
                entry["queries"][breadth] = common.child_json(
                    script, ["query", dsn, workdir, tag, truth_file, breadth, "-"], dsn
                )
                print(
                    name, breadth, json.dumps(entry["queries"][breadth]["query"]), file=sys.stderr, flush=True
                )
            result["layouts"][name] = entry
        common.child_json(script, ["layout", dsn, tag, load["pk"], ",".join(map(str, LAYOUTS["four"]))], dsn)
        for workers in ("idle", "0", "1"):
            result["contention"][workers] = common.child_json(
                script, ["query", dsn, workdir, tag, truth_file, "policy", workers], dsn
            )
            print("merge", workers, json.dumps(result["contention"][workers]), file=sys.stderr, flush=True)
    finally:
        common.cleanup("postgres", dsn, tag, None)
        shutil.rmtree(workdir, ignore_errors=True)
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": ", ".join(f"{k} {v}" for k, v in common.versions(dsn).items()),
        "command": "python benchmarks/bench_segments.py" + (f" --n {args.n}" if args.n != 100_000 else ""),
    }
    result["meta"] = meta
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1))
    report = render(result, meta)
    print(report)
    if not args.no_write:
        common.record_report(HERE / "RESULTS.md", "bench_segments", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
