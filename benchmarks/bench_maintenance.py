"""Benchmark: ``run_maintenance("analyze")`` right after a big write, from a process of its own.

    python benchmarks/bench_maintenance.py --sizes 100000,300000
    python benchmarks/bench_maintenance.py --sizes 100000 --earlier /path/to/an/earlier/checkout
    python benchmarks/bench_maintenance.py --sizes 300000 --moments build --json /tmp/b.json \
        --join benchmarks/out/bench_maintenance.json          # a run shown after an earlier one

A caller that has just written many drawers (``mempalace mine``, a migration, an agent's import) asks
for fresh planner statistics. For each size and store:

1. a *writer* process upserts 0 -> N drawers in batches of 1,000 through MemPalace's backend API and
   exits (``bench_real_path.py``'s writer: the same drawers, the same way);
2. a new process opens the palace and times ``run_maintenance("analyze")`` (its status and stats as
   returned), noting what the ``postgres`` folder was doing when it was called: one second after the
   writer exited (``--moments exit``), or once the folder runs a full-settings build (``build``: the
   merge or rebuild that follows a big write, minutes at a million drawers);
3. for ``postgres``, it then waits until the drawers' partition has been analyzed since the call (by the
   call itself or by the folder it left the ANALYZE to) and reports when.

Stores: ``postgres`` (this package), ``pgvector`` (MemPalace's built-in) and ``sqlite_exact`` (MemPalace's
exact SQLite backend); Chroma has no ``analyze``. ``--earlier DIR`` adds ``postgres`` run with the
``mempalace_pg`` of another checkout (on PYTHONPATH in every child, the folder included): the same
figures before a change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent
WRITER = str(HERE / "bench_real_path.py")
BATCH = 1000
#: How long the child waits for the partition's statistics after the call before it reports them missing.
STATISTICS_WAIT_S = 1800.0


# ----------------------------------------------------------------------------- child
def child_analyze(store: str, dsn: str, workdir: str, tag: str, moment: str) -> dict:
    os.environ["MEMPALACE_CONFIG_DIR"] = str(Path(workdir) / "config")
    backend, col = common.open_collection(store, str(Path(workdir) / "palace"), dsn, tag)
    out: dict = {}
    if moment == "build":
        out["waited_for_build_s"] = wait_full_build(dsn, f"bench_{tag}")
    if store == "postgres":
        out["folder_at_call"] = folder_activity(dsn, f"bench_{tag}")
        called = server_now(dsn)
    t0 = time.perf_counter()
    result = col.run_maintenance("analyze")
    out["seconds"] = time.perf_counter() - t0
    out["status"], out["stats"] = result.status, dict(result.stats)
    if store == "postgres":
        out["analyzed_after_s"] = wait_analyzed(dsn, f"bench_{tag}", col.partition.table_name, called)
        out["folder_after"] = folder_activity(dsn, f"bench_{tag}")
    backend.close()
    return out


def server_now(dsn: str):
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT now()").fetchone()[0]


def folder_activity(dsn: str, schema: str) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            sql.SQL("SELECT activity FROM {}").format(sql.Identifier(schema, "vector_folders"))
        ).fetchone()
        return row[0] if row else "no folder"


def wait_full_build(dsn: str, schema: str, timeout: float = 300.0) -> float | None:
    """Seconds until the folder runs a full-settings build (a merge, a rebuild, a fold not young), or None
    if none starts within ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        activity = folder_activity(dsn, schema)
        if activity.startswith(("merging", "rebuilding", "folding")) and "(young)" not in activity:
            return time.monotonic() - t0
        time.sleep(0.2)
    return None


def wait_analyzed(dsn: str, schema: str, table: str, called) -> float | None:
    """Seconds from ``called`` (server time) until the partition's last manual ANALYZE is later, and no
    request is left for the folder (a checkout without the request column: the ANALYZE alone)."""
    import psycopg

    deadline = time.monotonic() + STATISTICS_WAIT_S
    with psycopg.connect(dsn, autocommit=True) as conn:
        asked = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = 'vector_folders' AND column_name = 'analyze_asked_at')",
            (schema,),
        ).fetchone()[0]
        pending = f'SELECT count(*) FROM "{schema}".vector_folders WHERE analyze_asked_at IS NOT NULL'
        while time.monotonic() < deadline:
            last = conn.execute(
                "SELECT last_analyze FROM pg_stat_user_tables WHERE schemaname = %s AND relname = %s",
                (schema, table),
            ).fetchone()[0]
            if last is not None and last > called and not (asked and conn.execute(pending).fetchone()[0]):
                return (last - called).total_seconds()
            time.sleep(0.5)
    return None


# ----------------------------------------------------------------------------- parent
def run_case(store: str, n: int, dsn: str, *, label: str, env: dict, moment: str) -> dict:
    tag = f"mt_{store}_{uuid.uuid4().hex[:6]}"
    workdir = tempfile.mkdtemp(prefix="mpbench_mt_")
    case: dict = {"store": label, "n": n, "moment": moment}
    try:
        case["write"] = common.child_json(
            WRITER, ["write", store, n, BATCH, dsn, workdir, tag, "upsert"], dsn, env=env
        )
        time.sleep(1.0)
        case["analyze"] = common.child_json(
            str(Path(__file__).resolve()), ["analyze", store, dsn, workdir, tag, moment], dsn, env=env
        )
        a = case["analyze"]
        print(
            f"  {label} n={n}: written at {case['write']['rows_per_s']:.0f} rows/s; "
            f"analyze {a['seconds']:.2f} s "
            f"({a['status']}, {a.get('folder_at_call', '-')}), statistics after {a.get('analyzed_after_s')}",
            flush=True,
        )
    finally:
        drop(store, dsn, tag, case.get("write", {}).get("table"))
        shutil.rmtree(workdir, ignore_errors=True)
    return case


def drop(store: str, dsn: str, tag: str, table) -> None:
    """What a case left in the database: a postgres palace's schema and graph, a pgvector table."""
    import psycopg
    from psycopg import sql

    if store == "postgres":
        common.cleanup(store, dsn, tag, None)
    elif store == "pgvector" and table:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def seconds(value) -> str:
    return "-" if value is None else f"{value:,.2f}"


MOMENTS = {"exit": "1 s after the writer exited", "build": "once the folder runs a full build"}


def render(cases: list[dict], runs: list[dict]) -> str:
    when = ", ".join(r["when"] for r in runs)
    commands = "; ".join(f"`{r['command']}` ({r['when']})" for r in runs)
    lines = [
        f"## Maintenance right after a big write ({when})",
        "",
        f"{commands}; {runs[-1]['machine']}, {runs[-1]['versions']}. A process upserts the drawers in "
        f"batches of {BATCH:,} through MemPalace's backend API and exits; then a new process calls "
        '`run_maintenance("analyze")`, either 1 s after the writer exited or once the postgres folder runs '
        "a full-settings build (a merge or rebuild after the write; *waited* is how long that took to "
        "start). *Returned*: the call's wall time. *Statistics after*: from the call until the drawers' "
        "table had been analyzed (by the call, or by the folder it left the ANALYZE to).",
        "",
        "| palace | store | called | the folder at the call | analyze returned, s | status, stats | "
        "statistics after, s | written, rows/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        a = c["analyze"]
        stats = ", ".join(f"{k}: {v}" for k, v in a["stats"].items() if k not in ("table", "graph"))
        called = MOMENTS[c["moment"]]
        if c["moment"] == "build":
            called += f" (waited {seconds(a.get('waited_for_build_s'))} s)"
        lines.append(
            f"| {c['n']:,} | {c['store']} | {called} | {a.get('folder_at_call', '-')} | "
            f"{a['seconds']:,.2f} | {a['status']}{'; ' + stats if stats else ''} | "
            f"{seconds(a.get('analyzed_after_s'))} | {c['write']['rows_per_s']:,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child_analyze(*sys.argv[3:]), default=str))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--stores", default="postgres,pgvector,sqlite_exact")
    ap.add_argument("--moments", default="exit,build", help="of: " + ", ".join(MOMENTS))
    ap.add_argument("--earlier", type=Path, help="a checkout whose mempalace_pg runs as 'postgres (earlier)'")
    ap.add_argument("--json", type=Path, default=HERE / "out" / "bench_maintenance.json")
    ap.add_argument(
        "--join", type=Path, action="append", default=[], help="an earlier run's JSON, shown first"
    )
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    dsn = common.provisioned_dsn()
    runs = [(s, s, {}) for s in args.stores.split(",")]
    if args.earlier:
        path = os.pathsep.join(filter(None, [str(args.earlier.resolve()), os.environ.get("PYTHONPATH")]))
        runs.append(("postgres", "postgres (earlier)", {"PYTHONPATH": path}))
    cases = [
        run_case(store, n, dsn, label=label, env=env, moment=moment)
        for n in [int(x) for x in args.sizes.split(",")]
        for store, label, env in runs
        for moment in args.moments.split(",")
        if moment == "exit" or store == "postgres"  # only postgres has a folder to build
    ]
    meta = common.run_meta(dsn, command="python benchmarks/bench_maintenance.py " + " ".join(sys.argv[1:]))
    joined = [json.loads(p.read_text()) for p in args.join]
    report = render(
        [c for j in joined for c in j["results"]["cases"]] + cases, [j["meta"] for j in joined] + [meta]
    )
    common.keep_run(
        args.json,
        "bench_maintenance",
        {"meta": meta, "results": {"cases": cases}},
        report,
        write=not args.no_write,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
