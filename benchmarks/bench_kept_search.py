"""Benchmark: search on the kept palaces in place, 100k to 5M drawers on one server (issue 51, item 6).

    python benchmarks/kept_palaces.py build --size 100000                     # once (see there; 5M in parts)
    python benchmarks/bench_kept_search.py --sizes 100000,1000000,5100000      # writes RESULTS.md
    python benchmarks/bench_kept_search.py --sizes 100000 --no-write           # a quick look

For each size, a search process of its own (as MemPalace's CLI or MCP server opens a palace: its backend's
``get_collection`` on the palace directory, with the palace's environment) searches the kept palace in its
own database, not a clone (a 5M clone would double the disk it takes), with k=10 queries of
:class:`skewed_palace.SkewedPalace`: unfiltered, in the wing of their nearest drawer, and in its wing and
room (``bench_scale.run_queries``: p50/p95 ms, recall@10 against exact cosine over every drawer, computed
here). Two passes of the same queries: the *first* as the server's buffers hold whatever ran before (the
palace's segments read from disk or the page cache as the queries reach them), then *again*. Beside them,
the palace's layout (segments, the rows in them, the vector index and table sizes, the database's size)
and the server's ``shared_buffers``, and what the kept palace's manifest says of its build.

Figures go to ``out/bench_kept_search.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import bench_scale
import common
import kept_palaces as kp
from skewed_palace import SkewedPalace

HERE = Path(__file__).resolve().parent
QUERIES = 60
BUDGET_S = 60.0  # per filter and pass: at most this long (a slow layout still ends)


def child(palace_dir: str, queries_file: str) -> dict:
    """In a fresh process with the kept palace's environment: its layout, then two passes of queries."""
    from mempalace.palace import get_collection

    from mempalace_pg.store.collection import PostgresCollection

    raw = json.loads(Path(queries_file).read_text())
    queries = [
        {"vector": q["vector"], "filters": {k: tuple(v) for k, v in q["filters"].items()}} for q in raw
    ]
    t0 = time.perf_counter()
    col = get_collection(palace_dir, create=False, backend="postgres")
    while not isinstance(col, PostgresCollection):  # MemPalace may hand out a wrapper
        col = col._inner
    out = {"open_ms": (time.perf_counter() - t0) * 1000, **bench_scale.layout_now(col)}
    out["first"] = bench_scale.run_queries(col, queries, BUDGET_S, slowest=bench_scale.SLOWEST)
    out["again"] = bench_scale.run_queries(col, queries, BUDGET_S)
    out["peak_rss_mb"] = common.peak_rss_mb()
    return out


def palace_state(dsn: str) -> dict:
    """The kept palace's vector index and table sizes, and its database's."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        segs, rows, index = conn.execute(
            "SELECT count(*), COALESCE(sum(rows), 0), COALESCE(sum(pg_relation_size(to_regclass("
            "quote_ident(%s) || '.' || quote_ident(index_name)))), 0) FROM mempalace.vector_segments",
            (kp.SCHEMA,),
        ).fetchone()
        table = conn.execute(
            "SELECT COALESCE(sum(pg_table_size(c.oid)), 0), COALESCE(sum(pg_indexes_size(c.oid)), 0) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname LIKE 'records_c%%' AND c.relkind = 'r'",
            (kp.SCHEMA,),
        ).fetchone()
        size = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    return {
        "segments": int(segs),
        "rows_in_segments": int(rows),
        "vector_index_mb": float(index) / 1e6,
        "table_mb": float(table[0]) / 1e6,
        "all_indexes_mb": float(table[1]) / 1e6,
        "database_mb": float(size) / 1e6,
    }


def run_size(n: int, dsn: str, work: Path) -> dict:
    kept = kp.Kept("postgres", n)
    manifest = kept.manifest
    if manifest.get("loaded", 0) < n:
        raise SystemExit(
            f"no whole kept postgres palace of {n:,}: benchmarks/kept_palaces.py build --size {n}"
        )
    t0 = time.perf_counter()
    palace = SkewedPalace(n)
    queries = palace.queries(QUERIES, palace.all_vectors())
    truth_s = time.perf_counter() - t0
    path = work / f"queries_{n}.json"
    path.write_text(
        json.dumps(
            [
                {"vector": q["vector"].tolist(), "filters": {k: list(v) for k, v in q["filters"].items()}}
                for q in queries
            ]
        )
    )
    del palace, queries
    tdsn = kp.with_dbname(dsn, manifest["database"])
    # the palace's environment (its home, config, embedder, schema); child_json sets the DSN
    env = {
        k: v
        for k, v in kept.env(kept.root, tdsn).items()
        if k != "MEMPALACE_PG_DSN" and os.environ.get(k) != v
    }
    print(f"  {n:,}: truth in {truth_s:.0f} s, searching", file=sys.stderr, flush=True)
    result = common.child_json(__file__, [str(kept.root / "palace"), str(path)], tdsn, env=env)
    path.unlink()
    built = {k: manifest.get(k) for k in ("written", "build_s", "settle_s", "bytes", "built_at", "loaded")}
    built["parts"] = [
        {k: p.get(k) for k in ("from", "to", "written", "seconds", "settle_s", "bytes")}
        for p in manifest.get("parts", [])
    ]
    return {"size": n, **result, "palace": palace_state(tdsn), "kept": built}


def cell(q: dict) -> str:
    return f"{q['p50']:.1f} / {q['p95']:.1f} ({q['recall_at_10']:.3f})"


def render(cases: list[dict], meta: dict) -> str:
    lines = [
        "## Search on kept palaces of 100k to 5M drawers",
        "",
        common.anchor_line("bench_kept_search"),
        "",
        f"{meta['when']}, {meta['machine']}, {meta['versions']}, shared_buffers {meta['shared_buffers']}. "
        f"`python benchmarks/bench_kept_search.py --sizes {meta['sizes']}`: each kept palace "
        "(benchmarks/kept_palaces.py) searched in place by a process of its own, "
        f"{QUERIES} k=10 queries per filter, twice (first: as the server's buffers were; again: the same "
        "queries). Cells: p50 / p95 ms (recall@10 against exact cosine).",
        "",
        "| drawers | pass | unfiltered | wing | wing+room |",
        "|---|---|---|---|---|",
    ]
    for c in cases:
        for label in ("first", "again"):
            q = c[label]
            lines.append(
                f"| {c['size']:,} | {label} | " + " | ".join(cell(q[f]) for f in bench_scale.FILTERS) + " |"
            )
    lines += [
        "",
        "| drawers | segments | vector index | table | all indexes | database | written | settled after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        p, k = c["palace"], c["kept"]
        lines.append(
            f"| {c['size']:,} | {p['segments']} | {p['vector_index_mb']:,.0f} MB | {p['table_mb']:,.0f} MB | "
            f"{p['all_indexes_mb']:,.0f} MB | {p['database_mb'] / 1000:,.1f} GB | {k['written']}, "
            f"{len(k['parts']) or 1} run(s), {k['build_s']:,.0f} s | {k['settle_s']:,.0f} s |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,5100000")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    meta = common.run_meta(dsn, sizes=args.sizes, shared_buffers=bench_scale.shared_buffers(dsn))
    cases = []
    with tempfile.TemporaryDirectory(prefix="kept_search_") as work:
        for n in [int(s) for s in args.sizes.split(",")]:
            cases.append(run_size(n, dsn, Path(work)))
            # each size's figures on disk as soon as they are measured
            (HERE / "out" / "bench_kept_search.partial.json").write_text(json.dumps(cases, default=str))
    common.save_run("bench_kept_search", meta, {"cases": cases}, render(cases, meta), write=not args.no_write)
    (HERE / "out" / "bench_kept_search.partial.json").unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
