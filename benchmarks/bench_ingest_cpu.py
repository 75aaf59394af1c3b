"""Benchmark: where the processor goes while a palace is written through ``upsert``.

    python benchmarks/bench_ingest_cpu.py --size 100000

A writer process upserts 0 -> N drawers in batches of 1,000 through MemPalace's backend API and exits
(``bench_real_path.py``'s writer), in each configuration:

* ``postgres``: as shipped (the folder builds segments beside the writer, which waits for it when more
  than ``MEMPALACE_PG_BACKLOG_ROWS`` rows wait for the index);
* ``no_wait``: ``MEMPALACE_PG_BACKLOG_ROWS=0``, writers never wait;
* ``no_folder``: ``MEMPALACE_PG_FOLDER=off``: the write alone, nothing indexed meanwhile;
* ``chroma``: MemPalace's default backend (it indexes inside the writer).

While it writes, every server process's processor time is read from ``/proc`` twice a second and
classed by ``pg_stat_activity`` (the writer's backend, the folder's backend and its parallel workers,
autovacuum, the server's own background processes; the server must run on this machine); the writer
process's own time comes from the operating system when it exits. Reported: the write's rows/s, and
the processor seconds each class spent per 1,000 rows: their sum over the machine's cores is the
rows/s the machine could reach if nothing waited.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent
WRITER = str(HERE / "bench_real_path.py")
BATCH = 1000
SAMPLE_S = 0.5
TICK = os.sysconf("SC_CLK_TCK")
#: name: (store, environment, what the report calls it)
CONFIGS = {
    "postgres": ("postgres", {}, "postgres"),
    "no_wait": ("postgres", {"MEMPALACE_PG_BACKLOG_ROWS": "0"}, "postgres, writers never wait"),
    "no_folder": ("postgres", {"MEMPALACE_PG_FOLDER": "off"}, "postgres, no folder"),
    "chroma": ("chroma", {}, "chroma"),
}
CLASSES = (
    "writer process",
    "writer backend",
    "folder",
    "autovacuum",
    "server background",
    "exited",
    "other sessions",
)


def cpu_seconds(pid: int, *, children: bool = False) -> float | None:
    """utime + stime of ``pid`` (with ``children``: of its reaped children instead), or None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    at = 13 if children else 11  # fields after the command: utime 14th, stime 15th, cutime 16th, cstime 17th
    return (int(fields[at]) + int(fields[at + 1])) / TICK


class ServerSampler:
    """Processor seconds of the server's processes, by class, from a start until stopped."""

    def __init__(self, dsn: str, folder: str):
        """``folder``: the application name of the case's folder (any other folder is another session)."""
        import psycopg

        self.folder = folder
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.own = self.conn.info.backend_pid
        self.postmaster = int(
            self.conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"
            ).fetchone()[0]
        )
        self.postmaster = int(Path(f"/proc/{self.postmaster}/stat").read_text().rsplit(")", 1)[1].split()[1])
        self.seen: dict[int, tuple[str, float]] = {}  # pid -> (class, seconds at the start or first sight)
        self.last: dict[int, float] = {}
        self.totals = dict.fromkeys(CLASSES, 0.0)
        self.reaped0 = cpu_seconds(self.postmaster, children=True) or 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _classify(self, backend_type: str, application: str, leader: str) -> str:
        if application == self.folder or (backend_type == "parallel worker" and leader == self.folder):
            return "folder"
        if backend_type.startswith("autovacuum"):
            return "autovacuum"
        if backend_type == "client backend":
            # the writer's sessions carry no name of their own: a run alone has no other clients
            return "other sessions" if application.startswith("mempalace-pg folder") else "writer backend"
        return "other sessions" if backend_type == "parallel worker" else "server background"

    def sample(self, first: bool = False) -> None:
        rows = self.conn.execute(
            "SELECT a.pid, a.backend_type, COALESCE(a.application_name, ''), "
            "COALESCE(l.application_name, '') FROM pg_stat_activity a "
            "LEFT JOIN pg_stat_activity l ON l.pid = a.leader_pid WHERE a.pid <> %s",
            (self.own,),
        ).fetchall()
        for pid, backend_type, application, leader in rows:
            now = cpu_seconds(pid)
            if now is None:
                continue
            if pid not in self.seen:
                # a process first seen mid-run counts from zero, one there at the start from then
                self.seen[pid] = (self._classify(backend_type, application, leader), now if first else 0.0)
            self.last[pid] = now

    def _run(self) -> None:
        self.sample(first=True)
        while not self._stop.wait(SAMPLE_S):
            self.sample()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self.sample()
        for pid, (cls, start) in self.seen.items():
            self.totals[cls] += self.last[pid] - start
        # processes that exited meanwhile were reaped by the postmaster: their time beyond the last sample
        reaped = (cpu_seconds(self.postmaster, children=True) or 0.0) - self.reaped0
        # (a reaped process's time is its whole life's: less what the samples saw of it up to its last)
        gone = sum(self.last[pid] for pid in self.seen if cpu_seconds(pid) is None)
        self.totals["exited"] = max(0.0, reaped - gone)
        self.conn.close()
        return self.totals


def run_case(name: str, n: int, dsn: str) -> dict:
    store, env, label = CONFIGS[name]
    env = dict(env)
    tag = f"cpu_{store}_{uuid.uuid4().hex[:6]}"
    workdir = tempfile.mkdtemp(prefix="mpbench_cpu_")
    from mempalace_pg.engine.indexing import folder_application_name

    sampler = ServerSampler(dsn, folder_application_name(f"bench_{tag}"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler.start()
    t0 = time.perf_counter()
    try:
        write = common.child_json(
            WRITER, ["write", store, n, BATCH, dsn, workdir, tag, "upsert"], dsn, env=env
        )
    finally:
        wall = time.perf_counter() - t0
        totals = sampler.stop()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        common.cleanup(store, dsn, tag, None)  # a postgres palace's schema and graph; Chroma's is the dir
        shutil.rmtree(workdir, ignore_errors=True)
    totals["writer process"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    case = {"config": label, "n": n, "write": write, "wall_s": wall, "cpu_s": totals}
    print(
        f"  {label} n={n}: {write['rows_per_s']:.0f} rows/s; processor s: "
        + ", ".join(f"{k} {v:.1f}" for k, v in totals.items()),
        flush=True,
    )
    return case


def render(cases: list[dict], meta: dict) -> str:
    cores = os.cpu_count() or 1
    lines = [
        f"## Where the processor goes while a palace is written ({meta['when']})",
        "",
        f"`{meta['command']}` ({meta['when']}, {meta['machine']}, {meta['versions']}). A process upserts "
        f"the drawers in batches of {BATCH:,} through MemPalace's backend API and exits; the server's "
        f"processes are sampled from /proc every {SAMPLE_S} s meanwhile. Configurations alternate round by "
        "round; each row is a configuration's median round by rows/s (every round's rows/s in brackets). "
        "Processor seconds per 1,000 rows, "
        f"by class; *busy cores*: all of them over the write's wall time; *could reach*: {cores} cores over "
        "their sum, the rate if nothing waited and the work spread over the cores; *the writer's core*: "
        "one core over the writer process's and its backend's (which work in turn: a batch is sent, the "
        "backend writes it, the process waits), the rate of one writer with nothing else to wait for.",
        "",
        "| configuration | rows/s | "
        + " | ".join(CLASSES)
        + " | sum | busy cores | could reach, rows/s | the writer's core, rows/s |",
        "|---|---|" + "---|" * (len(CLASSES) + 4),
    ]
    for label in dict.fromkeys(c["config"] for c in cases):
        mine = [c for c in cases if c["config"] == label]
        rates = sorted(c["write"]["rows_per_s"] for c in mine)
        c = min(
            mine, key=lambda c: abs(c["write"]["rows_per_s"] - statistics.median(rates))
        )  # the median round
        per = {k: 1000 * v / c["n"] for k, v in c["cpu_s"].items()}
        total = sum(per.values())
        busy = sum(c["cpu_s"].values()) / c["wall_s"]
        spread = f" ({', '.join(f'{r:,.0f}' for r in rates)})" if len(rates) > 1 else ""
        lines.append(
            f"| {c['config']} | {c['write']['rows_per_s']:,.0f}{spread} | "
            + " | ".join(f"{per[k]:.2f}" for k in CLASSES)
            + f" | {total:.2f} | {busy:.2f} | {cores * 1000 / total:,.0f} | "
            f"{1000 / (per['writer process'] + per['writer backend']):,.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=100000)
    ap.add_argument("--configs", default=",".join(CONFIGS), help="of: " + ", ".join(CONFIGS))
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="also postgres with the mempalace_pg of another checkout DIR, shown as 'postgres (LABEL)'",
    )
    ap.add_argument("--rounds", type=int, default=1, help="every configuration this many times, alternating")
    ap.add_argument("--json", type=Path, default=HERE / "out" / "bench_ingest_cpu.json")
    ap.add_argument("--render", type=Path, help="only write the report of a run's JSON (this benchmark's)")
    args = ap.parse_args()
    if args.render:
        run = json.loads(args.render.read_text())
        report = render(run["results"]["cases"], run["meta"])
        common.keep_run(args.render, "bench_ingest_cpu", run, report, write=not args.no_write)
        return 0
    for variant in args.code:
        label, _, path = variant.partition("=")
        # the variant's package first on every child's path, the folder's included
        where = os.pathsep.join(filter(None, [str(Path(path).resolve()), os.environ.get("PYTHONPATH")]))
        CONFIGS[label] = ("postgres", {"PYTHONPATH": where}, f"postgres ({label})")
    dsn = common.provisioned_dsn()
    names = args.configs.split(",") + [v.partition("=")[0] for v in args.code]
    cases = [run_case(name, args.size, dsn) for _ in range(args.rounds) for name in names]
    meta = common.run_meta(dsn, command="python benchmarks/bench_ingest_cpu.py " + " ".join(sys.argv[1:]))
    run = {"meta": meta, "results": {"cases": cases}}
    common.keep_run(args.json, "bench_ingest_cpu", run, render(cases, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
