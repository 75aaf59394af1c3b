"""Benchmark: HNSW index parameters for 384-dimension drawers (build time, recall@10, latency).

    python benchmarks/bench_index_params.py                    # 100k vectors, appends to RESULTS.md
    python benchmarks/bench_index_params.py --n 20000 --no-write

Loads the benchmark's clustered vectors (benchmarks/bench_backends.py) into a scratch table and,
for each index configuration, times the build (one parallel worker, as the backend builds) and
measures recall@10 against exact cosine ground truth and p50 latency at several ``ef_search``.
A parallel build is not deterministic: ``--repeat`` builds each configuration several times, to see how
far recall varies from build to build. ``--data skewed`` uses the palace of ``skewed_palace.py``
instead (graded neighbours within topics, files of several chunks; queries from drawers). For each
configuration it also measures the bytes a row takes in the in-memory graph of a build (from pgvector's
notice when a build of 8,000 rows outgrows 8MB), which bounds a segment's rows
(``builds.build_capacity``). This is how the backend's defaults (halfvec, m = 16, ef_construction,
ef_search = 150) were chosen.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import common
import numpy as np

HERE = Path(__file__).resolve().parent

CONFIGS = ["vector:16:64", "vector:12:64", "vector:16:48", "vector:12:48", "halfvec:16:64"]
EF_SEARCH = (100, 150, 200)


def row_bytes(conn, table: str, cast: str, kind: str, m: int, efc: int, notices: list) -> float:
    """Bytes a row takes in a build's in-memory graph: build over 8,000 rows in 8MB and read how many
    fitted from pgvector's notice."""
    conn.execute(f"CREATE TEMP TABLE {table}_mem AS SELECT * FROM {table} ORDER BY i LIMIT 8000")
    try:
        conn.execute("SET maintenance_work_mem = '8MB'")
        notices.clear()
        conn.execute(
            f"CREATE INDEX ON {table}_mem USING hnsw (({cast}) {kind}_cosine_ops) "
            f"WITH (m = {m}, ef_construction = {efc})"
        )
        fitted = [int(n.split(" after ")[1].split()[0]) for n in notices if "no longer fits" in n]
        return 8 * 1024 * 1024 / fitted[0] if fitted else float("nan")
    finally:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(f"DROP TABLE {table}_mem")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--configs", default=",".join(CONFIGS), help="kind:m:ef_construction,...")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--repeat", type=int, default=1, help="builds of each configuration")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--data", choices=("clusters", "skewed"), default="clusters")
    args = ap.parse_args()

    import psycopg
    from pgvector.psycopg import register_vector

    dsn = common.provisioned_dsn()
    if args.data == "skewed":
        from skewed_palace import SkewedPalace

        palace = SkewedPalace(args.n)
        vectors = palace.all_vectors()
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        queries = [q["vector"] for q in palace.queries(args.queries, vectors)]
    else:
        centers = common.cluster_centers()
        batches = [
            common.batch_data(s, min(common.BATCH, args.n - s), centers)
            for s in range(0, args.n, common.BATCH)
        ]
        vectors = np.vstack([b[3] for b in batches])
        queries = common.query_vectors(args.queries, 777, centers)
    truth = [set(np.argsort(-(vectors @ (q / np.linalg.norm(q))))[:10].tolist()) for q in queries]
    from mempalace_pg.engine import builds

    notices: list[str] = []
    table = "mempalace_pg_bench_index"
    rows = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        common.scratch_vectors(conn, table, vectors)
        conn.execute(f"ANALYZE {table}")
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        # as the backend builds: one worker where pgvector's parallel build is safe, else serial
        workers = builds.build_workers(conn)
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(f"SET max_parallel_maintenance_workers = {int(workers)}")
        try:
            for spec, build_no in [
                (c, r) for c in args.configs.split(",") for r in range(1, args.repeat + 1)
            ]:
                kind, m, efc = spec.split(":")
                cast = f"embedding::{kind}({common.DIM})"
                conn.execute(f"DROP INDEX IF EXISTS {table}_hnsw")
                t0 = time.perf_counter()
                conn.execute(
                    f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (({cast}) {kind}_cosine_ops) "
                    f"WITH (m = {int(m)}, ef_construction = {int(efc)})"
                )
                build = time.perf_counter() - t0
                per_row = row_bytes(conn, table, cast, kind, int(m), int(efc), notices)
                for ef in EF_SEARCH:
                    conn.execute(f"SET hnsw.ef_search = {ef}")
                    recalls, lat = [], []
                    for q, tr in zip(queries, truth):
                        t0 = time.perf_counter()
                        got = conn.execute(
                            f"SELECT i FROM {table} ORDER BY {cast} <=> %s::{kind}({common.DIM}) LIMIT 10",
                            (q,),
                        ).fetchall()
                        lat.append((time.perf_counter() - t0) * 1000)
                        recalls.append(len(tr & {r[0] for r in got}) / 10)
                    rows.append(
                        (
                            spec,
                            build_no,
                            build,
                            ef,
                            float(np.mean(recalls)),
                            float(np.median(lat)),
                            float(np.percentile(lat, 95)),
                            per_row,
                        )
                    )
                    print(
                        f"{spec} #{build_no} build {build:.1f}s ef_search {ef}: recall {rows[-1][4]:.3f} "
                        f"p50 {rows[-1][5]:.2f} ms",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        server = conn.execute("SHOW server_version").fetchone()[0]
        pgv = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]

    date = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## Index parameters at {args.n:,} vectors — {date}",
        "",
        f"PostgreSQL {server}, pgvector {pgv}, {common.DIM} dimensions, {args.queries} queries, data: "
        + (f"{common.CLUSTERS} clusters" if args.data == "clusters" else "the skewed palace")
        + ", "
        f"build with {workers} parallel worker(s) and 1GB maintenance_work_mem. "
        f"Command: `python benchmarks/bench_index_params.py {' '.join(sys.argv[1:])}`.",
        "",
        "| index (type:m:ef_construction) | build # | build, s | build memory, bytes a row | ef_search "
        "| recall@10 | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for spec, build_no, build, ef, rec, p50, p95, per_row in rows:
        lines.append(
            f"| {spec} | {build_no} | {build:.1f} | {per_row:,.0f} | {ef} | {rec:.3f} "
            f"| {p50:.2f} | {p95:.2f} |"
        )
    report = "\n".join(lines) + "\n"
    if args.no_write:
        print(report)
    else:
        common.record_report(Path(args.out), "bench_index_params", report)
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
