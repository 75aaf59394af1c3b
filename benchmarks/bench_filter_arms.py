"""Benchmark: a filtered search right after a big write, answered each way the plugin can answer it.

    python benchmarks/bench_filter_arms.py --n 1000000

The palace of ``skewed_palace.py`` (one wing holds half the drawers, rooms of 50 beside rooms of
thousands) upserted in batches of 1,000 by a process that exits (bench_scale's writer, its folder
building as it goes), then the folder stopped at once: the vector index stays as the writer left it,
the young segments and the tail of the first seconds after a big write, for as long as the
measurements take. Then, from a new process each (folders off), bench_scale's queries (k=10, near
drawers, filtered to the wing, or the wing and room, of their nearest drawer) with a wing/room filter
answered:

- ``walks``: by walking every segment's HNSW graph (pgvector's iterative scan) and the tail through its
  sign bits: what the plugin did before it kept every row's sign bits, for every filter matching more
  than 3,000 drawers (each query here does);
- ``exact``: by scanning the filter's rows, each one's distance from its stored vector;
- ``own_rows``: by ranking the filter's rows by the Hamming distance of their sign bits
  (``vector_bits``), then the best few hundred by the exact distance;
- ``shipped``: as the plugin chooses, own rows when the filter matches at most OWN_ROWS_PER_SEGMENT
  drawers for each segment, else walks.

Reported: p50 / p95 ms and recall@10 against exact cosine per filter, and for each size of filter the
median and slowest query of each way. The palace is dropped at the end.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import bench_filtered as bf
import bench_scale
import common
import numpy as np

HERE = Path(__file__).resolve().parent
NAME = "bench_filter_arms"
WAYS = ("walks", "exact", "own_rows", "shipped")
LABELS = ("wing", "wing_room")
#: the filters' sizes the per-size table groups queries by (drawers matching, upper bounds)
SIZES = (20_000, 70_000, 150_000, None)


def use_way(way: str, own_rows: int) -> None:
    """Make this process answer wing/room filters ``way`` (``own_rows``: shipped's matches a segment
    answered from the filter's own rows)."""
    from mempalace_pg.engine import nearest

    if way == "shipped":
        nearest.OWN_ROWS_PER_SEGMENT = own_rows
    elif way == "walks":
        nearest.OWN_ROWS_PER_SEGMENT = 0
    elif way == "own_rows":
        nearest.OWN_ROWS_PER_SEGMENT = 10**9
    elif way == "exact":
        # a gate without the filter's equalities takes the exact scan up to EXACT_SCAN_MAX
        plain = nearest.wing_room_gate
        nearest.wing_room_gate = lambda index, keys: (
            None if not keys else dataclasses.replace(plain(index, keys), keys=None)
        )
        nearest.EXACT_SCAN_MAX = 10**9


def child_measure(way: str, dsn: str, workdir: str, tag: str, queries_file: str, own_rows: str) -> dict:
    os.environ["MEMPALACE_PG_FOLDER"] = "off"  # the layout stays as the writer left it
    use_way(way, int(own_rows))
    queries = json.loads(Path(queries_file).read_text())
    backend, col = common.open_collection("postgres", str(Path(workdir) / "palace"), dsn, tag)
    layout = col.partition.index.layout(fresh=True, start_folder=False)
    out = {"way": way, "segments": len(layout.segments), "waiting": col.partition.index.fresh_count()}
    for label in LABELS:
        rows = []
        for q in queries:
            where, truth, matching = q["filters"][label]
            t0 = time.perf_counter()
            got = col.query(query_embeddings=[q["vector"]], n_results=10, where=where).ids[0]
            rows.append(((time.perf_counter() - t0) * 1000, len(set(got) & set(truth)) / 10, matching))
        out[label] = rows
    backend.close()
    return out


def stop_folder_process(dsn: str, tag: str) -> None:
    """End the palace's folder and keep it ended: its backends terminated (its process exits with them);
    the measuring processes start none."""
    bench_scale.stop_folder(dsn, tag)
    while not bench_scale.folder_done(dsn, tag):
        bench_scale.stop_folder(dsn, tag)


def relation_sizes(dsn: str, tag: str) -> dict:
    """The MB the sign bits take (vector_bits and its indexes) beside the records' table and indexes."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_relation_size(b), pg_indexes_size(b), pg_table_size(r), pg_indexes_size(r) "
            "FROM (SELECT to_regclass(quote_ident(%(s)s) || '.vector_bits') AS b, "
            "to_regclass(quote_ident(%(s)s) || '.records_c1') AS r) AS t",
            {"s": f"bench_{tag}"},
        ).fetchone()
    names = ("vector_bits", "vector_bits_indexes", "records", "records_indexes")
    return {k: v / 2**20 for k, v in zip(names, row)}


def summarize(rows: list) -> dict:
    ms = [r[0] for r in rows]
    return {**common.summary(ms), "recall_at_10": float(np.mean([r[1] for r in rows]))}


def render(results: dict, meta: dict) -> str:
    m = results["measured"]
    lines = [
        f"## A filtered search right after a big write, each way — {meta['when']}",
        "",
        f"`python benchmarks/bench_filter_arms.py {meta['argv']}` ({meta['when']}, {meta['machine']}, "
        f"{meta['versions']}, shared_buffers {meta['shared_buffers']}). The palace of "
        "`benchmarks/skewed_palace.py` upserted in batches of 1,000 by a process that exits "
        f"({results['write']['rows_per_s']:,.0f} drawers/s), its folder stopped at once: the layout the "
        f"writer left ({m['walks']['segments']} segments, {m['walks']['waiting']:,} rows in the tail), "
        "kept for the measurements. bench_scale's queries (k=10; filtered to the wing, or wing and room, of "
        "their nearest drawer), p50 / p95 ms (recall@10 against exact cosine), from a new process each. "
        "*walks*: every segment's HNSW graph walked, as every filter here was before the plugin kept every "
        "row's sign bits; *exact*: the filter's rows scanned; *own rows*: the filter's rows ranked by their "
        "sign bits (`vector_bits`), the best re-ranked exactly; *shipped*: own rows up to "
        f"{meta['own_rows_per_segment']:,} matches a segment, else walks.",
        "",
        "| way | wing | wing + room |",
        "|---|---|---|",
    ]
    for way in WAYS:
        cells = []
        for label in LABELS:
            s = summarize(m[way][label])
            cells.append(f"{s['p50']:.1f} / {s['p95']:.1f} ({s['recall_at_10']:.3f})")
        lines.append(f"| {way.replace('_', ' ')} | {' | '.join(cells)} |")
    lines += [
        "",
        "By the filter's size (both filters' queries): median / slowest ms of each way.",
        "",
        "| drawers matching | queries | " + " | ".join(w.replace("_", " ") for w in WAYS) + " |",
        "|---|---|" + "---|" * len(WAYS),
    ]
    low = 0
    for high in SIZES:
        cells, count = [], 0
        for way in WAYS:
            rows = [
                r for label in LABELS for r in m[way][label] if r[2] > low and (high is None or r[2] <= high)
            ]
            count = len(rows)
            ms = [r[0] for r in rows]
            cells.append(f"{np.median(ms):.1f} / {max(ms):.1f}" if ms else "-")
        span = f"{low:,}-{high:,}" if high else f"over {low:,}"
        if count:
            lines.append(f"| {span} | {count} | {' | '.join(cells)} |")
        low = high or low
    sizes = results["sizes_mb"]
    lines += [
        "",
        f"The sign bits of the {meta['n']:,} drawers: `vector_bits` {sizes['vector_bits']:,.0f} MB and "
        f"its indexes {sizes['vector_bits_indexes']:,.0f} MB, beside the records' table "
        f"{sizes['records']:,.0f} MB and indexes {sizes['records_indexes']:,.0f} MB "
        "(the vector index segments among them).",
        "",
        f"Data: `benchmarks/out/{results['data']}`.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child_measure(*sys.argv[2:])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument(
        "--own-rows", type=int, default=None, help="shipped's own rows a segment (default: the plugin's)"
    )
    args = ap.parse_args()
    from mempalace_pg.engine import nearest

    own_rows = nearest.OWN_ROWS_PER_SEGMENT if args.own_rows is None else args.own_rows

    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    meta = common.run_meta(
        dsn,
        argv=" ".join(sys.argv[1:]),
        shared_buffers=bench_scale.shared_buffers(dsn),
        own_rows_per_segment=own_rows,
        n=args.n,
    )
    stamp = time.strftime("%Y%m%d_%H%M", time.gmtime())
    data = f"filter_arms_{stamp}.json"
    tag = f"arm_{uuid.uuid4().hex[:6]}"
    workdir = tempfile.mkdtemp(prefix="mpbench_arms_")
    tmp = tempfile.mkdtemp(prefix="mpbench_arms_q_")
    script = str(Path(__file__).resolve())
    results: dict = {"data": data, "measured": {}}
    try:
        queries = bf.truth_file(args.n, tmp, bench_scale.QUERIES)
        results["write"] = common.child_json(
            bench_scale.__file__, ["write", "postgres", args.n, dsn, workdir, tag, 0, 1000, 0], dsn
        )
        stop_folder_process(dsn, tag)
        results["sizes_mb"] = relation_sizes(dsn, tag)
        print(f"written at {results['write']['rows_per_s']:.0f} rows/s; folder stopped", flush=True)
        for way in WAYS:
            results["measured"][way] = common.child_json(
                script, [way, dsn, workdir, tag, queries, own_rows], dsn
            )
            print(way, {k: summarize(results["measured"][way][k]) for k in LABELS}, flush=True)
    finally:
        bench_scale.drop_case("postgres", dsn, tag, workdir)
        shutil.rmtree(tmp, ignore_errors=True)
    report = render(results, meta)
    path = (Path(tempfile.gettempdir()) if args.no_write else HERE / "out") / data
    common.keep_run(path, NAME, {"meta": meta, "results": results}, report, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
