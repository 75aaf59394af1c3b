"""What PgBouncer (transaction pooling) costs mempalace-pg, against a direct connection and Chroma.

One palace of N drawers (384-d, clustered; bench_backends' data) is bulk-loaded into PostgreSQL and
indexed, and the same drawers into MemPalace's Chroma backend. Then, on the same machine in one run:

1. **search from a new process**, as `mempalace search` does: a process starts, opens the palace, runs
   one query and exits; the time from its start to the answer, and the query alone (p50/p95 over runs);
2. **warm search** in one process: p50/p95 of `query(n_results=10)` over 200 queries;
3. **concurrent writers**: W processes at once, each filing U units of work (a drawer and two facts in one
   transaction, as `pg_file_memory` does); aggregate units/s and p50/p95 per unit. Direct, each process
   has its own server connections; through PgBouncer all of them share its pool (3 server connections,
   as scripts/provision-pgbouncer.sh sets). Chroma is not run here: MemPalace's KG is SQLite beside it
   and concurrent Chroma writers are its known corruption case (issue 17 measures a team on one palace).

    python benchmarks/bench_pooler.py [--drawers 20000] [--writers 8] [--units 100] [--no-write]

PostgreSQL is the provisioned server (MEMPALACE_PG_STACK, default trixie), PgBouncer the one
scripts/provision-pgbouncer.sh starts in front of it. The report replaces this benchmark's section of
RESULTS.md (the earlier one moves to out/history/bench_pooler.md); raw figures go to out/bench_pooler.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# A new process: open the palace, one query, the times printed as JSON (run by `search_process`).
SEARCH_CHILD = r"""
import json, os, sys, time
t0 = float(sys.argv[1])
import numpy as np
sys.path.insert(0, sys.argv[4])
import common
name, palace, tag = sys.argv[2], sys.argv[3], sys.argv[5]
q = common.query_vectors(1, int(sys.argv[6]), common.cluster_centers())[0].tolist()
backend, col = common.open_collection(name, palace, os.environ.get("MEMPALACE_PG_DSN", ""), tag)
t1 = time.perf_counter()
res = col.query(query_embeddings=[q], n_results=10)
t2 = time.perf_counter()
assert len(res.ids[0]) == 10
print(json.dumps({"total_ms": (time.time() - t0) * 1000, "query_ms": (t2 - t1) * 1000}))
"""

WRITER_CHILD = r"""
import json, os, sys, time
from mempalace_pg import unit_of_work
from mempalace_pg.db import pool
worker, units, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ms = []
for i in range(units):
    t = time.perf_counter()
    with unit_of_work(palace_key=key) as uow:
        d = f"w{worker}-{i}"
        text = f"note {i} of writer {worker}"
        uow.add_drawers(ids=[d], documents=[text], embeddings=[[1.0, float(i), 0.5]])
        uow.add_triple(f"Writer {worker}", "wrote", f"Note {worker}-{i}", source_drawer_id=d)
        uow.add_triple("Shared Shelf", "holds", f"Note {worker}-{i}", source_drawer_id=d)
    ms.append((time.perf_counter() - t) * 1000)
pool.close_all()
print(json.dumps(ms))
"""


def pooler_dsn(stack: str) -> str:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "provision-pgbouncer.sh")],
        env={**os.environ, "MEMPALACE_PG_STACK": stack},
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip().splitlines()[-1]


def load(name: str, palace: str, dsn: str, tag: str, n: int, centers) -> float:
    backend, col = common.open_collection(name, palace, dsn, tag)
    t0 = time.perf_counter()
    if name == "postgres":
        with col.bulk_load() as bulk:
            for start in range(0, n, common.BATCH):
                ids, docs, metas, vecs = common.batch_data(start, min(common.BATCH, n - start), centers)
                bulk(ids=ids, documents=docs, metadatas=metas, embeddings=vecs)
    else:
        for start in range(0, n, common.BATCH):
            ids, docs, metas, vecs = common.batch_data(start, min(common.BATCH, n - start), centers)
            col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    seconds = time.perf_counter() - t0
    assert col.count() == n
    backend.close()
    return seconds


def search_process(name: str, palace: str, env: dict, tag: str, runs: int) -> dict:
    total, query = [], []
    for i in range(runs):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                SEARCH_CHILD,
                repr(time.time()),
                name,
                palace,
                str(HERE),
                tag,
                str(100 + i),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        total.append(got["total_ms"])
        query.append(got["query_ms"])
    return {"total": common.summary(total), "query": common.summary(query)}


def warm_search(name: str, palace: str, dsn: str, tag: str, centers) -> dict:
    backend, col = common.open_collection(name, palace, dsn, tag)
    queries = common.query_vectors(220, 4242, centers)
    ms = []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        col.query(query_embeddings=[q.tolist()], n_results=10)
        if i >= 20:  # the first 20 warm the connections and caches
            ms.append((time.perf_counter() - t) * 1000)
    backend.close()
    return common.summary(ms)


def writers(env: dict, count: int, units: int) -> dict:
    key = f"bench-writers-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER_CHILD, str(w), str(units), key],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(count)
    ]
    ms: list[float] = []
    for proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(err[-2000:])
        ms.extend(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - t0
    return {
        "key": key,
        "units": len(ms),
        "wall_s": wall,
        "units_per_s": len(ms) / wall,
        "unit_ms": common.summary(ms),
    }


def render(r: dict, meta: dict) -> str:
    d, p, c = r["direct"], r["pooler"], r["chroma"]

    # each measure: its label, and its summaries direct, through PgBouncer and on Chroma (None: not run)
    measures = [
        ("new process: start to answer", d["process"]["total"], p["process"]["total"], c["process"]["total"]),
        ("new process: its one query", d["process"]["query"], p["process"]["query"], c["process"]["query"]),
        ("warm search", d["warm"], p["warm"], c["warm"]),
        (
            f"unit of work, {meta['writers']} writers at once",
            d["writers"]["unit_ms"],
            p["writers"]["unit_ms"],
            None,
        ),
    ]
    rows = [
        f"| {label}, {key} | {a[key]:.2f} | {b[key]:.2f} | {b[key] / a[key]:.2f}× | "
        + (f"{ch[key]:.2f}" if ch else "—")
        + " |"
        for label, a, b, ch in measures
        for key in ("p50", "p95")
    ]
    lines = [
        f"## Through PgBouncer: what transaction pooling costs ({meta['when']})",
        "",
        f"`python benchmarks/bench_pooler.py --drawers {meta['drawers']} --writers {meta['writers']} "
        f"--units {meta['units']}` on {meta['machine']}; {meta['versions']}. PgBouncer {meta['pgbouncer']} "
        "in transaction pooling mode with 3 server connections (scripts/provision-pgbouncer.sh), on the same "
        "machine as the server; the folder and the bulk load go direct (MEMPALACE_PG_SESSION_DSN). "
        f"{meta['drawers']:,} drawers of 384 dimensions, the same in MemPalace's Chroma backend.",
        "",
        "| ms | direct | through PgBouncer | PgBouncer / direct | Chroma |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Concurrent units of work (a drawer and two facts each, one transaction): direct "
        f"{d['writers']['units_per_s']:.0f}/s, through PgBouncer {p['writers']['units_per_s']:.0f}/s "
        f"({p['writers']['units_per_s'] / d['writers']['units_per_s']:.2f}×), "
        f"{d['writers']['units']:,} units each, every one stored once (checked). "
        f"Direct, the {meta['writers']} processes hold up to {meta['writers']} server connections; "
        "through PgBouncer they share 3.",
        "",
        f"Bulk load of the palace: postgres {r['load_s']['postgres']:.1f} s, "
        f"Chroma {r['load_s']['chroma']:.1f} s. "
        f"Searches per cell: {meta['process_runs']} new processes, 200 warm queries.",
    ]
    return "\n".join(lines) + "\n"


def count_units(dsn: str, key: str) -> int:
    from mempalace_pg.atomic import open_drawers
    from mempalace_pg.db import pool

    os.environ["MEMPALACE_PG_DSN"] = dsn
    drawers, kg = open_drawers(palace_key=key, create=False)
    try:
        return drawers.count()
    finally:
        kg.close()
        pool.close_all()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drawers", type=int, default=20000)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--units", type=int, default=100)
    ap.add_argument("--process-runs", type=int, default=15)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    stack = os.environ.get("MEMPALACE_PG_STACK", "trixie")
    direct = common.provisioned_dsn()
    pooled = pooler_dsn(stack)
    tag = f"pooler_{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix="mpbench_pooler_"))
    os.environ["MEMPALACE_CONFIG_DIR"] = str(work / "config")
    os.environ["MEMPALACE_PG_SESSION_DSN"] = direct
    centers = common.cluster_centers()
    results: dict = {"load_s": {}}
    try:
        for name in ("postgres", "chroma"):
            palace = str(work / name / "palace")
            results["load_s"][name] = load(name, palace, direct, tag, args.drawers, centers)
        from mempalace_pg.db import pool

        pool.close_all()
        # the folder and the load are done: wait for the index, so both sides search the same segments
        backend, col = common.open_collection("postgres", str(work / "postgres" / "palace"), direct, tag)

        col.partition.index.settle(timeout=600)
        backend.close()
        pool.close_all()
        for label, dsn in (("direct", direct), ("pooler", pooled)):
            env = {**os.environ, "MEMPALACE_PG_DSN": dsn, "MEMPALACE_PG_SCHEMA": f"bench_{tag}"}
            palace = str(work / "postgres" / "palace")
            os.environ["MEMPALACE_PG_DSN"] = dsn
            results[label] = {
                "process": search_process("postgres", palace, env, tag, args.process_runs),
                "warm": warm_search("postgres", palace, dsn, tag, centers),
                "writers": writers(env, args.writers, args.units),
            }
            pool.close_all()
            stored = count_units(direct, results[label]["writers"]["key"])
            if stored != args.writers * args.units:
                raise SystemExit(f"{label}: {stored} units stored of {args.writers * args.units}")
            results[label]["writers"]["stored"] = stored
        chroma_palace = str(work / "chroma" / "palace")
        results["chroma"] = {
            "process": search_process("chroma", chroma_palace, dict(os.environ), tag, args.process_runs),
            "warm": warm_search("chroma", chroma_palace, direct, tag, centers),
        }
    finally:
        common.cleanup("postgres", direct, tag, None)
        shutil.rmtree(work, ignore_errors=True)
    with __import__("psycopg").connect(pooled.rsplit("/", 1)[0] + "/pgbouncer", autocommit=True) as admin:
        pgbouncer = admin.execute("SHOW VERSION").fetchone()[0].replace("PgBouncer ", "")
    meta = common.run_meta(
        direct,
        drawers=args.drawers,
        writers=args.writers,
        units=args.units,
        process_runs=args.process_runs,
        pgbouncer=pgbouncer,
    )
    common.save_run("bench_pooler", meta, results, render(results, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
