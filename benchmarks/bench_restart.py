"""Benchmark: the first searches after a server restart on a kept palace, with and without autoprewarm.

    python benchmarks/bench_restart.py --size 5100000 --server "bash scripts/provision-postgres.sh"

A server that restarts (a reboot, an upgrade) comes back with empty shared buffers and, after a reboot, an
empty page cache: a big palace's first searches then read its vector index segments from disk block by
block. For each variant, the kept palace's segments are read into shared buffers (``pg_prewarm``, as the
folder warms a palace whose segments fit), the server is stopped (``--server`` with ``stop``), the
operating system's page cache dropped (``/proc/sys/vm/drop_caches``: root), the server started; then
``--cold`` wing-and-room searches as ``bench_kept_search --cold`` asks them (each question new to the
server, explained first: blocks found in shared buffers and read from outside them; then run again):

* *no autoprewarm*: ``pg_prewarm`` in ``shared_preload_libraries`` with ``pg_prewarm.autoprewarm = off``;
* *autoprewarm*: with it on, so its worker saves the buffers' block list at shutdown and reads those
  blocks back at start; the searches begin once its workers are done (the time that took is reported).

The variants set both with ALTER SYSTEM, which are reset at the end (and the server restarted): the
server's configuration files decide them again. The palace is
searched in place (``kept_palaces.py``); figures go to ``out/bench_restart.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import common
import kept_palaces as kp
import psycopg

HERE = Path(__file__).resolve().parent


def ctl(server: str, action: str) -> None:
    """``server action`` (stop, start, restart): the command that runs the palace's server."""
    subprocess.run(f"{server} {action}", shell=True, check=True, stdout=subprocess.DEVNULL)


def preload(dsn: str, libraries: list[str] | None, autoprewarm: bool = False) -> None:
    """``shared_preload_libraries`` and ``pg_prewarm.autoprewarm`` for the next start (ALTER SYSTEM;
    ``libraries`` None: both reset to what the server's configuration files say)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if libraries is None:
            conn.execute("ALTER SYSTEM RESET shared_preload_libraries")
            conn.execute("ALTER SYSTEM RESET pg_prewarm.autoprewarm")
            return
        # names from the server's own setting and this script: ALTER SYSTEM takes no parameter
        conn.execute(f"ALTER SYSTEM SET shared_preload_libraries = '{','.join(libraries)}'")
        conn.execute(f"ALTER SYSTEM SET pg_prewarm.autoprewarm = {'on' if autoprewarm else 'off'}")


def restarted(dsn: str, tdsn: str, server: str, autoprewarm: bool) -> dict:
    """The palace's segments read into shared buffers, the server stopped (the autoprewarm worker, where
    it runs, saves its block list), the page cache dropped, the server started; with ``autoprewarm``,
    back once its workers have read the list's blocks in. What it took."""
    from mempalace_pg.engine.warm import prewarm, prewarm_function

    with psycopg.connect(tdsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        segments = conn.execute(f"SELECT index_name FROM {kp.SCHEMA}.vector_segments ORDER BY lo").fetchall()
        # every segment, whatever its share of the buffers (warm.warm_segments stops at WARM_ALL_SHARE)
        function = prewarm_function(conn)
        warmed = sum(prewarm(conn, function, f"{kp.SCHEMA}.{i}") for (i,) in segments)
    ctl(server, "stop")
    subprocess.run("sync; echo 3 > /proc/sys/vm/drop_caches", shell=True, check=True)
    t0 = time.perf_counter()
    ctl(server, "start")
    loaded_s, seen = None, False
    if autoprewarm:
        # the leader starts a worker per database in turn: the load is over once one was seen and none has
        # been there for three looks in a row (the next database's comes within milliseconds), or none came
        # within a minute (nothing to load)
        deadline, idle = time.monotonic() + 1800, 0
        with psycopg.connect(dsn, autocommit=True) as conn:
            while time.monotonic() < deadline:
                busy = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autoprewarm worker'"
                ).fetchone()[0]
                seen, idle = seen or busy > 0, 0 if busy else idle + 1
                if (seen and idle >= 3) or (not seen and time.perf_counter() - t0 > 60):
                    break
                time.sleep(0.2)
        loaded_s = time.perf_counter() - t0
    return {
        "autoprewarm": autoprewarm,
        "segments": len(segments),
        "warmed_blocks": warmed,
        "loaded_s": loaded_s,
        "worker_seen": seen,
    }


def variant(r: dict) -> str:
    return "autoprewarm" if r["autoprewarm"] else "no autoprewarm"


def render(run: dict) -> str:
    meta = run["meta"]
    lines = [
        "## The first searches after a restart",
        "",
        f"{meta['when']}, {meta['machine']}, {meta['versions']}, shared_buffers {meta['shared_buffers']}. "
        f"`python benchmarks/bench_restart.py --size {meta['size']} --cold {meta['cold']} --server ...`: "
        f"the kept palace of {meta['size']:,} drawers in place; its {run['variants'][0]['segments']} "
        "vector index segments read into shared buffers, the server stopped, the operating system's page "
        "cache dropped, the server started; then wing-and-room searches (k=5, as `mempalace_search` asks; "
        "each question new to the server, in the wing and room of a random drawer), each explained first "
        "(cold) and then run again. With autoprewarm (`pg_prewarm` in `shared_preload_libraries`) the "
        "searches start once its workers have read back the blocks the buffers held at shutdown. Blocks "
        "read from outside shared buffers by relation (pg_statio).",
        "",
        "| after a restart | blocks back in, s | cold p50 / p95 ms | again p50 / p95 ms | read by relation |",
        "|---|---|---|---|---|",
    ]
    for r in run["variants"]:
        cold = common.summary([q["cold_ms"] for q in r["queries"]])
        again = common.summary([q["again_ms"] for q in r["queries"]])
        read = sorted(((k, x) for k, x in r["read_by_table"].items() if x), key=lambda kv: -kv[1])
        loaded = f"{r['loaded_s']:,.1f}" if r["loaded_s"] is not None else "—"
        lines.append(
            f"| {variant(r)} | {loaded} | "
            f"{cold['p50']:,.1f} / {cold['p95']:,.1f} | {again['p50']:.1f} / {again['p95']:.1f} | "
            + ", ".join(f"{k} {x:,}" for k, x in read)
            + " |"
        )
    lines += [
        "",
        "| rows in the filter | "
        + " | ".join(f"{variant(r)}: cold / again ms" for r in run["variants"])
        + " |",
        "|---|" + "---|" * len(run["variants"]),
    ]
    for i, q in enumerate(run["variants"][0]["queries"]):
        cells = [
            f"{r['queries'][i]['cold_ms']:,.1f} / {r['queries'][i]['again_ms']:.1f}" for r in run["variants"]
        ]
        lines.append(f"| {q['filter_rows']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, help="the kept palace (kept_palaces.py)")
    ap.add_argument("--cold", type=int, default=12, help="wing+room searches after each restart")
    ap.add_argument("--server", help="the command that stops and starts the server (+ ACTION)")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument(
        "--report", action="store_true", help="the report of the last run (out/bench_restart.json)"
    )
    args = ap.parse_args()
    if args.report:
        run = json.loads((HERE / "out" / "bench_restart.json").read_text())["results"]
        common.save_run("bench_restart", run["meta"], run, render(run), write=not args.no_write)
        return 0
    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    if not args.size or not args.server:
        ap.error("--size and --server (or --report)")
    with kp.in_place("postgres", args.size, dsn) as (palace, env, tdsn):
        run = measure(args, dsn, palace, env, tdsn)
    common.save_run("bench_restart", run["meta"], run, render(run), write=not args.no_write)
    (HERE / "out" / "bench_restart.partial.json").unlink()
    return 0


def measure(args, dsn: str, palace: Path, env: dict, tdsn: str) -> dict:
    """Both variants on the kept palace at ``palace`` (its database ``tdsn``, its environment ``env``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        before = conn.execute("SHOW shared_preload_libraries").fetchone()[0]
        shared_buffers = conn.execute("SHOW shared_buffers").fetchone()[0]
    others = [lib.strip() for lib in before.split(",") if lib.strip() and lib.strip() != "pg_prewarm"]
    meta = common.run_meta(dsn, size=args.size, cold=args.cold, shared_buffers=shared_buffers)
    run = {"meta": meta, "variants": []}
    try:
        for autoprewarm in (False, True):
            preload(dsn, [*others, "pg_prewarm"], autoprewarm)
            ctl(args.server, "restart")  # the setting in force before the palace is warmed
            print(f"  autoprewarm {autoprewarm}: warming, restarting", file=sys.stderr, flush=True)
            state = restarted(dsn, tdsn, args.server, autoprewarm)
            # bench_kept_search's cold searches, in a process of its own (as MemPalace's MCP server opens
            # the palace): the shipped variant only
            (cold,) = common.child_json(
                str(HERE / "bench_kept_search.py"),
                ["cold", str(palace), args.size, args.cold, 0],
                tdsn,
                env=env,
                capture_stderr=True,
            )
            run["variants"].append({**state, **cold})
            # each variant's figures on disk as soon as they are measured
            (HERE / "out" / "bench_restart.partial.json").write_text(json.dumps(run))
    finally:
        preload(dsn, None)
        ctl(args.server, "restart")
    return run


if __name__ == "__main__":
    sys.exit(main())
