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

With ``--cold N``, where a filtered search's time goes on the largest palace: N queries as MemPalace's
MCP server embeds a question (MemPalace's hash embedder, as ``bench_commands`` asks them; each question
new to the server), in the wing and room of a random drawer, each run first under EXPLAIN (ANALYZE,
BUFFERS) (its blocks found in shared buffers and read from outside them, per arm) and then again as a
plain query: what a search costs when the rows it checks are not in memory, and when they are. With
``--own-rows M`` as well, the same filters are first searched (with new questions) from the filter's own
rows up to M a segment (the design of "fewer walks for a filter"), then as shipped.

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
    raw = json.loads(Path(queries_file).read_text())
    queries = [
        {"vector": q["vector"], "filters": {k: tuple(v) for k, v in q["filters"].items()}} for q in raw
    ]
    t0 = time.perf_counter()
    col = kp.postgres_collection(palace_dir)
    out = {"open_ms": (time.perf_counter() - t0) * 1000, **bench_scale.layout_now(col)}
    out["first"] = bench_scale.run_queries(col, queries, BUDGET_S, slowest=bench_scale.SLOWEST)
    out["again"] = bench_scale.run_queries(col, queries, BUDGET_S)
    out["peak_rss_mb"] = common.peak_rss_mb()
    return out


def child_cold(palace_dir: str, n: int, count: int, own_rows: int = 0) -> list:
    """In a fresh process with the kept palace's environment: ``count`` wing+room searches, each explained
    first (cold), then run again; with ``own_rows``, first the same filters (new questions) answered from
    the filter's own rows up to ``own_rows`` a segment (``nearest.OWN_ROWS_PER_SEGMENT``), then as
    shipped: the rows the first variant read stay cached for the second, so the order favours the
    shipped one."""
    from mempalace_pg.engine import nearest

    shipped = nearest.OWN_ROWS_PER_SEGMENT
    out = []
    for label, per_segment in ([("own rows", own_rows)] if own_rows else []) + [("shipped", shipped)]:
        nearest.OWN_ROWS_PER_SEGMENT = per_segment
        out.append({"label": label, "own_rows": per_segment, **cold_searches(palace_dir, n, count, label)})
    nearest.OWN_ROWS_PER_SEGMENT = shipped
    return out


def cold_searches(palace_dir: str, n: int, count: int, label: str) -> dict:
    """One variant's cold wing+room searches (:func:`child_cold`) and the blocks they read by relation."""
    sys.path.insert(0, str(HERE.parent / "scripts"))
    import numpy as np
    from bench_commands import QUESTIONS
    from embedding_server import hash_embed

    col = kp.postgres_collection(palace_dir)
    palace = SkewedPalace(n)
    rng = np.random.default_rng(17)
    salt = time.time_ns()
    before = blocks_read()
    out = []
    for i in range(count):
        j = int(rng.integers(0, n))
        where = {"$and": [{"wing": palace.wing_name(j)}, {"room": palace.room_name(j)}]}
        # a question the server has not seen, in this run or an earlier one: its rows are not in memory
        # because of an earlier query
        vector = hash_embed([f"{QUESTIONS[i % len(QUESTIONS)]} {i} {label} {salt}"])[0]
        t0 = time.perf_counter()
        plan = bench_scale.plan_summary(col.explain_query(query_embedding=vector, n_results=5, where=where))
        cold = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        col.query(query_embeddings=[vector], n_results=5, where=where)
        again = (time.perf_counter() - t0) * 1000
        arms = plan["arms"]
        out.append(
            {
                "filter_rows": int(((palace.wing == palace.wing[j]) & (palace.room == palace.room[j])).sum()),
                "cold_ms": cold,
                "again_ms": again,
                "explained_ms": plan["explained_ms"],
                "hit": sum(a["hit"] for a in arms),
                "read": sum(a["read"] for a in arms),
                "arms": arms,
            }
        )
    time.sleep(11.0)  # a backend reports its counts once idle for 10 s (PGSTAT_IDLE_INTERVAL)
    after = blocks_read()
    return {"queries": out, "read_by_table": {k: after[k] - before.get(k, 0) for k in after}}


def blocks_read() -> dict:
    """Blocks each of the palace's tables had read from outside shared buffers so far: its heap (and
    TOAST) and its indexes, as pg_statio counts them."""
    import psycopg

    with psycopg.connect(os.environ["MEMPALACE_PG_DSN"], autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT relname, COALESCE(heap_blks_read, 0) + COALESCE(toast_blks_read, 0), "
            "COALESCE(idx_blks_read, 0) + COALESCE(tidx_blks_read, 0) FROM pg_statio_user_tables "
            "WHERE schemaname = %s",
            (kp.SCHEMA,),
        ).fetchall()
    out = {}
    for name, heap, index in rows:
        out[f"{name} (table)"] = int(heap)
        out[f"{name} (indexes)"] = int(index)
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


def run_size(n: int, dsn: str, work: Path, cold: int = 0, own_rows: int = 0) -> dict:
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
    if cold:
        print(f"  {n:,}: {cold} cold wing+room searches", file=sys.stderr, flush=True)
        result["cold"] = common.child_json(
            __file__,
            ["cold", str(kept.root / "palace"), n, cold, own_rows],
            tdsn,
            env=env,
            capture_stderr=True,
        )
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
    for c in cases:
        if c.get("cold"):
            lines += cold_table(c, meta)
    return "\n".join(lines) + "\n"


def cold_table(case: dict, meta: dict) -> list[str]:
    variants = case["cold"]
    shipped = variants[-1]
    rows = shipped["queries"]
    lines = [
        "",
        f"Where a filtered search's time goes at {case['size']:,} drawers (`--cold {meta['cold']}"
        + (f" --own-rows {meta['own_rows']}" if meta.get("own_rows") else "")
        + f"`): {len(rows)} questions embedded by MemPalace's hash embedder, each new to the server, in the "
        "wing and room of a random drawer (k=5, as `mempalace_search` asks), each explained first "
        "(EXPLAIN (ANALYZE, BUFFERS): blocks found in shared buffers and read from outside them) and then "
        "run again; blocks read from outside shared buffers over each variant's cold runs by relation "
        "(pg_statio)."
        + (
            " The variant first answers the same filters (with new questions) from the filter's own rows up "
            f"to {meta['own_rows']:,} a segment; the rows it read stay cached for the shipped runs after it."
            if len(variants) > 1
            else ""
        ),
        "",
        "| variant | cold p50 / p95 ms | again p50 / p95 ms | read by relation |",
        "|---|---|---|---|",
    ]
    for v in variants:
        cold = common.summary([r["cold_ms"] for r in v["queries"]])
        again = common.summary([r["again_ms"] for r in v["queries"]])
        read = sorted(((k, x) for k, x in v["read_by_table"].items() if x), key=lambda kv: -kv[1])
        name = "shipped" if v is shipped else f"own rows up to {v['own_rows']:,} a segment"
        lines.append(
            f"| {name} | {cold['p50']:.1f} / {cold['p95']:.1f} | {again['p50']:.1f} / {again['p95']:.1f} | "
            + ", ".join(f"{k} {x:,}" for k, x in read)
            + " |"
        )
    lines += [
        "",
        "| rows in the filter | variant | cold ms | blocks hit | blocks read | arm reading most | again ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for v in variants:
        name = "shipped" if v is shipped else "own rows"
        for r in sorted(v["queries"], key=lambda r: -r["cold_ms"]):
            top = max(r["arms"], key=lambda a: a["read"])
            lines.append(
                f"| {r['filter_rows']:,} | {name} | {r['cold_ms']:.1f} | {r['hit']:,} | {r['read']:,} | "
                f"{top['arm']}: {top['read']:,} read in {top['ms']:.0f} ms | {r['again_ms']:.1f} |"
            )
    return lines


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        if sys.argv[2] == "cold":
            print(json.dumps(child_cold(sys.argv[3], *map(int, sys.argv[4:7]))))
        else:
            print(json.dumps(child(sys.argv[2], sys.argv[3])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,5100000")
    ap.add_argument("--cold", type=int, default=0, help="N cold wing+room searches on the largest size")
    ap.add_argument(
        "--own-rows",
        type=int,
        default=0,
        help="with --cold: the same filters answered from their own rows up to N a segment, first",
    )
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument(
        "--render-partial",
        action="store_true",
        help="report what a run that stopped before its report measured (out/bench_kept_search.partial.json)",
    )
    args = ap.parse_args()
    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    partial = HERE / "out" / "bench_kept_search.partial.json"
    if args.render_partial:  # a run stopped before its report: what it measured, as it measured it
        run = json.loads(partial.read_text())
        report = render(run["cases"], run["meta"])
        common.save_run(
            "bench_kept_search", run["meta"], {"cases": run["cases"]}, report, write=not args.no_write
        )
        partial.unlink()
        return 0
    meta = common.run_meta(
        dsn,
        sizes=args.sizes,
        cold=args.cold,
        own_rows=args.own_rows,
        shared_buffers=bench_scale.shared_buffers(dsn),
    )
    cases = []
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="kept_search_") as work:
        for n in sizes:
            biggest = n == max(sizes)
            cases.append(run_size(n, dsn, Path(work), args.cold if biggest else 0, args.own_rows))
            # each size's figures on disk as soon as they are measured
            partial.write_text(json.dumps({"meta": meta, "cases": cases}, default=str))
    common.save_run("bench_kept_search", meta, {"cases": cases}, render(cases, meta), write=not args.no_write)
    partial.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
