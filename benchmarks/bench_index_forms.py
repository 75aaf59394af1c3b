"""Benchmark: how small can a palace's vector index be? Index forms against memory.

    python benchmarks/bench_index_forms.py --n 100000 --keep KEEP/forms-100k.json \\
        --restart "bash scripts/provision-postgres.sh restart"
    python benchmarks/bench_index_forms.py --report KEEP/forms-100k.json KEEP/forms-1m-*.json

A segment of today's form indexes half-precision copies of the vectors (``halfvec``, HNSW m = 16,
ef_construction 256) and queries re-rank its candidates by the exact distance. This measures that form
beside the smaller ones: fewer links (``halfvec:8:...``) and binary quantization (``bit:...``: an HNSW
graph over ``binary_quantize(embedding)``, Hamming distance, whose ``candidates`` nearest are re-ranked
by the exact cosine distance read from the stored vectors). For each form: the build's time and the
index's size, then, at each ``shared_buffers`` given (set with ALTER SYSTEM, the server restarted with
``--restart``, reset afterwards), recall@10 against exact cosine, p50 / p95 of the statement, and the
shared blocks a query finds in the buffers and reads from outside them (the table's and its indexes',
from pg_statio). Queries and vectors are the palace of ``skewed_palace.py`` (one wing holds half the
drawers; queries near drawers). Each run keeps its figures as JSON (``--keep``); ``--report`` joins
runs made apart (a 1M palace one form a run, so no run passes 30 minutes) into one RESULTS.md section.
The scratch table is kept between runs of one size with ``--keep-table``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import common
import numpy as np

HERE = Path(__file__).resolve().parent
NAME = "bench_index_forms"
FORMS = "halfvec:16:256,halfvec:8:256,bit:16:64,bit:16:256"
#: The breadths each form is searched at: hnsw.ef_search of a halfvec form (the backend's default is 150);
#: the candidates re-ranked of a bit form (its ef_search: pgvector returns at most that many).
HALF_BREADTHS = (100, 150, 300)
BIT_CANDIDATES = (100, 200, 400, 800)
K = 10


def vectors_and_queries(n: int, count: int):
    """The skewed palace's ``n`` unit vectors, ``2 * count`` query vectors near drawers (the first half
    warms the buffers, the second is measured) and the exact top K of each measured one."""
    from skewed_palace import SkewedPalace

    palace = SkewedPalace(n)
    vectors = palace.all_vectors()
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    rng = np.random.default_rng(41)
    queries = []
    for src in rng.integers(0, n, 2 * count):
        q = vectors[src] + 0.01 * rng.normal(size=vectors.shape[1]).astype(np.float32)
        queries.append((q / np.linalg.norm(q)).astype(np.float32))
    truth = []
    for q in queries[count:]:
        sims = vectors @ q
        top = np.argpartition(-sims, K)[:K]
        truth.append(set(top.tolist()))
    return vectors, queries[:count], queries[count:], truth


def load_table(conn, table: str, vectors: np.ndarray) -> None:
    common.scratch_vectors(conn, table, vectors, f"vector({vectors.shape[1]})")
    conn.execute(f"VACUUM ANALYZE {table}")


class Form:
    """One index form, ``kind:m:ef_construction``: its DDL and its statement at a breadth."""

    def __init__(self, spec: str, table: str, dim: int):
        kind, m, efc = spec.split(":")
        if kind not in ("halfvec", "bit"):
            raise SystemExit(f"unknown index form {spec!r}: halfvec:M:EF or bit:M:EF")
        self.spec, self.kind, self.m, self.efc = spec, kind, int(m), int(efc)
        self.table, self.dim, self.index = table, dim, f"{table}_form"
        if kind == "halfvec":
            self.key = f"(embedding::halfvec({dim}))"
            self.ops, self.probe = "halfvec_cosine_ops", f"%s::vector({dim})::halfvec({dim})"
            self.distance, self.breadths = "<=>", HALF_BREADTHS
        else:
            self.key = f"(binary_quantize(embedding)::bit({dim}))"
            self.ops, self.probe = "bit_hamming_ops", f"binary_quantize(%s::vector({dim}))::bit({dim})"
            self.distance, self.breadths = "<~>", BIT_CANDIDATES

    def ddl(self) -> str:
        return (
            f"CREATE INDEX {self.index} ON {self.table} USING hnsw ({self.key} {self.ops}) "
            f"WITH (m = {self.m}, ef_construction = {self.efc})"
        )

    def statement(self, breadth: int) -> tuple[str, int]:
        """The query at ``breadth`` and its hnsw.ef_search. A halfvec form's walk yields K candidates (the
        backend re-ranks them by the exact distance); a bit form's yields ``breadth``, re-ranked."""
        candidates = K if self.kind == "halfvec" else breadth
        return (
            f"SELECT i FROM (SELECT i, embedding FROM {self.table} ORDER BY {self.key} {self.distance} "
            f"{self.probe} LIMIT {candidates}) c ORDER BY embedding <=> %s::vector({self.dim}) LIMIT {K}",
            min(1000, breadth),
        )


def blocks(conn, table: str) -> tuple[int, int]:
    """Shared blocks the table and its indexes found in the buffers and read from outside them, as
    pg_statio has them now (this session's counts flushed first)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT pg_stat_clear_snapshot()")
    hit, read = conn.execute(
        "SELECT COALESCE(heap_blks_hit, 0) + COALESCE(idx_blks_hit, 0), "
        "COALESCE(heap_blks_read, 0) + COALESCE(idx_blks_read, 0) "
        "FROM pg_statio_user_tables WHERE relid = %s::regclass",
        (table,),
    ).fetchone()
    return int(hit), int(read)


def measure(conn, form: Form, warm: list, queries: list, truth: list) -> list[dict]:
    out = []
    for breadth in form.breadths:
        query, ef = form.statement(breadth)
        conn.execute(f"SET hnsw.ef_search = {ef}")
        for q in warm:
            conn.execute(query, (q, q)).fetchall()
        before = blocks(conn, form.table)
        lat, recalls = [], []
        for q, tr in zip(queries, truth):
            t0 = time.perf_counter()
            got = conn.execute(query, (q, q)).fetchall()
            lat.append((time.perf_counter() - t0) * 1000)
            recalls.append(len(tr & {r[0] for r in got}) / K)
        after = blocks(conn, form.table)
        row = {
            "breadth": breadth,
            "recall": float(np.mean(recalls)),
            "p50": float(np.median(lat)),
            "p95": float(np.percentile(lat, 95)),
            "hit": (after[0] - before[0]) / len(queries),
            "read": (after[1] - before[1]) / len(queries),
        }
        print(
            f"  {form.spec} breadth {breadth}: recall {row['recall']:.3f} p50 {row['p50']:.2f} "
            f"p95 {row['p95']:.2f} ms, blocks {row['hit']:.0f} hit / {row['read']:.0f} read",
            file=sys.stderr,
            flush=True,
        )
        out.append(row)
    return out


def run(args) -> dict:
    import psycopg
    from pgvector.psycopg import register_vector

    dsn = common.provisioned_dsn()
    table = f"mempalace_pg_bench_forms_{args.n}"
    t0 = time.perf_counter()
    vectors, warm, queries, truth = vectors_and_queries(args.n, args.queries)
    print(f"{args.n:,} vectors and their truth in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    def connect():
        conn = psycopg.connect(dsn, autocommit=True)
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        return conn

    def restart(shared_buffers: str | None) -> None:
        with connect() as conn:
            if shared_buffers:
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")
            else:
                conn.execute("ALTER SYSTEM RESET shared_buffers")
        subprocess.run(args.restart, shell=True, check=True, stdout=subprocess.DEVNULL)

    forms = []
    with connect() as conn:
        have = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]
        if not have or conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] != args.n:
            t0 = time.perf_counter()
            load_table(conn, table, vectors)
            print(f"loaded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        from mempalace_pg.engine import builds

        workers = builds.build_workers(conn)
    try:
        for spec in args.forms.split(","):
            form = Form(spec, table, vectors.shape[1])
            with connect() as conn:
                conn.execute(f"DROP INDEX IF EXISTS {form.index}")
                conn.execute(f"SET maintenance_work_mem = '{args.build_memory}'")
                conn.execute(f"SET max_parallel_maintenance_workers = {int(workers)}")
                t0 = time.perf_counter()
                conn.execute(form.ddl())
                build_s = time.perf_counter() - t0
                size = conn.execute("SELECT pg_relation_size(%s::regclass)", (form.index,)).fetchone()[0]
            print(f"{spec}: built in {build_s:.1f} s, {size / 2**20:.0f} MB", file=sys.stderr, flush=True)
            memories = []
            for sb in args.shared_buffers.split(","):
                restart(sb)
                with connect() as conn:
                    shown = conn.execute("SHOW shared_buffers").fetchone()[0]
                    print(f" shared_buffers {shown}", file=sys.stderr, flush=True)
                    memories.append(
                        {"shared_buffers": shown, "breadths": measure(conn, form, warm, queries, truth)}
                    )
            with connect() as conn:
                conn.execute(f"DROP INDEX {form.index}")
            forms.append({"form": spec, "build_s": build_s, "index_mb": size / 2**20, "memories": memories})
    finally:
        restart(None)
        if not args.keep_table:
            with connect() as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
    meta = common.run_meta(
        dsn,
        command="python benchmarks/bench_index_forms.py " + shlex.join(sys.argv[1:]),
        n=args.n,
        queries=args.queries,
        workers=workers,
        build_memory=args.build_memory,
    )
    return {"meta": meta, "forms": forms}


def render(runs: list) -> str:
    sizes = ", ".join(f"{r['meta']['n']:,}" for r in runs)
    lines = [
        f"## Index forms against memory: {sizes} vectors",
        "",
        "Each run: "
        + "; ".join(
            f"`{r['meta']['command']}` ({r['meta']['when']}, {r['meta']['machine']}, "
            f"{r['meta']['versions']}, builds with {r['meta']['workers']} parallel worker(s) and "
            f"{r['meta']['build_memory']} maintenance_work_mem)"
            for r in runs
        )
        + ". One index over every vector of the skewed palace; k=10, "
        f"{runs[0]['meta']['queries']} queries near drawers after as many others warmed the buffers; "
        "recall@10 against exact cosine; blocks: the table's and its indexes' shared blocks a query found "
        "in the buffers / read from outside them (pg_statio). Breadth: hnsw.ef_search of a halfvec form "
        "(its 10 candidates re-ranked by the exact distance), the candidates re-ranked of a bit form.",
        "",
        "| vectors | form (type:m:ef_construction) | build s | index MB | shared_buffers | breadth "
        "| recall@10 | p50 ms | p95 ms | blocks a query, hit / read |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        for f in r["forms"]:
            for mem in f["memories"]:
                for b in mem["breadths"]:
                    lines.append(
                        f"| {r['meta']['n']:,} | {f['form']} | {f['build_s']:.1f} | {f['index_mb']:.0f} "
                        f"| {mem['shared_buffers']} | {b['breadth']} | {b['recall']:.3f} | {b['p50']:.2f} "
                        f"| {b['p95']:.2f} | {b['hit']:.0f} / {b['read']:.0f} |"
                    )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--forms", default=FORMS, help="kind:m:ef_construction,... (kind: halfvec or bit)")
    ap.add_argument("--shared-buffers", default="128MB,512MB")
    ap.add_argument("--restart", help="the shell command that restarts the server (after ALTER SYSTEM)")
    ap.add_argument("--build-memory", default="1GB", help="maintenance_work_mem of the builds")
    ap.add_argument("--keep", help="write this run's figures (JSON) here")
    ap.add_argument("--keep-table", action="store_true", help="keep the scratch table for the next run")
    ap.add_argument("--report", nargs="+", help="make the section from these runs' JSON, measuring nothing")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.report:
        runs = [json.loads(Path(p).read_text()) for p in args.report]
    else:
        if not args.restart:
            raise SystemExit("--restart is needed to set shared_buffers")
        runs = [run(args)]
        if args.keep:
            Path(args.keep).parent.mkdir(parents=True, exist_ok=True)
            Path(args.keep).write_text(json.dumps(runs[0], indent=1))
    report = render(runs)
    if args.no_write:
        print(report)
    else:
        common.record_report(HERE / "RESULTS.md", NAME, report)
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
