"""Benchmark: what serial vector index builds cost, where pgvector's parallel HNSW build is unsafe.

    python benchmarks/bench_build_workers.py                    # 100k drawers on both stacks, RESULTS.md
    python benchmarks/bench_build_workers.py --n 20000 --stacks trixie --no-write

pgvector before 0.8.2 overflows a buffer in parallel HNSW builds (CVE-2026-3172), so the folder builds
its segments with no parallel worker there (mempalace_pg/db/defects.py); on a fixed pgvector it gives a
build one worker beside its own backend. For each stack and each worker count the server allows (0, and
1 where pgvector is fixed; MEMPALACE_PG_BUILD_WORKERS chooses it), the path ``mempalace mine`` takes:

1. a writer process upserts ``--n`` drawers in batches of 1,000 (bench_backends' 384-d vectors in 50
   clusters) through MemPalace's backend API, with the folder running as it does for a user, and exits;
2. from then on the parent reads the collection's layout every 0.2 s until every row is in one segment:
   that wait is *the folder's lag*, the time a quiet palace keeps searching rows exactly or walking more
   than one segment;
3. the build time of that last segment, over every row (``vector_segments.build_seconds``), per 100k rows.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import bench_real_path as rp
import common

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

BATCH = 1000
SCRIPT = str(Path(__file__).resolve())


def child(n: int, workdir: str, tag: str) -> dict:
    """The writer: upsert 0..n, then exit (the folder it started goes on)."""
    os.environ["MEMPALACE_CONFIG_DIR"] = str(Path(workdir) / "config")
    centers = common.cluster_centers()
    backend, col = common.open_collection(
        "postgres", str(Path(workdir) / "palace"), os.environ["MEMPALACE_PG_DSN"], tag
    )
    t0 = time.perf_counter()
    for ids, docs, metas, vecs in rp.batches(n, BATCH, centers):
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    seconds = time.perf_counter() - t0
    backend.close()
    return {"write_s": seconds, "rows_per_s": n / seconds}


def stack_dsn(stack: str) -> str:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "provision-postgres.sh")],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, MEMPALACE_PG_STACK=stack),
    )
    return proc.stdout.strip().splitlines()[-1]


def one_run(dsn: str, n: int, workers: int) -> dict:
    import psycopg
    from psycopg import sql

    tag = f"bw_{uuid.uuid4().hex[:6]}"
    schema = f"bench_{tag}"
    env = {"MEMPALACE_PG_BUILD_WORKERS": str(workers)}
    with tempfile.TemporaryDirectory() as workdir:
        wrote = common.child_json(SCRIPT, [n, workdir, tag], dsn, env=env)
        exited = time.perf_counter()
        segs = sql.Identifier(schema, "vector_segments")
        with psycopg.connect(dsn, autocommit=True) as conn:
            pk = conn.execute(
                sql.SQL("SELECT min(collection_pk) FROM {}").format(sql.Identifier(schema, "collections"))
            ).fetchone()[0]
            table = sql.Identifier(schema, f"records_c{pk}")
            workers_seen = 0
            while True:
                workers_seen = max(
                    workers_seen,
                    conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'parallel worker' AND "
                        "leader_pid IN (SELECT pid FROM pg_stat_activity WHERE application_name = %s)",
                        (f"mempalace-pg folder {schema}"[:63],),
                    ).fetchone()[0],
                )
                top, count = conn.execute(
                    sql.SQL("SELECT COALESCE(max(hi), -1), count(*) FROM {} WHERE collection_pk = %s").format(
                        segs
                    ),
                    (pk,),
                ).fetchone()
                tail = conn.execute(
                    sql.SQL("SELECT count(*) FROM {} WHERE vector_seq > %s").format(table), (top,)
                ).fetchone()[0]
                if tail == 0 and count == 1:
                    break
                if time.perf_counter() - exited > 1800:
                    raise RuntimeError(f"not folded after 30 min: tail {tail}, {count} segments")
                time.sleep(0.2)
            lag = time.perf_counter() - exited
            builds = conn.execute(
                sql.SQL("SELECT rows, build_seconds FROM {} WHERE collection_pk = %s").format(segs), (pk,)
            ).fetchone()
        from mempalace_pg.config import Settings
        from mempalace_pg.db import schema as db_schema

        db_schema.drop(Settings.load({"dsn": dsn, "schema": schema}))
    return {
        "workers": workers,
        "workers_seen": workers_seen,
        **wrote,
        "lag_s": lag,
        "last_fold_rows": builds[0],
        "last_fold_s": builds[1],
        "last_fold_s_per_100k": builds[1] * 100_000 / builds[0],
    }


def render(runs: list[dict], meta: dict) -> str:
    n = meta["n"]
    lines = [
        f"## Serial index builds where pgvector's parallel build is unsafe ({meta['when']})",
        "",
        f"`python benchmarks/bench_build_workers.py --n {n}`: {n:,} drawers upserted in batches of "
        f"{BATCH:,} by a process that exits, the folder running as for a user; {meta['machine']}. "
        "*Lag*: from the writer's exit until every row is in one segment. *Build*: the folder's build of "
        "that last segment, over every row. *Workers seen*: parallel workers of the folder's builds in "
        "`pg_stat_activity` (sampled every 0.2 s).",
        "",
        "| stack | pgvector | workers | workers seen | write, rows/s | folder's lag, s "
        "| build, s per 100k rows |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r['stack']} | {r['pgvector']} | {r['workers']} | {r['workers_seen']} "
            f"| {r['rows_per_s']:,.0f} | {r['lag_s']:,.1f} | {r['last_fold_s_per_100k']:,.1f} |"
        )
    lines += ["", f"Versions: {'; '.join(meta['versions'])}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--stacks", default="trixie,sid")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument("--child", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.child:
        import json

        print(json.dumps(child(int(args.child[0]), args.child[1], args.child[2])))
        return 0
    import psycopg

    from mempalace_pg.db import defects

    runs, versions = [], []
    for stack in args.stacks.split(","):
        dsn = stack_dsn(stack)
        with psycopg.connect(dsn) as conn:
            pgvector = defects.library_version(conn, "vector")
            safe = defects.parallel_hnsw_build_safe(conn)
        versions.append(f"{stack}: " + ", ".join(f"{k} {v}" for k, v in common.versions(dsn).items()))
        for workers in (0, 1) if safe else (0,):
            run = one_run(dsn, args.n, workers)
            runs.append({"stack": stack, "pgvector": pgvector, **run})
            print(runs[-1], flush=True)
    meta = common.run_meta(stack_dsn(args.stacks.split(",")[0]), n=args.n)
    meta["versions"] = versions
    common.save_run("bench_build_workers", meta, {"runs": runs}, render(runs, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
