"""The index folder under faults at 100,000 and 1,000,000 drawers: from the fault to a settled palace.

    python benchmarks/bench_folder_faults.py [--sizes 100000,1000000] [--rows 20000]
                                             [--faults kill,terminate,restart] [--no-write]

For each size, a fresh clone of the kept palace (benchmarks/kept_palaces.py: quiet, its segments built)
and, for each fault in turn on that clone:

1. ``--rows`` new drawers are written through MemPalace's collection API (``upsert``, batches of 1,000)
   with no folder running (``MEMPALACE_PG_FOLDER=off``), then a folder is started as a write starts one;
2. once its build of those rows has run for a second, the fault: ``kill`` (SIGKILL to the folder),
   ``terminate`` (``pg_terminate_backend`` of its session) or ``restart`` (the server restarted, fast
   mode);
3. measured: how long the build ran on (until its backend is gone), how long the folder took to exit,
   then, with no write, one search from a new process (the collection API, a drawer's own vector:
   what any ``mempalace search`` does first), and the time from the fault until the palace is settled
   (no row waits for the index, no INVALID or unregistered segment index), and whether a sample of the
   new drawers is each found by its own vector afterwards.

PostgreSQL is the provisioned server (MEMPALACE_PG_STACK, default trixie): ``restart`` restarts it with
scripts/provision-postgres.sh. The report replaces this benchmark's section of RESULTS.md; raw figures
go to out/bench_folder_faults.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common
import kept_palaces
import psycopg

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEMA = kept_palaces.SCHEMA

WRITE = """
import sys
from skewed_palace import SkewedPalace  # first: importing mempalace takes this folder off sys.path
from mempalace.palace import get_collection
palace_dir, start, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
col = get_collection(palace_dir, create=False, backend="postgres")
source = SkewedPalace(start + rows)
for at in range(start, start + rows, 1000):
    ids, docs, metas, vecs = source.batch(at, 1000)
    col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
"""

SEARCH = """
import json, sys, time
from skewed_palace import SkewedPalace  # first: importing mempalace takes this folder off sys.path
from mempalace.palace import get_collection
palace_dir, first, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
from mempalace_pg.store.collection import PostgresCollection
col = get_collection(palace_dir, create=False, backend="postgres")
while not isinstance(col, PostgresCollection):  # MemPalace may hand out a wrapper
    col = col._inner
source = SkewedPalace(first + rows)
picks = list(range(first, first + rows, max(1, rows // int(sys.argv[4]))))
found, times = 0, []
for i in picks:
    ids, _, _, vecs = source.batch(i, 1)
    t = time.perf_counter()
    got = col.query(query_embeddings=[vecs[0].tolist()], n_results=1).ids[0]
    times.append(time.perf_counter() - t)
    found += got == list(ids)
print(json.dumps({"found": found, "of": len(picks), "first_s": times[0]}))
"""


def collection_pk(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            f"SELECT collection_pk FROM {SCHEMA}.collections WHERE name = 'mempalace_drawers'"
        ).fetchone()[0]


def state(conn, pk: int) -> tuple[int, int, int, int]:
    """(rows waiting for the index, unregistered segment indexes, INVALID indexes, young segments) of the
    collection."""
    from mempalace_pg.engine import indexing

    top = conn.execute(
        f"SELECT COALESCE(max(hi), -1) FROM {SCHEMA}.vector_segments WHERE collection_pk = %s", (pk,)
    ).fetchone()[0]
    tail = conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.records_c{pk} WHERE vector_seq > %s", (top,)
    ).fetchone()[0]
    invalid = conn.execute(
        "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT i.indisvalid",
        (SCHEMA,),
    ).fetchone()[0]
    young = conn.execute(
        f"SELECT count(*) FROM {SCHEMA}.vector_segments WHERE collection_pk = %s AND young", (pk,)
    ).fetchone()[0]
    return tail, len(indexing.orphan_indexes(conn, SCHEMA, pk)), invalid, young


def building(conn) -> tuple | None:
    from mempalace_pg.engine import indexing

    return conn.execute(
        "SELECT pid, extract(epoch FROM now() - query_start)::float FROM pg_stat_activity "
        "WHERE application_name = %s AND state = 'active' AND backend_type = 'client backend' "
        "AND query ILIKE 'CREATE INDEX%%'",
        (indexing.folder_application_name(SCHEMA),),
    ).fetchone()


def no_folder(dsn: str, timeout: float = 120) -> None:
    """Wait until no folder of the schema is connected."""
    from mempalace_pg.engine import indexing

    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = %s",
            (indexing.folder_application_name(SCHEMA),),
        ).fetchone():
            if time.monotonic() > deadline:
                raise RuntimeError("a folder is still connected after 120 s")
            time.sleep(0.5)


def one_fault(fault: str, *, palace_dir: Path, env: dict, dsn: str, pk: int, first: int, rows: int) -> dict:
    from mempalace_pg.engine import indexing

    quiet = {**env, "MEMPALACE_PG_FOLDER": "off"}
    no_folder(dsn)  # the last round's folder lingers a while once idle: it would take these rows
    t0 = time.monotonic()
    common.run_code(WRITE, str(palace_dir), str(first), str(rows), env=quiet, timeout=1800)
    result = {"fault": fault, "rows": rows, "write_s": round(time.monotonic() - t0, 1)}
    folder = subprocess.Popen(
        [sys.executable, "-m", "mempalace_pg.engine.folder", SCHEMA, str(pk)],
        env={**env, indexing.DSN_VARIABLE: dsn},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            deadline = time.monotonic() + 600
            seen = None
            while time.monotonic() < deadline and folder.poll() is None:
                seen = building(conn)
                if seen and seen[1] >= 1.0:
                    break
                time.sleep(0.05)
            if not (seen and seen[1] >= 1.0):
                raise RuntimeError(f"no folder build ran for a second (folder exit {folder.poll()})")
            fault_at = time.monotonic()
            if fault == "kill":
                os.killpg(folder.pid, signal.SIGKILL)
            elif fault == "terminate":
                conn.execute("SELECT pg_terminate_backend(%s)", (seen[0],))
        if fault == "restart":
            stack = os.environ.get("MEMPALACE_PG_STACK", "trixie")
            subprocess.run(
                ["bash", str(ROOT / "scripts" / "provision-postgres.sh"), "restart"],
                env={**os.environ, "MEMPALACE_PG_STACK": stack},
                check=True,
                capture_output=True,
                timeout=300,
            )
        with psycopg.connect(dsn, autocommit=True) as conn:
            while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (seen[0],)).fetchone():
                time.sleep(0.05)
            result["build_ran_on_s"] = round(time.monotonic() - fault_at, 2)
        folder.wait(timeout=120)
        result["folder_exited_s"] = round(time.monotonic() - fault_at, 2)
    finally:
        if folder.poll() is None:
            os.killpg(folder.pid, signal.SIGKILL)
        folder.wait()
    with psycopg.connect(dsn, autocommit=True) as conn:
        result["left_after_fault"] = dict(zip(("waiting", "unregistered", "invalid"), state(conn, pk)))
    found = json.loads(common.run_code(SEARCH, str(palace_dir), str(first), str(rows), "1", env=env))
    result["first_search_s"] = round(found["first_s"], 3)
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            now = state(conn, pk)
            if now == (0, 0, 0, 0) and building(conn) is None:
                result["settled_s"] = round(time.monotonic() - fault_at, 1)
                break
            if time.monotonic() - fault_at > 1800:
                result["settled_s"] = None
                result["still"] = now
                break
            time.sleep(0.5)
    found = json.loads(common.run_code(SEARCH, str(palace_dir), str(first), str(rows), "50", env=env))
    result["found"] = f"{found['found']}/{found['of']}"
    return result


def render(results: dict, meta: dict) -> str:
    lines = [
        "## The index folder under faults: from the fault to a settled palace",
        "",
        f"`{meta['command']}` ({meta['when']}, {meta['machine']}, {meta['versions']}).",
        "Each size a fresh clone of the kept palace (quiet, bulk-loaded); per fault, in turn on that clone:",
        "new drawers written through `upsert` with no folder, a folder started, and once its build of them",
        "had run a second: SIGKILL to the folder (`kill`), `pg_terminate_backend` of its session",
        "(`terminate`), or the server restarted (`restart`, pg_ctl fast mode). Then, with no write, one",
        "search from a new process (*first search*: that query's own time). *Settled*: no row waits for the",
        "index, no INVALID or unregistered index remains, no segment is young (built quickly under writes,",
        "to be rebuilt) and no build runs, timed from the fault. *Left*: rows",
        "waiting / unregistered segment indexes / INVALID indexes right after the fault. *Found*: new",
        "drawers each found first by their own vector, afterwards.",
        "",
        "| drawers | fault | new rows | build ran on | folder exited | left | first search | settled "
        "| found |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, runs in results.items():
        for r in runs:
            left = r["left_after_fault"]
            settled = (
                f"{r['settled_s']:.1f} s"
                if r.get("settled_s") is not None
                else f"not in 30 min ({r.get('still')})"
            )
            lines.append(
                f"| {int(size):,} | {r['fault']} | {r['rows']:,} | {r['build_ran_on_s']:.2f} s | "
                f"{r['folder_exited_s']:.2f} s | "
                f"{left['waiting']:,} / {left['unregistered']} / {left['invalid']} | "
                f"{r['first_search_s'] * 1000:.0f} ms | {settled} | {r['found']} |"
            )
    lines += [
        "",
        "The build stops within about a second of its folder's death (the server checks the client every "
        "second while a CREATE INDEX runs); a folder whose session was ended or whose server restarted exits "
        "at once; the next search starts the folder that builds the rows again and drops what the dead one "
        "left. *Settled* is mostly that rebuild. *Found* counts a drawer whose own vector's first answer is",
        "another drawer as not found: the rows are all in the index then (none waits), and such misses are",
        "the approximate vector index's on this clustered palace (they vary from one build to the next).",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--faults", default="kill,terminate,restart")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    dsn = common.provisioned_dsn()
    sizes = [int(s) for s in args.sizes.split(",")]
    faults = args.faults.split(",")
    results: dict = {}
    out = HERE / "out" / "bench_folder_faults.partial.json"
    with tempfile.TemporaryDirectory(prefix="mpfaults-") as work:
        for size in sizes:
            results[str(size)] = []
            with kept_palaces.clone("postgres", size, dsn, Path(work), f"faults{os.getpid()}") as (
                palace,
                env,
                rdsn,
            ):
                pk = collection_pk(rdsn)
                first = size
                for fault in faults:
                    r = one_fault(
                        fault, palace_dir=palace, env=env, dsn=rdsn, pk=pk, first=first, rows=args.rows
                    )
                    first += args.rows
                    results[str(size)].append(r)
                    out.write_text(json.dumps(results, indent=1))  # each figure on disk as measured
                    print(size, r, flush=True)
    command = (
        "python benchmarks/bench_folder_faults.py"
        + (f" --sizes {args.sizes}" if args.sizes != "100000,1000000" else "")
        + (f" --rows {args.rows}" if args.rows != 20_000 else "")
    )
    meta = common.run_meta(dsn, command=command, sizes=sizes, rows=args.rows, faults=faults)
    common.save_run("bench_folder_faults", meta, results, render(results, meta), write=not args.no_write)
    out.unlink(missing_ok=True)  # the run's figures are in out/bench_folder_faults.json now
    return 0


if __name__ == "__main__":
    sys.exit(main())
