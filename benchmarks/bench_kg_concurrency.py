"""Knowledge-graph writes from many processes at once: AGE against MemPalace's SQLite graph, one run.

W writer processes (default 8) start together on one graph and each runs the same mix, as agents filing
facts do: ``add_triple`` of new facts, and after every fourth one an ``invalidate`` of one of its own
earlier facts and a ``query_entity`` of its writer entity. Per backend: aggregate facts/s (facts added by
all processes over the wall time from the common start to the last one's end), p50/p95 of each call,
errors, and afterwards every fact counted (none lost, none twice). MemPalace's SQLite graph serializes
writers on its file lock; AGE commits each call durably (``synchronous_commit`` stays on: nothing is
traded for speed here).

Alongside, in the same run: one process alone (``add_triple`` p50) against the durable-commit floor of
this server (a one-row INSERT committed and flushed, from bench_kg.write_floor), the bound on any single
durable write from Python.

    python benchmarks/bench_kg_concurrency.py [--writers 8] [--facts 400] [--no-write]

PostgreSQL is the provisioned server (MEMPALACE_PG_STACK, default trixie). The report replaces this
benchmark's section of RESULTS.md; raw figures go to out/bench_kg_concurrency.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import bench_kg
import common

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = r"""
import json, sys, time
backend, where = sys.argv[1], sys.argv[5]
worker, facts, start = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
if backend == "age":
    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    kg = AgeKnowledgeGraph(palace_key=where)
else:
    from mempalace_pg.graph.routing import sqlite_class
    kg = sqlite_class()(where)
kg.query_entity("warm up")  # connect (and open the pool) before the common start
out = {"add": [], "invalidate": [], "query": [], "errors": {}}
def timed(key, fn):
    t = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # counted and reported, never hidden
        name = type(exc).__name__ + ": " + str(exc).splitlines()[0][:80]
        out["errors"][name] = out["errors"].get(name, 0) + 1
        return False
    out[key].append((time.perf_counter() - t) * 1000)
    return True
while time.time() < start:
    time.sleep(0.001)
t0 = time.time()
me = f"Writer {worker}"
for i in range(facts):
    timed("add", lambda: kg.add_triple(me, "filed", f"Fact {worker}-{i}", valid_from="2026-12-01"))
    if i % 4 == 3:
        j = i - 3
        timed("invalidate", lambda: kg.invalidate(me, "filed", f"Fact {worker}-{j}", ended="2026-12-02"))
        timed("query", lambda: kg.query_entity(me))
out["seconds"] = time.time() - t0
out["end"] = time.time()
kg.close()
print(json.dumps(out))
"""


def run_writers(backend: str, where: str, writers: int, facts: int, env: dict) -> dict:
    start = time.time() + 3.0 + 0.3 * writers  # every process imported and connected by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, backend, str(w), str(facts), repr(start), where],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"{backend} writer failed: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["end"] for r in results) - start
    merged: dict = {"errors": {}}
    for key in ("add", "invalidate", "query"):
        xs = [x for r in results for x in r[key]]
        merged[key] = {**common.summary(xs), "done": len(xs)} if xs else {"done": 0}
    for r in results:
        for name, count in r["errors"].items():
            merged["errors"][name] = merged["errors"].get(name, 0) + count
    merged["wall_s"] = wall
    merged["facts_per_s"] = merged["add"]["done"] / wall
    return merged


class WaitSampler:
    """Where the writers' server backends are, sampled from pg_stat_activity every ``every_s`` while a run
    lasts: each non-idle backend of the plugin (application_name ``mempalace-pg``) counts once per sample,
    under its wait event (``running`` when it waits for nothing: on the CPU, or in a state PostgreSQL does
    not name). PostgreSQL's own evidence of what the time under many writers goes to."""

    def __init__(self, dsn: str, every_s: float = 0.005):
        import threading

        self.dsn, self.every_s, self.counts = dsn, every_s, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                for state, kind, event in conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE application_name = 'mempalace-pg' AND state <> 'idle' AND pid <> pg_backend_pid()"
                ):
                    key = f"{kind}:{event}" if kind else ("running" if state == "active" else state)
                    self.counts[key] = self.counts.get(key, 0) + 1
                time.sleep(self.every_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def shares(self) -> dict:
        total = sum(self.counts.values()) or 1
        return {k: round(v / total, 3) for k, v in sorted(self.counts.items(), key=lambda kv: -kv[1])}


def server_counters(dsn: str) -> dict:
    """Cumulative counters that say how commits met the WAL: PostgreSQL's WAL flushes and writes
    (pg_stat_wal; the flush time where the writers set track_wal_io_timing) and the database's commits."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        sync, write, sync_ms = conn.execute(
            "SELECT wal_sync, wal_write, wal_sync_time FROM pg_stat_wal"
        ).fetchone()
        commits = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
    return {"wal_sync": sync, "wal_write": write, "wal_sync_ms": float(sync_ms), "commits": commits}


def cpu_busy() -> tuple:
    """The machine's CPU time so far (busy, total) in clock ticks, from /proc/stat."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def count_facts(backend: str, where: str, writers: int) -> dict:
    """Facts stored per writer entity, after the run: open and closed, as MemPalace's API returns them."""
    if backend == "age":
        from mempalace_pg.graph.kg import AgeKnowledgeGraph

        kg = AgeKnowledgeGraph(palace_key=where)
    else:
        from mempalace_pg.graph.routing import sqlite_class

        kg = sqlite_class()(where)
    try:
        stored, closed, distinct = 0, 0, set()
        for w in range(writers):
            rows = kg.query_entity(f"Writer {w}")
            stored += len(rows)
            closed += sum(1 for r in rows if not r.get("current", r.get("valid_to") is None))
            distinct.update(r["object"] for r in rows)
        return {"stored": stored, "distinct": len(distinct), "closed": closed}
    finally:
        kg.close()


def single_call_parts(kg, n: int = 400) -> dict:
    """Where one process's add_triple time goes, p50 ms: its wall time and this process's CPU per call
    (argument checks, psycopg, the pool), and PostgreSQL's execution of the statement by EXPLAIN ANALYZE
    (the function's work on the graph; parse, plan and the commit's WAL flush excluded). What is left of
    the wall time is the round trip and the durable commit, which the floor measures."""
    from mempalace_pg.config import Settings
    from mempalace_pg.graph.statements import statements
    from mempalace_pg.graph.values import entity_id_of, predicate_key

    walls, cpus = [], []
    for i in range(n):
        w, c = time.perf_counter(), time.process_time()
        kg.add_triple("Parts", "filed", f"Part {i}", valid_from="2026-12-01")
        walls.append((time.perf_counter() - w) * 1000)
        cpus.append((time.process_time() - c) * 1000)
    settings = Settings.load()  # the graph kg writes: this process's schema
    explain = (
        "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + statements(settings.schema, settings.graph).add_triple
    )
    execs = []
    for i in range(n):
        params = {
            "sub": entity_id_of("Explained"),
            "sub_name": "Explained",
            "pred": predicate_key("filed"),
            "obj": entity_id_of(f"Explained {i}"),
            "obj_name": f"Explained {i}",
            "triple_id": f"t_explained_{i}_{uuid.uuid4().hex[:8]}",
            "valid_from": "2026-12-01",
            "valid_to": None,
            "confidence": 1.0,
            "source_closet": None,
            "source_file": None,
            "source_drawer_id": None,
            "adapter_name": None,
        }
        plan = kg.run(lambda conn, palace: conn.execute(explain, {"palace": palace, **params}).fetchone()[0])
        execs.append(plan[0]["Execution Time"])
    return {
        "wall": common.summary(walls),
        "client_cpu": common.summary(cpus),
        "server_execution": common.summary(execs),
    }


def cell(x, key):
    return f"{x[key]['p50']:.2f} / {x[key]['p95']:.2f}" if x[key].get("done") else "—"


def errors(x):
    return "; ".join(f"{n}× {e}" for e, n in x["errors"].items()) or "none"


def render_run(run: dict, meta: dict) -> list:
    """One graph size: the table, where the AGE writers waited, how their commits met the WAL."""
    age, lite, w = run["age"], run["sqlite"], meta["writers"]
    ratio = age["facts_per_s"] / lite["facts_per_s"] if lite["facts_per_s"] else float("inf")
    lines = [
        f"### {w} writers on a graph of {run['preload']:,} facts",
        "",
        "| | AGE (mempalace-pg) | MemPalace's SQLite graph |",
        "|---|---|---|",
        f"| aggregate facts/s, {w} processes | {age['facts_per_s']:,.0f} | {lite['facts_per_s']:,.0f} |",
        f"| AGE / SQLite | {ratio:.1f}× | |",
        f"| add_triple p50 / p95 ms | {cell(age, 'add')} | {cell(lite, 'add')} |",
        f"| invalidate p50 / p95 ms | {cell(age, 'invalidate')} | {cell(lite, 'invalidate')} |",
        f"| query_entity p50 / p95 ms | {cell(age, 'query')} | {cell(lite, 'query')} |",
        f"| calls that failed | {errors(age)} | {errors(lite)} |",
        f"| facts stored afterwards (expected {w * meta['facts']:,}) | {run['age_count']['stored']:,} "
        f"({run['age_count']['distinct']:,} distinct) | {run['sqlite_count']['stored']:,} "
        f"({run['sqlite_count']['distinct']:,} distinct) |",
    ]
    waits = run.get("age_waits")
    if waits and waits["samples"]:
        top = ", ".join(f"{k} {v:.0%}" for k, v in list(waits["shares"].items())[:6])
        lines += [
            "",
            f"Where AGE's {w} writers' server backends were while they ran (pg_stat_activity sampled every "
            f"5 ms, {waits['samples']:,} backend samples, non-idle only; `running` is on the CPU or "
            f"unnamed): {top}.",
        ]
    server = run.get("age_server")
    if server and server["wal_sync"]:
        flush = (
            f", {server['wal_sync_ms'] / server['wal_sync']:.3f} ms a flush on average"
            if server["wal_sync_ms"]
            else ""
        )
        busy = server["wal_sync_ms"] / 1000 / age["wall_s"] if server["wal_sync_ms"] else None
        lines += [
            "",
            "How the commits met the WAL while they ran (pg_stat_wal and pg_stat_database, before and "
            f"after): {server['commits']:,} commits (reads included), {server['wal_sync']:,} WAL flushes "
            f"({server['commits'] / server['wal_sync']:.2f} commits a flush){flush}"
            + (f", a flush in progress {busy:.0%} of the run" if busy is not None else "")
            + f"; the machine's 2 CPUs were {run['age_cpu_busy']:.0%} busy (/proc/stat, writers and server "
            "together).",
        ]
    return lines


def render(r: dict, meta: dict) -> str:
    w = meta["writers"]
    floor = r["floor"]
    single = r["single"]["add"]["p50"]
    sizes = " ".join(str(x) for x in meta["preload"])
    lines = [
        f"## Knowledge-graph writes from {w} processes at once: AGE against SQLite ({meta['when']})",
        "",
        f"`python benchmarks/bench_kg_concurrency.py --writers {w} --facts {meta['facts']} "
        f"--preload {sizes}` on {meta['machine']}; "
        f"{meta['versions']}. Each process: {meta['facts']} `add_triple` (each to a new object entity), and "
        "after every fourth an `invalidate` of one of its own facts and a `query_entity` of its subject, all "
        "starting together on one graph already holding the given number of facts (bench_kg's data). AGE "
        "commits every call durably (synchronous_commit on).",
        "",
    ]
    for run in r["runs"]:
        lines += render_run(run, meta) + [""]
    lines += [
        f"One process alone: AGE `add_triple` p50 {single:.3f} ms against this server's durable-commit floor "
        f"{floor['durable_commit']:.3f} ms (a one-row INSERT committed and flushed; a bare round trip "
        f"{floor['round_trip']:.3f} ms): {single / floor['durable_commit']:.2f}× the floor.",
    ]
    parts = r.get("parts")
    if parts:
        wall, cpu, exe = (parts[k]["p50"] for k in ("wall", "client_cpu", "server_execution"))
        budget = 1.5 * floor["durable_commit"]
        lines += [
            "",
            f"Where that time goes, p50 ms over {parts['wall']['n']} calls in one process: "
            f"wall {wall:.3f}; of it, this process's CPU {cpu:.3f} (argument checks, psycopg, the pool) "
            f"and PostgreSQL executing the statement {exe:.3f} (EXPLAIN ANALYZE: finding or creating both "
            "entities, the open-fact check, the insert into the graph); the rest, the round trip and the "
            f"durable commit, {max(wall - cpu - exe, 0):.3f}. The floor has no client work and almost no "
            f"execution: within 1.5× of it ({budget:.3f}) leaves {budget - floor['durable_commit']:.3f} "
            "for both.",
        ]
    return "\n".join(lines) + "\n"


def run_size(preload: int, args, dsn: str, env: dict, work: Path) -> dict:
    """The writers of both stores on a graph already holding ``preload`` facts (bench_kg's data)."""
    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.graph.routing import sqlite_class

    run: dict = {"preload": preload}
    key = f"kgc-team-{preload}"
    entities, triples = (
        bench_kg.make_rows(preload, n_entities=bench_kg.entities_for(preload)) if preload else ([], [])
    )
    kg = AgeKnowledgeGraph(palace_key=key)
    kg.query_entity("create the palace")
    if preload:
        bench_kg.load_age(kg, entities, triples)
    kg.close()
    before, cpu0 = server_counters(dsn), cpu_busy()
    timing = {**env, "PGOPTIONS": (env.get("PGOPTIONS", "") + " -c track_wal_io_timing=on").strip()}
    with WaitSampler(dsn) as sampler:
        run["age"] = run_writers("age", key, args.writers, args.facts, timing)
    cpu1 = cpu_busy()
    time.sleep(1.5)  # backends report their statistics at most once a second
    after = server_counters(dsn)
    run["age_server"] = {k: after[k] - before[k] for k in after}
    run["age_cpu_busy"] = round((cpu1[0] - cpu0[0]) / max(cpu1[1] - cpu0[1], 1), 3)
    run["age_waits"] = {"samples": sum(sampler.counts.values()), "shares": sampler.shares()}
    run["age_count"] = count_facts("age", key, args.writers)
    sqlite_path = str(work / f"knowledge_graph_{preload}.sqlite3")
    lite = sqlite_class()(sqlite_path)
    if preload:
        bench_kg.load_sqlite(lite, entities, triples)
    lite.close()
    run["sqlite"] = run_writers("sqlite", sqlite_path, args.writers, args.facts, env)
    run["sqlite_count"] = count_facts("sqlite", sqlite_path, args.writers)
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--facts", type=int, default=400)
    ap.add_argument(
        "--preload",
        type=int,
        nargs="+",
        default=[0],
        help="facts loaded into both graphs before the writers start (bench_kg's data), so they write to a "
        "graph of that size; one run per size given",
    )
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    dsn = common.provisioned_dsn()
    schema = f"bench_kgc_{uuid.uuid4().hex[:6]}"
    work = Path(tempfile.mkdtemp(prefix="mpbench_kgc_"))
    env = {
        **os.environ,
        "MEMPALACE_PG_DSN": dsn,
        "MEMPALACE_PG_SCHEMA": schema,
        "MEMPALACE_CONFIG_DIR": str(work / "config"),
    }
    os.environ.update(env)
    result: dict = {}
    try:
        from mempalace_pg.graph.kg import AgeKnowledgeGraph

        single_key = "kgc-single"
        kg = AgeKnowledgeGraph(palace_key=single_key)
        kg.query_entity("create the palace")
        kg.close()
        result["single"] = run_writers("age", single_key, 1, args.facts, env)
        kg = AgeKnowledgeGraph(palace_key=single_key)
        result["floor"] = bench_kg.write_floor(kg)
        result["parts"] = single_call_parts(kg)
        kg.close()
        result["runs"] = []
        for preload in args.preload:
            print(
                f"[bench_kg_concurrency] {args.writers} writers on a graph of {preload:,} facts",
                file=sys.stderr,
            )
            result["runs"].append(run_size(preload, args, dsn, env, work))
    finally:
        from mempalace_pg.db import pool

        pool.close_all()
        bench_kg.fresh_schema(dsn, schema)
    meta = common.run_meta(dsn, writers=args.writers, facts=args.facts, preload=list(args.preload))
    common.save_run("bench_kg_concurrency", meta, result, render(result, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
