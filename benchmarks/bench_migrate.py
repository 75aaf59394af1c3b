"""Benchmark: `mempalace-pg migrate` of a Chroma palace with its SQLite graph, against this backend's own
bulk ingest of the same drawers, in one run; memory of the migrating process at two palace sizes.

    python benchmarks/bench_migrate.py                     # 25k and 100k drawers (50k triples at 100k)
    python benchmarks/bench_migrate.py --sizes 5000 --no-write

Each migration runs `mempalace-pg migrate` in its own process (peak RSS: its VmHWM). The baseline
is `bulk_load` of the same generated drawers (bench_backends.py's data) into a fresh postgres palace.
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
from bench_retrieval import make_facts, report_head, report_options, save_and_report

HERE = Path(__file__).resolve().parent


def build_chroma(path: Path, n: int, triples: int) -> float:
    from bench_kg import load_sqlite
    from mempalace.backends import PalaceRef
    from mempalace.backends.chroma import ChromaBackend

    from mempalace_pg.graph.routing import sqlite_class

    t0 = time.perf_counter()
    backend = ChromaBackend()
    col = backend.get_collection(
        palace=PalaceRef(id=str(path), local_path=str(path)), collection_name="mempalace_drawers", create=True
    )
    centers = common.cluster_centers()
    for start in range(0, n, common.BATCH):
        ids, docs, metas, vecs = common.batch_data(start, min(common.BATCH, n - start), centers)
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    backend.close()
    ids = [common.drawer_id(i) for i in range(n)]
    entities, facts = make_facts(triples, max(1000, triples // 2), ids)
    kg = sqlite_class()(str(path / "knowledge_graph.sqlite3"))
    load_sqlite(kg, entities, facts)
    kg.close()
    return time.perf_counter() - t0


def bulk_baseline(n: int, dsn: str) -> float:
    """Seconds for this backend's own bulk load of the same n drawers (index build included)."""
    code = f"""
import os, sys, time
sys.path.insert(0, {str(HERE)!r}); sys.path.insert(0, {str(HERE.parent)!r})
import common
palace = {tempfile.mkdtemp(prefix="mpbench_bulk_")!r} + "/p"
backend, col = common.open_collection("postgres", palace, {dsn!r}, "mig_bulk_{uuid.uuid4().hex[:6]}")
centers = common.cluster_centers()
t0 = time.perf_counter()
with col.bulk_load() as load:
    for start in range(0, {n}, common.BATCH):
        ids, docs, metas, vecs = common.batch_data(start, min(common.BATCH, {n} - start), centers)
        load(ids=ids, documents=docs, metadatas=metas, embeddings=vecs)
print(time.perf_counter() - t0)
common.cleanup("postgres", {dsn!r}, os.environ["MEMPALACE_PG_SCHEMA"][6:], col)
"""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "MEMPALACE_CONFIG_DIR": tempfile.mkdtemp()},
    )
    return float(proc.stdout.strip().splitlines()[-1])


def chroma_reader_rss(path: Path) -> float:
    """Peak RSS (MB) of a process that only opens the Chroma palace through MemPalace and reads one page:
    the share of migration memory that is Chroma's own reader."""
    code = (
        "from mempalace.backends.chroma import ChromaBackend\nfrom mempalace.backends import PalaceRef\n"
        f"col = ChromaBackend().get_collection(palace=PalaceRef(id={str(path)!r}, local_path={str(path)!r}), "
        "collection_name='mempalace_drawers', create=False, options={'read_only': True})\n"
        "col.get(limit=1000, offset=0, include=['documents', 'metadatas', 'embeddings'])\n"
        "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1])"
    )
    snapshot = Path(tempfile.mkdtemp(prefix="mpbench_chroma_")) / "p"
    shutil.copytree(path, snapshot)  # Chroma rewrites files it opens: read a copy, as migrate does
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        return int(out.strip().splitlines()[-1]) / 1024
    finally:
        shutil.rmtree(snapshot.parent, ignore_errors=True)


def run_size(n: int, triples: int, dsn: str) -> dict:
    import psycopg

    work = Path(tempfile.mkdtemp(prefix="mpbench_mig_"))
    schema = f"mig_{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        "MEMPALACE_PG_DSN": dsn,
        "MEMPALACE_PG_SCHEMA": schema,
        "MEMPALACE_CONFIG_DIR": str(work / "config"),
    }
    try:
        print(
            f"[bench_migrate] building a {n:,}-drawer Chroma palace with {triples:,} triples ...",
            file=sys.stderr,
            flush=True,
        )
        build_s = build_chroma(work / "chroma", n, triples)
        # Peak RSS from /proc (VmHWM), not getrusage: ru_maxrss survives exec, so a child would inherit
        # the parent's peak (this script's own, which grows with the palace it built).
        wrapper = (
            "import sys, runpy; sys.argv = ['mempalace-pg'] + sys.argv[1:];\n"
            "try:\n    runpy.run_module('mempalace_pg.cli', run_name='__main__')\n"
            "finally:\n    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]\n"
            "    print('RSS_MB', int(hwm.split()[1]) / 1024, file=sys.stderr)"
        )
        t0 = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                wrapper,
                "migrate",
                "--from",
                str(work / "chroma"),
                "--to",
                str(work / "pg"),
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        report = json.loads(proc.stdout)
        rss = float([line for line in proc.stderr.splitlines() if line.startswith("RSS_MB")][-1].split()[1])
        drawers_s = report["collections"]["mempalace_drawers"]["seconds"]
        graph_s = report["graph"]["seconds"]
        print(
            f"[bench_migrate] migrated in {wall:.1f} s; baseline bulk load ...", file=sys.stderr, flush=True
        )
        bulk_s = bulk_baseline(n, dsn)
        return {
            "drawers": n,
            "triples": triples,
            "chroma_build_s": round(build_s, 1),
            "wall_s": round(wall, 1),
            "drawers_s": drawers_s,
            "drawers_per_s": n / drawers_s,
            "graph_s": graph_s,
            "triples_per_s": triples / graph_s if graph_s else None,
            "bulk_s": round(bulk_s, 1),
            "bulk_per_s": n / bulk_s,
            "rss_mb": rss,
            "chroma_reader_rss_mb": chroma_reader_rss(work / "chroma"),
            "ok": report["ok"],
            "sampled": report["sampled"],
            "reader": report.get("reader", {}).get("mempalace_drawers", "chroma"),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
                (f"{schema}_kg",),
            )


def render(report: dict) -> str:
    v = report["versions"]
    lines = [
        f"## Migrating a Chroma palace into PostgreSQL — {report['date']}",
        "",
        f"PostgreSQL {v['postgresql']}, pgvector {v['pgvector']}, AGE {v['age']}, MemPalace "
        f"{v['mempalace']}, "
        f"chromadb {v['chromadb']}, {v['cpus']} CPUs. Command: `{report['command']}`. `mempalace-pg "
        "migrate` in "
        "its own process (its peak RSS), against this backend's own bulk load of the same drawers in the "
        "same "
        "run (target: migration drawer throughput at least half of it; memory flat as the palace grows). "
        "The whole "
        "command also copies the Chroma files to a snapshot, imports the graph and verifies.",
        "",
        "| drawers | triples | migrate: drawers/s (s) | triples/s (s) | whole command, s | bulk load: "
        "drawers/s (s) "
        "| ratio | peak RSS MB | read from | Chroma's own reader alone, MB | verified |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["runs"]:
        lines.append(
            f"| {r['drawers']:,} | {r['triples']:,} | {r['drawers_per_s']:,.0f} ({r['drawers_s']}) | "
            f"{r['triples_per_s']:,.0f} ({r['graph_s']}) | {r['wall_s']} | "
            f"{r['bulk_per_s']:,.0f} ({r['bulk_s']}) | "
            f"{r['drawers_per_s'] / r['bulk_per_s']:.2f} | {r['rss_mb']:.0f} | "
            f"{'Chroma files' if r.get('reader', 'chroma') == 'files' else 'Chroma reader'} | "
            f"{r.get('chroma_reader_rss_mb', float('nan')):.0f} | "
            f"{'yes' if r['ok'] else 'NO'} ({r['sampled']} sampled) |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="25000,100000")
    report_options(ap, "bench_migrate")
    args = ap.parse_args()

    def make_report():
        dsn = common.provisioned_dsn()
        sizes = [int(x) for x in args.sizes.split(",")]
        return {**report_head(dsn, "bench_migrate"), "runs": [run_size(n, n // 2, dsn) for n in sizes]}

    return save_and_report(args, make_report, render)


if __name__ == "__main__":
    raise SystemExit(main())
