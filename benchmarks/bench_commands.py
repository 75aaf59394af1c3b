"""Benchmark: every MemPalace command and MCP tool a user reaches, on big palaces (issue 37).

    python benchmarks/kept_palaces.py build --size 1000000          # once: the kept palaces (see there)
    python benchmarks/bench_commands.py --sizes 100000,300000,1000000        # writes RESULTS.md
    python benchmarks/bench_commands.py --sizes 100000 --stores postgres --no-write   # a quick look

For each size and store, on a fresh clone of the kept palace (``kept_palaces.clone``: a database made
from the template, a copy of the directory; removed afterwards), so a 1M figure starts in a minute:

1. the command lines, each as a process that exits, timed from start to exit (Python's start and
   imports included, as a user waits for them; ``mempalace --version`` and ``mempalace-pg --help``
   show that floor): ``mempalace --backend postgres status`` (and ``search``, ``wake-up``), and every
   ``mempalace-pg`` command that reads the palace (``doctor``, ``db current``, ``kg stats``/``query``,
   ``search around``/``facts``/``entities``/``hybrid``, ``export``, ``backup``) and ``restore`` (of that
   backup, into a database made for each run; in one session, then ``--jobs`` side by side), with plain
   ``pg_dump -Fc`` / ``pg_restore`` (and ``pg_restore --jobs``) of the same database beside them; the
   whole-palace jobs with their peak memory;
2. the MCP tools, called as an AI client calls them: the official ``mcp`` SDK's ``ClientSession`` over
   stdio, one long-lived session per server, timed at the client from request to parsed answer.
   MemPalace's own server (``python -m mempalace.mcp_server --palace P``) for its tools, the plugin's
   (``mempalace-pg mcp --palace P``) for the ``pg_*`` tools. The first call of each tool is recorded
   apart (``first_ms``); ``pg_file_memory`` writes (a drawer and a fact per call) and runs last;
3. before/after rows for what the plugin mends in MemPalace's server: MemPalace's own
   ``tool_list_drawers`` (reading every drawer in scope) and revision 0008's grouped read behind
   ``graph_stats``, timed in one process against the mended ones.

Chroma (MemPalace's default) runs the same MemPalace command lines and MCP tools on its kept palace of
the same drawers and facts. Every call is bounded (``--call-timeout``, 60 s) and a row that hits the
bound is recorded as over it, not waited for. Each figure is written to the run's JSON
(``KEEP/runs/``) as soon as it is measured.

Queries are embedded by ``scripts/embedding_server.py`` through MemPalace's ``openai-compat`` setting
(MemPalace's hash embedder by default: the drawers' vectors are synthetic, and what a real model
costs per query does not depend on the palace). Per row: p50 / p95 ms, whether p95 is under 1 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import anyio
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))
import bench_mine as bm  # noqa: E402
import common  # noqa: E402
import kept_palaces as kp  # noqa: E402
from skewed_palace import SkewedPalace  # noqa: E402

from mcp_client import mempalace_server, pg_server, stdio_session, text_of  # noqa: E402

BIN = Path(sys.executable).parent
MEMPALACE = str(BIN / "mempalace")
MEMPALACE_PG = kp.MEMPALACE_PG
QUESTIONS = (
    "how do I restore the database after the disk failed",
    "what did we decide about the release schedule",
    "which project uses the garden sensors",
    "notes on the weekly planning meeting",
    "where is the backup of the photos kept",
    "error when the server ran out of memory",
    "who reviewed the migration plan",
    "settings for the home network",
)
SECONDS = 1000.0  # ms: the line the table marks
COLD_ROW = "mempalace_traverse (a new server's first call)"
FRESH_SERVERS = 5  # servers started for COLD_ROW, one call each
TUNNELS = 16  # explicit tunnels made before the tools are timed, so follow_tunnels has drawers to fetch


# ----------------------------------------------------------------------------- one palace
class Case:
    """One size and store: a fresh clone of its kept palace, what the calls ask about, and its timings
    (each written to the run's JSON by ``sink`` as soon as it is measured)."""

    def __init__(self, n: int, store: str, palace: Path, env: dict, dsn, url: str, model: str, args, sink):
        self.n, self.store, self.dsn, self.args, self.sink = n, store, dsn, args, sink
        self.dsn_admin = args.admin_dsn  # the server, for databases made for a run
        self.tag = f"{store}_{n}"
        self.palace = str(palace)
        self.root = palace.parent
        self.base_env = dict(
            env,
            MEMPALACE_EMBEDDING_MODEL="openai-compat",
            MEMPALACE_EMBEDDING_API_URL=url,
            MEMPALACE_EMBEDDING_API_MODEL=model,
        )
        skewed = SkewedPalace(n)
        rng = np.random.default_rng(20261204)
        picks = rng.integers(0, n, 64)
        self.drawers = [skewed.drawer_id(int(i)) for i in picks]
        self.places = [(skewed.wing_name(int(i)), skewed.room_name(int(i))) for i in picks]
        # how many drawers each scope holds, for the deep pages (half way into a scope)
        wings, wing_n = np.unique(skewed.wing, return_counts=True)
        rooms, room_n = np.unique(skewed.room, return_counts=True)
        pairs, pair_n = np.unique(skewed.wing.astype(np.int64) * 1000 + skewed.room, return_counts=True)
        self.scope_n = {
            **{(f"wing_{w}", None): int(c) for w, c in zip(wings, wing_n)},
            **{(None, f"room_{r}"): int(c) for r, c in zip(rooms, room_n)},
            **{(f"wing_{p // 1000}", f"room_{p % 1000}"): int(c) for p, c in zip(pairs, pair_n)},
            (None, None): n,
        }
        self.entities = [f"Entity {i}" for i in range(0, 60, 3)]
        self.rows: dict = {}
        self.errlog = self.root / "servers.log"

    def env(self, **extra) -> dict:
        return {**self.base_env, **extra}

    def question(self, i: int) -> str:
        return f"{QUESTIONS[i % len(QUESTIONS)]} w{(i * 37) % 4000}"

    def record(self, label: str, through: str, times: list, error: str | None = None, **extra) -> None:
        row = {"through": through, **(common.summary(times) if times else {"n": 0}), **extra}
        if error:
            row["error"] = error
        self.rows[label] = row
        self.sink()
        shown = f"{row['p50']:.1f} / {row['p95']:.1f} ms (n={row['n']})" if times else "-"
        where = f"{self.n:,} {self.store}"
        print(f"  {where}: {label}: {shown}" + (f"  ERROR {error[:200]}" if error else ""), flush=True)

    def as_dict(self) -> dict:
        return {"n": self.n, "store": self.store, "rows": self.rows}


# ----------------------------------------------------------------------------- command lines
def _preview(text: str) -> str:
    """The start of what a command or tool answered, kept in the JSON to show it answered something."""
    return " ".join((text or "").split())[:240]


def run_cli(cmd: list, env: dict, timeout: float, peak: Path | None = None):
    """(ms, completed process, peak RSS in MB or None); a run over ``timeout`` raises TimeoutExpired."""
    if peak is not None:
        cmd = ["/usr/bin/time", "-f", "%M", "-o", str(peak), *cmd]
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd,
        env=env,
        capture_output=True,
        text=True,
        errors="backslashreplace",
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )
    ms = (time.perf_counter() - t0) * 1000
    rss = None
    if peak is not None and peak.exists():
        with contextlib.suppress(ValueError, IndexError):
            rss = int(peak.read_text().split()[-1]) / 1024
    return ms, proc, rss


def time_cli(
    case: Case,
    label: str,
    make,
    *,
    reps: int,
    warm: bool = True,
    env=None,
    before=None,
    memory=False,
    timeout: float | None = None,
) -> None:
    """Run ``make(i)`` (a command line) ``reps`` times as a process that exits, after a warm-up run;
    fewer past the time budget, never fewer than 2. Without ``warm`` (the jobs over a whole palace:
    export, backup, restore) no warm-up, one run past the budget is enough, and with ``memory`` each
    run's peak memory is kept. ``before(i)`` prepares run i, untimed. A run over the call bound ends
    the row, recorded as over it."""
    env = env or case.env()
    timeout = timeout or (case.args.bulk_timeout if memory else case.args.call_timeout)
    times, error, proc, peaks = [], None, None, []
    start = time.perf_counter()
    peak = case.root / "peak.txt" if memory else None
    for i in range(-1 if warm else 0, reps):
        if before:
            before(i)
        try:
            ms, proc, rss = run_cli(
                make(i), env(i) if callable(env) else env, timeout or case.args.call_timeout, peak
            )
        except subprocess.TimeoutExpired:
            error = f"over {timeout or case.args.call_timeout:.0f} s"
            break
        if proc.returncode != 0:
            error = f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
            break
        if i >= 0:
            times.append(ms)
            if rss is not None:
                peaks.append(rss)
        if i + 1 >= (2 if warm else 1) and time.perf_counter() - start > case.args.budget:
            break
    extra = {"peak_mb": max(peaks)} if peaks else {}
    case.record(label, "process", times, error, answer=_preview(proc.stdout if proc else ""), **extra)


def time_clis(case: Case) -> None:
    """The command lines a user runs on the palace, each as a process that exits."""
    reps = case.args.cli_reps
    q, ent = case.question, lambda i: case.entities[i % len(case.entities)]
    mp = [MEMPALACE, "--palace", case.palace, "--backend", case.store]
    # what any command costs before it does anything: the interpreter, the imports, the exit
    time_cli(case, FLOOR_ROW, lambda i: [MEMPALACE, "--version"], reps=reps)
    time_cli(case, "`mempalace status`", lambda i: [*mp, "status"], reps=reps)
    time_cli(case, "`mempalace search`", lambda i: [*mp, "search", q(i)], reps=reps)
    time_cli(case, "`mempalace wake-up`", lambda i: [*mp, "wake-up"], reps=reps)
    if case.store != "postgres":
        return
    p, pg = ["--palace", case.palace], [MEMPALACE_PG]
    time_cli(case, "`mempalace-pg --help` (a process's floor)", lambda i: [MEMPALACE_PG, "--help"], reps=reps)
    time_cli(case, "`mempalace-pg doctor`", lambda i: [*pg, "doctor", *p], reps=reps)
    time_cli(case, "`mempalace-pg db current`", lambda i: [*pg, "db", "current"], reps=reps)
    time_cli(case, "`mempalace-pg kg stats`", lambda i: [*pg, "kg", "stats", *p], reps=reps)
    time_cli(case, "`mempalace-pg kg query`", lambda i: [*pg, "kg", "query", ent(i), *p], reps=reps)
    time_cli(
        case,
        "`mempalace-pg search around --hops 2`",
        lambda i: [*pg, "search", "around", ent(i), q(i), "--hops", "2", *p],
        reps=reps,
    )
    time_cli(case, "`mempalace-pg search facts`", lambda i: [*pg, "search", "facts", ent(i), *p], reps=reps)
    time_cli(
        case, "`mempalace-pg search entities`", lambda i: [*pg, "search", "entities", q(i), *p], reps=reps
    )
    time_cli(case, "`mempalace-pg search hybrid`", lambda i: [*pg, "search", "hybrid", q(i), *p], reps=reps)


def time_bulk(case: Case) -> None:
    """The jobs over a whole palace, with their peak memory: export, backup and restore, and PostgreSQL's
    own pg_dump/pg_restore of the same database; of a Chroma palace, migrate to postgres."""
    if case.store != "postgres":
        time_migrate(case)
        return
    out = case.root / "out"
    out.mkdir(exist_ok=True)
    pg_dump, pg_restore = common.server_dump_tools(case.dsn)
    if case.args.bulk_jobs in ("all", "plugin"):
        time_plugin_jobs(case, out, pg_dump, pg_restore)
    if case.args.bulk_jobs in ("all", "postgres"):
        time_postgres_jobs(case, out, pg_dump, pg_restore)


def time_plugin_jobs(case: Case, out: Path, pg_dump: str, pg_restore: str) -> None:
    """export, backup, and restore of that backup into a new database."""
    heavy, p, pg = case.args.heavy_reps, ["--palace", case.palace], [MEMPALACE_PG]
    jsonl = out / "palace.jsonl"
    time_cli(
        case,
        "`mempalace-pg export`",
        lambda i: [*pg, "export", str(jsonl), *p],
        reps=heavy,
        warm=False,
        memory=True,
    )
    case.rows["`mempalace-pg export`"]["bytes"] = _size(jsonl)
    jsonl.unlink(missing_ok=True)
    dump = out / "palace.dump"
    time_cli(
        case,
        "`mempalace-pg backup`",
        lambda i: [*pg, "backup", str(dump), "--pg-dump", pg_dump],
        reps=heavy,
        warm=False,
        memory=True,
    )
    case.rows["`mempalace-pg backup`"]["bytes"] = _size(dump)
    if dump.exists():
        time_restores(
            case, "`mempalace-pg restore`", [MEMPALACE_PG, "restore", str(dump), "--pg-restore", pg_restore]
        )
        jobs = case.args.restore_jobs
        time_restores(
            case,
            f"`mempalace-pg restore --jobs {jobs}`",
            [MEMPALACE_PG, "restore", str(dump), "--jobs", str(jobs), "--pg-restore", pg_restore],
        )
    dump.unlink(missing_ok=True)


def time_postgres_jobs(case: Case, out: Path, pg_dump: str, pg_restore: str) -> None:
    """The same database with PostgreSQL's own tools, the floor a backup of it has."""
    heavy = case.args.heavy_reps
    plain = out / "plain.dump"
    time_cli(
        case,
        "`pg_dump -Fc` of the database (PostgreSQL's own)",
        lambda i: ["sh", "-c", f'{pg_dump} -Fc > "$0"', str(plain)],
        env=case.env(**common.libpq_vars(case.dsn)),
        reps=heavy,
        warm=False,
        memory=True,
    )
    case.rows["`pg_dump -Fc` of the database (PostgreSQL's own)"]["bytes"] = _size(plain)
    if plain.exists():
        time_restores(
            case,
            "`pg_restore` of it (PostgreSQL's own)",
            lambda dsn: ["sh", "-c", f'{pg_restore} --no-owner -d "$PGDATABASE" < "$0"', str(plain)],
            bootstrap=False,
            libpq=True,
        )
        jobs = case.args.restore_jobs
        time_restores(
            case,
            f"`pg_restore --jobs {jobs}` of it (PostgreSQL's own)",
            lambda dsn: [
                "sh",
                "-c",
                f'{pg_restore} --no-owner --jobs {jobs} -d "$PGDATABASE" "$0"',
                str(plain),
            ],
            bootstrap=False,
            libpq=True,
        )
    plain.unlink(missing_ok=True)


def time_migrate(case: Case) -> None:
    """``mempalace-pg migrate`` of this (Chroma) palace into a new postgres palace, in a database made for
    it (the extensions made by ``mempalace-pg db bootstrap``, untimed); one run, with its peak memory."""
    import psycopg

    name = f"bench_migrate_{case.tag}"
    kp.drop_database(case.dsn_admin, name)
    with psycopg.connect(case.dsn_admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    target_dsn = kp.with_dbname(case.dsn_admin, name)
    env = case.env(MEMPALACE_PG_DSN=target_dsn, MEMPALACE_PG_SCHEMA=kp.SCHEMA)
    target = case.root / "migrated"
    try:
        kp.plugin_command("db", "bootstrap", env=env)
        time_cli(
            case,
            "`mempalace-pg migrate` of the palace to postgres",
            lambda i: [MEMPALACE_PG, "migrate", "--from", case.palace, "--to", str(target)],
            reps=1,
            warm=False,
            env=env,
            memory=True,
        )
        row = case.rows["`mempalace-pg migrate` of the palace to postgres"]
        if row.get("n"):
            row["rows_per_s"] = case.n / (row["p50"] / 1000)
            # of that time, what the server spent building the vector index (once, at the end)
            with psycopg.connect(target_dsn) as conn:
                built = conn.execute(
                    "SELECT COALESCE(sum(build_seconds), 0), COALESCE(sum(rows), 0)"
                    f" FROM {kp.SCHEMA}.vector_segments"
                ).fetchone()
            row["index_build_s"], row["index_rows"] = float(built[0]), int(built[1])
            case.sink()
    finally:
        kp.drop_database(case.dsn_admin, name)
        shutil.rmtree(target, ignore_errors=True)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def time_restores(case: Case, label: str, command, *, bootstrap: bool = True, libpq: bool = False) -> None:
    """A restore, each run into a new database (with the extensions made by ``mempalace-pg db bootstrap``,
    untimed, when ``bootstrap``), dropped after it. ``command`` is the command line, or a function of
    the new database's DSN giving it. ``libpq``: the new database's DSN in libpq's variables too (for
    PostgreSQL's own pg_restore, which then names it by ``$PGDATABASE``)."""
    import psycopg

    made: list[str] = []

    def before(i: int) -> None:
        while made:
            kp.drop_database(case.dsn, made.pop())
        name = f"bench_restore_{case.tag}_{i + 1}"
        with psycopg.connect(case.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        if bootstrap:
            kp.plugin_command(
                "db", "bootstrap", env=case.env(MEMPALACE_PG_DSN=kp.with_dbname(case.dsn, name))
            )

    def env(i: int) -> dict:
        dsn = kp.with_dbname(case.dsn, made[-1])
        return case.env(MEMPALACE_PG_DSN=dsn, **(common.libpq_vars(dsn) if libpq else {}))

    def make(i: int) -> list:
        return command(kp.with_dbname(case.dsn, made[-1])) if callable(command) else command

    try:
        time_cli(
            case, label, make, reps=case.args.heavy_reps, warm=False, env=env, before=before, memory=True
        )
    finally:
        while made:
            kp.drop_database(case.dsn, made.pop())


# ----------------------------------------------------------------------------- before / after
#: The grouped read behind graph_stats before revision 0009 (store/counts.py then): every drawer.
GROUPED_0008 = """
SELECT COALESCE(CASE WHEN jsonb_typeof(metadata -> 'room') IN ('string', 'number')
                THEN metadata ->> 'room' END, ''),
       COALESCE(CASE WHEN jsonb_typeof(metadata -> 'wing') IN ('string', 'number')
                THEN metadata ->> 'wing' END, ''),
       COALESCE(CASE WHEN jsonb_typeof(metadata -> 'hall') IN ('string', 'number')
                THEN metadata ->> 'hall' END, ''),
       count(*),
       COALESCE(max(CASE WHEN jsonb_typeof(metadata -> 'date') = 'string'
                    THEN metadata ->> 'date' END COLLATE "C"), '')
FROM {table} GROUP BY 1, 2, 3
"""


def child_before_after(palace: str, places: str, reps: int, budget: float) -> dict:
    """In a process on the palace: each mended MemPalace MCP read against the path it replaces, and the
    answers compared."""
    import psycopg
    from psycopg import sql

    os.environ["MEMPALACE_PALACE_PATH"] = palace  # the server's palace, as its --palace makes it
    from mempalace import mcp_server as m

    import mempalace_pg  # noqa: F401 - the hooks, as the server's process has them

    wing, room = json.loads(places)
    col = m._get_collection()
    part = col.partition
    rows: dict = {}

    def timed(fn) -> tuple[list, object]:
        times, answer, t_start = [], None, time.perf_counter()
        for _ in range(reps):
            t0 = time.perf_counter()
            answer = fn()
            times.append((time.perf_counter() - t0) * 1000)
            if time.perf_counter() - t_start > budget:
                break
        return times, answer

    for label, kwargs in (
        ("no filter", {"limit": 20}),
        ("a wing", {"wing": wing, "limit": 20}),
        ("wing and room", {"wing": wing, "room": room, "limit": 20}),
    ):
        after, a = timed(lambda: m.tool_list_drawers(**kwargs))
        before, b = timed(lambda: m.tool_list_drawers.__wrapped__(**kwargs))
        rows[f"mempalace_list_drawers ({label})"] = {"before": before, "after": after, "same_answer": a == b}
    settings = part.db.settings
    old = sql.SQL(GROUPED_0008).format(table=part.table)
    with psycopg.connect(settings.dsn) as conn:
        conn.execute("SET jit = off")
        before, _ = timed(lambda: conn.execute(old).fetchall())
    after, _ = timed(m._sqlite_graph_stats)
    rows["graph_stats's grouped read"] = {"before": before, "after": after}
    return rows


def time_before_after(case: Case) -> None:
    script = str(Path(__file__).resolve())
    wing, room = case.places[0]
    answer = str(case.root / "before_after.json")  # MemPalace's server module takes stdout over for MCP
    try:
        got = subprocess.run(
            [
                sys.executable,
                script,
                "--child",
                case.palace,
                json.dumps([wing, room]),
                "5",
                str(case.args.budget),
                answer,
            ],
            env=case.env(),
            capture_output=True,
            text=True,
            timeout=case.args.call_timeout * 12,
        )
    except subprocess.TimeoutExpired:
        case.record("before/after", "in process", [], f"over {case.args.call_timeout * 12:.0f} s")
        return
    if got.returncode:
        case.record("before/after", "in process", [], got.stderr[-300:])
        return
    for label, row in json.loads(Path(answer).read_text()).items():
        extra = {"same_answer": row["same_answer"]} if "same_answer" in row else {}
        case.record(
            f"{label}: before (MemPalace's own path / revision 0008)", "in process", row["before"], **extra
        )
        case.record(f"{label}: after (mended)", "in process", row["after"], **extra)


# ----------------------------------------------------------------------------- MCP tools
def mempalace_tools(case: Case) -> list:
    """(row, tool, arguments of call i) on MemPalace's own server: its read tools and its graph tools."""
    drawer, place, ent, q = (
        lambda i: case.drawers[i % len(case.drawers)],
        lambda i: case.places[i % len(case.places)],
        lambda i: case.entities[i % len(case.entities)],
        case.question,
    )

    def deep(wing, room, i) -> dict:
        """A page half way into the scope (a little further on each call)."""
        scope = {k: v for k, v in (("wing", wing), ("room", room)) if v is not None}
        return {**scope, "limit": 20, "offset": case.scope_n[(wing, room)] // 2 + 7 * i}

    return [
        ("mempalace_status", "mempalace_status", lambda i: {}),
        ("mempalace_list_wings", "mempalace_list_wings", lambda i: {}),
        ("mempalace_list_rooms (a wing)", "mempalace_list_rooms", lambda i: {"wing": place(i)[0]}),
        ("mempalace_get_taxonomy", "mempalace_get_taxonomy", lambda i: {}),
        ("mempalace_search", "mempalace_search", lambda i: {"query": q(i), "limit": 5}),
        (
            "mempalace_search (wing and room)",
            "mempalace_search",
            lambda i: {"query": q(i), "limit": 5, "wing": place(i)[0], "room": place(i)[1]},
        ),
        ("mempalace_check_duplicate", "mempalace_check_duplicate", lambda i: {"content": q(i)}),
        ("mempalace_get_drawer", "mempalace_get_drawer", lambda i: {"drawer_id": drawer(i)}),
        (
            "mempalace_get_drawers (10 ids)",
            "mempalace_get_drawers",
            lambda i: {"drawer_ids": [drawer(i + k) for k in range(10)]},
        ),
        ("mempalace_list_drawers (no filter)", "mempalace_list_drawers", lambda i: {"limit": 20}),
        (
            "mempalace_list_drawers (a wing)",
            "mempalace_list_drawers",
            lambda i: {"wing": place(i)[0], "limit": 20},
        ),
        (
            "mempalace_list_drawers (wing and room)",
            "mempalace_list_drawers",
            lambda i: {"wing": place(i)[0], "room": place(i)[1], "limit": 20},
        ),
        (
            "mempalace_list_drawers (a room)",
            "mempalace_list_drawers",
            lambda i: {"room": place(i)[1], "limit": 20},
        ),
        ("mempalace_list_drawers (deep page)", "mempalace_list_drawers", lambda i: deep(None, None, i)),
        (
            "mempalace_list_drawers (a wing, deep page)",
            "mempalace_list_drawers",
            lambda i: deep(place(i)[0], None, i),
        ),
        (
            "mempalace_list_drawers (wing and room, deep page)",
            "mempalace_list_drawers",
            lambda i: deep(*place(i), i),
        ),
        (
            "mempalace_list_drawers (a room, deep page)",
            "mempalace_list_drawers",
            lambda i: deep(None, place(i)[1], i),
        ),
        ("mempalace_kg_query", "mempalace_kg_query", lambda i: {"entity": ent(i)}),
        ("mempalace_kg_timeline (an entity)", "mempalace_kg_timeline", lambda i: {"entity": ent(i)}),
        ("mempalace_kg_stats", "mempalace_kg_stats", lambda i: {}),
        ("mempalace_traverse", "mempalace_traverse", lambda i: {"start_room": place(i)[1], "max_hops": 2}),
        ("mempalace_find_tunnels", "mempalace_find_tunnels", lambda i: {}),
        ("mempalace_graph_stats", "mempalace_graph_stats", lambda i: {}),
        ("mempalace_list_tunnels", "mempalace_list_tunnels", lambda i: {}),
        (
            "mempalace_follow_tunnels",
            "mempalace_follow_tunnels",
            lambda i: {"wing": place(i % TUNNELS)[0], "room": place(i % TUNNELS)[1]},
        ),
        ("mempalace_list_hallways", "mempalace_list_hallways", lambda i: {}),
        ("mempalace_diary_read", "mempalace_diary_read", lambda i: {"agent_name": "bench", "last_n": 10}),
    ]


def pg_tools(case: Case) -> list:
    """(row, tool, arguments of call i) on the plugin's server; the writing tool last."""
    place, ent, q = (
        lambda i: case.places[i % len(case.places)],
        lambda i: case.entities[i % len(case.entities)],
        case.question,
    )
    return [
        (
            "pg_search_around_entity (2 hops)",
            "pg_search_around_entity",
            lambda i: {"entity": ent(i), "query": q(i), "hops": 2},
        ),
        (
            "pg_search_around_entity (2 hops, boost)",
            "pg_search_around_entity",
            lambda i: {"entity": ent(i), "query": q(i), "hops": 2, "mode": "boost"},
        ),
        ("pg_entity_facts", "pg_entity_facts", lambda i: {"entity": ent(i), "query": q(i)}),
        ("pg_entities_for_query", "pg_entities_for_query", lambda i: {"query": q(i)}),
        ("pg_hybrid_search", "pg_hybrid_search", lambda i: {"query": q(i)}),
        (
            "pg_hybrid_search (wing)",
            "pg_hybrid_search",
            lambda i: {"query": q(i), "wing": place(i)[0]},
        ),
        (
            "pg_file_memory (writes)",
            "pg_file_memory",
            lambda i: {
                "wing": "bench",
                "room": "filed",
                "content": f"Memory {i} of run {case.tag}: {q(i)}.",
                "facts": [{"subject": ent(i), "predicate": "noted", "object": f"Note {case.tag} {i}"}],
            },
        ),
    ]


async def call(session, tool: str, arguments: dict) -> tuple[float, str | None, str]:
    """One call as a client makes it: ms to the parsed answer, the error it answered, if any (an MCP
    tool error, or MemPalace's ``{"error": ...}`` / ``{"success": false}``), and its text."""
    t0 = time.perf_counter()
    result = await session.session.call_tool(tool, arguments)
    answer = result.structured_content
    if answer is None:
        text = text_of(result)
        try:
            answer = json.loads(text)
        except ValueError:
            answer = {"error": text} if result.is_error else {}
    ms = (time.perf_counter() - t0) * 1000
    if result.is_error:
        return ms, text_of(result)[:300], ""
    if isinstance(answer, dict) and (answer.get("error") or answer.get("success") is False):
        return ms, str(answer.get("error") or answer)[:300], ""
    return ms, None, json.dumps(answer)


async def time_tools(case: Case, session, server: str, tools: list) -> None:
    """Each tool: a first call (kept as ``first_ms``), then up to ``reps`` calls, fewer past the budget.
    A call over the bound ends the row, recorded as over it."""
    reps, bound = case.args.reps, case.args.call_timeout
    for label, tool, arguments in tools:
        times, error, text, first = [], None, "", None
        start = time.perf_counter()
        for i in range(-1, reps):
            try:
                with anyio.fail_after(bound):
                    ms, error, text = await call(session, tool, arguments(i))
            except TimeoutError:
                error = f"over {bound:.0f} s"
            if error:
                break
            if i >= 0:
                times.append(ms)
            else:
                first = ms
            if i + 1 >= 3 and time.perf_counter() - start > case.args.budget:
                break
        case.record(
            label, server, times, error, first_ms=first, answer=_preview(text), answer_chars=len(text)
        )


async def make_tunnels(case: Case, session) -> None:
    """Explicit tunnels between drawers of the palace (MemPalace keeps them in a file beside it), untimed."""
    for k in range(TUNNELS):
        (wing, room), (to_wing, to_room) = case.places[k], case.places[k + 1]
        _, error, _ = await call(
            session,
            "mempalace_create_tunnel",
            {
                "source_wing": wing,
                "source_room": room,
                "target_wing": to_wing,
                "target_room": to_room,
                "label": f"tunnel {k}",
                "source_drawer_id": case.drawers[k],
                "target_drawer_id": case.drawers[k + 1],
            },
        )
        if error:
            raise RuntimeError(f"mempalace_create_tunnel: {error}")


async def time_cold_traverse(case: Case, errlog) -> None:
    """``mempalace_traverse`` as a new server's first call: MemPalace's graph cache is empty, so it
    reads the grouped counts of the palace's drawers (what later calls within 60 s skip)."""
    times, error = [], None
    for i in range(FRESH_SERVERS):
        async with stdio_session(mempalace_server(Path(case.palace)), case.env(), errlog=errlog) as mp:
            ms, error, text = await call(mp, "mempalace_traverse", {"start_room": case.places[i][1]})
        if error:
            break
        times.append(ms)
    case.record(COLD_ROW, "MCP, mempalace.mcp_server", times, error, answer=_preview(text))


async def time_mcp(case: Case) -> None:
    with open(case.errlog, "a") as errlog:
        await time_cold_traverse(case, errlog)
        async with stdio_session(mempalace_server(Path(case.palace)), case.env(), errlog=errlog) as mp:
            await make_tunnels(case, mp)
            await time_tools(case, mp, "MCP, mempalace.mcp_server", mempalace_tools(case))
        if case.store == "postgres":
            async with stdio_session(pg_server(Path(case.palace)), case.env(), errlog=errlog) as pg:
                await time_tools(case, pg, "MCP, mempalace-pg mcp", pg_tools(case))


# ----------------------------------------------------------------------------- one size
def run_case(n: int, store: str, dsn: str, url: str, model: str, work: Path, args, run: dict) -> None:
    """One kept palace, cloned (or ``--in-place``): its rows go into ``run`` (and the run's JSON) as they
    are measured."""
    out: dict = {"n": n, "store": store, "rows": {}}
    run["cases"].append(out)
    t0 = time.perf_counter()
    if args.in_place:
        opened = kp.in_place(store, n, dsn, facts=args.facts)
    else:
        opened = kp.clone(store, n, dsn, work, f"{store}_{n}_{uuid.uuid4().hex[:6]}", facts=args.facts)
    with (
        opened as (
            palace,
            env,
            clone_dsn,
        )
    ):
        out["clone_s"] = time.perf_counter() - t0
        out["kept"] = {k: v for k, v in kp.Kept(store, n).manifest.items() if k != "versions"}
        print(f"  {n:,} {store}: opened in {out['clone_s']:.0f} s", flush=True)
        case = Case(n, store, palace, env, clone_dsn, url, model, args, sink=lambda: save_partial(run))
        case.rows = out["rows"]
        if store == "postgres":
            out["sizes_mb"] = table_sizes(clone_dsn)
        if store == "postgres" and not args.skip_before_after and args.part == "tools":
            time_before_after(case)
        if args.part == "bulk":
            time_bulk(case)
            return
        if not args.skip_cli:
            time_clis(case)
        anyio.run(time_mcp, case)


def table_sizes(dsn: str) -> dict:
    """MB on disk (with indexes) of the palace's tables: the drawers (every records partition), and the
    tables kept beside them (sign bits, listing keys)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT CASE WHEN c.relname LIKE 'records%%' THEN 'records' ELSE c.relname END, "
            "sum(pg_total_relation_size(c.oid)) / 1e6 FROM pg_class c "
            "WHERE c.relnamespace = %s::regnamespace AND c.relkind = 'r' "
            "AND (c.relname LIKE 'records\\_%%' OR c.relname IN ('vector_bits', 'listing_keys')) GROUP BY 1",
            (kp.SCHEMA,),
        ).fetchall()
    return {name: round(float(mb), 1) for name, mb in rows}


def save_partial(run: dict) -> None:
    """The run so far, to its JSON outside the repository (a stopped run keeps what it saw)."""
    path = Path(run["partial"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run, indent=1))


# ----------------------------------------------------------------------------- report
FLOOR_ROW = "`mempalace --version` (a process's floor)"


def _cell(row: dict | None, floor: float = 0.0) -> str:
    """p50 / p95, marked when p95 passes 1 s; a command line's beyond ``floor`` (what MemPalace's own
    process start costs, ``mempalace --version``), as the target counts it."""
    if row is None:
        return "—"
    if "error" in row:
        return ("over the bound: " if row["error"].startswith("over ") else "error: ") + row["error"][
            :60
        ].replace("|", "/")
    mark = (
        ""
        if row["p95"] - floor < SECONDS or "peak_mb" in row  # whole-palace jobs: no 1 s line
        else (" **(over 1 s beyond the floor)**" if floor else " **(over 1 s)**")
    )
    first = f" (first {row['first_ms']:,.0f})" if row.get("first_ms") and row["first_ms"] >= SECONDS else ""
    peak = f", peak {row['peak_mb']:,.0f} MB" if row.get("peak_mb") else ""
    if row.get("rows_per_s"):
        peak += f", {row['rows_per_s']:,.0f} rows/s"
    if row.get("index_build_s"):
        peak += f" (of it the index build {row['index_build_s'] * 1000:,.0f})"
    return f"{row['p50']:,.1f} / {row['p95']:,.1f}{mark}{first}{peak}"


def _floor(case: dict, label: str) -> float:
    """What MemPalace's own process start costs (p50 of ``mempalace --version``), for the command lines
    that are not whole-palace jobs; 0 for every other row."""
    row = case["rows"].get(label) or {}
    if row.get("through") != "process" or "peak_mb" in row or label == FLOOR_ROW:
        return 0.0
    return float((case["rows"].get(FLOOR_ROW) or {}).get("p50", 0.0))


def _same(case: dict) -> str:
    return "identical" if all(r.get("same_answer", True) for r in case["rows"].values()) else "DIFFERENT"


def render(cases: list[dict], meta: dict) -> str:
    columns = [column(c) for c in cases]
    by = {column(c): c for c in cases}
    head = (
        "| command or tool | called through | " + " | ".join(column_name(by[col]) for col in columns) + " |"
    )
    upsert = meta.get("written") == "upsert"
    grown = "then" in meta.get("written", "")  # built in parts (kept_palaces.py grow)
    if meta.get("part", "tools") != "tools":
        title = "## Whole-palace jobs: export, backup, restore, migrate, against pg_dump/pg_restore"
    elif meta.get("in_place"):
        title = "## Every command and MCP tool on the biggest kept palace, in place"
    elif upsert:
        title = "## Every command and MCP tool on a palace written through upsert"
    else:
        title = "## Every command and MCP tool, as the palace grows"
    written = (
        "postgres written through MemPalace's `upsert` in batches of 1,000 and kept as the writer and the "
        "index folder left it (no VACUUM; the folder's settle time in the last line)"
        if upsert
        else f"postgres written {meta['written'].replace('bulk', 'by the bulk loader')} in parts, "
        "measured in place (not a clone: its copy would not fit beside it; `pg_file_memory`'s drawers "
        "stay in it)"
        if grown
        else "postgres written by the bulk loader and quiet"
    )
    lines = [
        title,
        "",
        f"`python benchmarks/bench_commands.py --sizes {meta['sizes']} --stores {meta['stores']} "
        f"--part {meta.get('part', 'tools')}{' --in-place' if meta.get('in_place') else ''}`"
        + (
            ", as runs of one size each joined by `--report` (a row measured again by a later run is the "
            "later run's) "
            if meta.get("runs")
            else " "
        )
        + f"({meta['when']}, {meta['machine']}, {meta['versions']}). "
        + (
            "Each palace a kept palace itself"
            if meta.get("in_place")
            else "Each palace a fresh clone of a kept palace"
        )
        + " (`benchmarks/kept_palaces.py`: the skewed wings and rooms of `benchmarks/skewed_palace.py`, "
        f"{meta['facts']:,} facts between {meta['entities']:,} entities, each drawn from a drawer; "
        f"{written}, Chroma through MemPalace's backend API). "
        "Cells: p50 / p95 ms, marked where p95 passes 1 s (a command line's: beyond the p50 of `mempalace "
        "--version`, MemPalace's own start); a first call over 1 s is shown; whole-palace jobs with their "
        "peak memory. "
        "Command lines: wall time of a process that exits (Python's start included), a warm-up run "
        f"first, {meta['cli_reps']} runs (`export`, `backup`, `restore` and PostgreSQL's own `pg_dump`/"
        f"`pg_restore`: {meta['heavy_reps']}, no warm-up; restores into a new database each time). MCP "
        "tools: called by the official MCP SDK's client over stdio, one session per server, a first "
        f"call, then up to {meta['reps']} calls, timed at the client; each call bounded at "
        f"{meta['call_timeout']:.0f} s. Queries embedded by {meta['model']}.",
        "",
        head,
        "|---|---|" + "---|" * len(columns),
    ]
    labels = list(dict.fromkeys(label for c in cases for label in c["rows"]))
    if COLD_ROW in labels and "mempalace_traverse" in labels:  # beside the warm calls it explains
        labels.remove(COLD_ROW)
        labels.insert(labels.index("mempalace_traverse") + 1, COLD_ROW)
    for label in labels:
        through = next(c["rows"][label]["through"] for c in cases if label in c["rows"])
        cells = [_cell(by[col]["rows"].get(label), _floor(by[col], label)) for col in columns]
        lines.append(f"| {label} | {through} | " + " | ".join(cells) + " |")
    sized = [
        f"{column_name(c)}: "
        + ", ".join(f"{label} {r['bytes'] / 1e6:,.0f} MB" for label, r in c["rows"].items() if r.get("bytes"))
        for c in cases
        if any(r.get("bytes") for r in c["rows"].values())
    ]
    if sized:
        lines += [
            "",
            "Files written: " + "; ".join(sized) + ". `mempalace-pg backup` is pg_dump's custom format "
            "compressed with zstd at level 1 (gzip at level 1 with a pg_dump older than 16); PostgreSQL's "
            "`pg_dump -Fc` with its default, gzip at level 6. `restore --jobs N` and `pg_restore --jobs N` "
            "run N sessions side by side; `restore --jobs N`'s share the parallel workers one segment "
            "build gets (two sessions where a build gets two: none each), `pg_restore --jobs N`'s take the "
            "server's `max_parallel_maintenance_workers` each (2 on these servers; pgvector before 0.8.2 "
            "builds HNSW serially whatever they say).",
        ]
    lines += [
        "",
        "`mempalace_traverse` and `mempalace_find_tunnels` answer from MemPalace's graph cache "
        "(`palace_graph.build_graph`, 60 s) after a server's first call, which reads the grouped room "
        f"counts: the row `{COLD_ROW}` times that first call, of {meta['fresh']} servers started for it. "
        "The before/after rows time, in one process on the same palace, MemPalace's own "
        "`tool_list_drawers` (every drawer in scope read, then one page) and revision 0008's grouped "
        "read of every drawer, against what the plugin answers now; the answers were compared: "
        + ", ".join(f"{c['n']:,}: {_same(c)}" for c in cases if c["store"] == "postgres")
        + "."
        if any("same_answer" in r for c in cases for r in c["rows"].values())
        else "",
        "",
        "Kept palaces: "
        + "; ".join(
            f"{column_name(c)} built in {c['kept']['build_s']:,.0f} s "
            + (
                f"(the folder done {c['kept']['settle_s']:,.0f} s after the writer) "
                if (upsert or grown) and "settle_s" in c["kept"]
                else ""
            )
            + f"({c['kept']['bytes'] / 1e9:.1f} GB"
            + "".join(f"; {t} {mb:,.0f} MB" for t, mb in sorted(c.get("sizes_mb", {}).items()))
            + (")" if meta.get("in_place") else f"), cloned in {c['clone_s']:.0f} s")
            + "".join(
                f"; its schema upgraded in place to {u['output'].split('revision ')[-1].split(' ')[0]} "
                f"in {u['seconds']:,.1f} s"
                for u in c["kept"].get("upgrades", [])
            )
            for c in cases
            if "kept" in c
        )
        + ".",
        *(
            [
                "",
                "A column of another label than the store's is a run of an earlier release's code on the "
                "same kept palace, before the upgrade named on the line above (its run's JSON relabelled, "
                "joined by `--report`).",
            ]
            if any(c["store"] not in ("postgres", "chroma") for c in cases)
            else []
        ),
        "",
    ]
    return "\n".join(lines)


def section_name(meta: dict) -> str:
    """The RESULTS.md section a run makes: the tools on bulk-loaded palaces, on upsert-written ones, or
    the whole-palace jobs."""
    if meta.get("part", "tools") != "tools":
        return "commands_bulk"
    if meta.get("in_place"):
        return "commands_in_place"
    return "commands_upsert" if meta.get("written") == "upsert" else "commands"


def server_of(versions: str) -> str:
    """The server of a run's ``versions`` line (``postgresql 17.12 (Debian ...), pgvector 0.8.0, age 1.5.0,
    mempalace ...``): its PostgreSQL, pgvector and AGE."""
    parts = versions.split(", ")
    return f"PostgreSQL {parts[0].split()[1]}, {parts[1]}, {parts[2]}"


def column(case: dict) -> tuple:
    """A report's column: a size and store, and the server where runs on several are joined."""
    return case["n"], case["store"], case.get("server", "")


def column_name(case: dict) -> str:
    n, store, server = column(case)
    return f"{n:,} {store}" + (f" ({server})" if server else "")


def report(paths: list, *, write: bool) -> int:
    """One report of runs made apart (one size each, so no run passes 30 minutes), joined in the order
    given: a row measured by more than one run is the later run's."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    parts = {r["meta"].get("part", "tools") for r in runs}
    if len(parts) != 1:
        raise SystemExit(f"runs of different parts: {sorted(parts)}")
    meta = dict(runs[-1]["meta"])
    meta["sizes"] = ",".join(dict.fromkeys(str(c["n"]) for r in runs for c in r["cases"]))
    meta["stores"] = ",".join(dict.fromkeys(c["store"] for r in runs for c in r["cases"]))
    meta["runs"] = [r["meta"]["when"] for r in runs]
    meta["when"] = ", ".join(meta["runs"])
    # runs on different servers (another PostgreSQL or pgvector) are columns of their own, named by server
    servers = [server_of(r["meta"]["versions"]) for r in runs]
    if len(set(servers)) > 1:
        for r, server in zip(runs, servers, strict=True):
            for c in r["cases"]:
                c["server"] = server
        # a size and store measured on one server only needs no name in its head
        seen: dict = {}
        for c in (c for r in runs for c in r["cases"]):
            seen.setdefault((c["n"], c["store"]), set()).add(c["server"])
        for c in (c for r in runs for c in r["cases"]):
            if len(seen[(c["n"], c["store"])]) == 1 and c["server"] == servers[0]:
                del c["server"]
        meta["versions"] = (
            f"{servers[0].lower()} where a column's head names no other server, "
            + meta["versions"].split(", ", 3)[-1]
        )
    merged: dict = {}  # one case per column; a row measured again by a later run replaces it
    for c in (c for r in runs for c in r["cases"]):
        case = merged.setdefault(column(c), {**c, "rows": {}})
        case["rows"].update(c["rows"])
        case.update({k: v for k, v in c.items() if k != "rows"})
    cases = sorted(merged.values(), key=lambda c: (c["store"] != "postgres", c["n"]))
    name = section_name(meta)
    common.save_run(name, meta, {"cases": cases}, render(cases, meta), write=write)
    return 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        palace, places, reps, budget, answer = sys.argv[2:7]
        Path(answer).write_text(json.dumps(child_before_after(palace, places, int(reps), float(budget))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--stores", default="postgres,chroma", help="postgres and/or chroma (where kept)")
    ap.add_argument("--facts", type=int, default=3000, help="facts the kept palaces hold (default 3000)")
    ap.add_argument("--reps", type=int, default=30, help="calls per MCP tool (default 30)")
    ap.add_argument("--cli-reps", type=int, default=8, help="runs per command line (default 8)")
    ap.add_argument("--heavy-reps", type=int, default=2, help="runs of export, backup, restore (default 2)")
    ap.add_argument(
        "--restore-jobs",
        type=int,
        default=os.cpu_count() or 2,
        help="sessions of the parallel restores, the plugin's and pg_restore's (default: the cores)",
    )
    ap.add_argument("--budget", type=float, default=30.0, help="seconds per row before fewer calls")
    ap.add_argument("--call-timeout", type=float, default=60.0, help="bound of one call, in seconds")
    ap.add_argument("--bulk-timeout", type=float, default=900.0, help="bound of one whole-palace job")
    ap.add_argument("--model", default="hash", choices=["hash", "minilm"], help="the query embedder")
    ap.add_argument(
        "--part",
        choices=["tools", "bulk"],
        default="tools",
        help="tools: command lines and MCP tools (report `commands`); bulk: the whole-palace jobs (report "
        "`commands_bulk`), run apart so that neither run passes 30 minutes at 1M",
    )
    ap.add_argument(
        "--bulk-jobs",
        choices=["all", "plugin", "postgres"],
        default="all",
        help="with --part bulk: the plugin's jobs, PostgreSQL's own, or both (at 1M, one run each)",
    )
    ap.add_argument(
        "--in-place",
        action="store_true",
        help="measure the kept palaces themselves, not clones (a 5M palace's clone would not fit beside it; "
        "pg_file_memory's drawers and facts stay in it); report `commands_in_place`",
    )
    ap.add_argument("--skip-cli", action="store_true", help="only the MCP tools")
    ap.add_argument("--skip-before-after", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    ap.add_argument(
        "--report",
        nargs="+",
        metavar="RUN_JSON",
        help="make the report from these runs' JSON (KEEP/runs/...), one run per size, measuring nothing",
    )
    args = ap.parse_args()
    if args.report:
        return report(args.report, write=not args.no_write)
    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    args.admin_dsn = dsn
    sizes = [int(s) for s in args.sizes.split(",")]
    stores = [s for s in args.stores.split(",") if s]
    meta = common.run_meta(
        dsn,
        sizes=args.sizes,
        stores=args.stores,
        part=args.part,
        facts=args.facts,
        entities=kp.Kept("postgres", sizes[0]).manifest.get("entities", 0),
        reps=args.reps,
        cli_reps=args.cli_reps,
        heavy_reps=args.heavy_reps,
        call_timeout=args.call_timeout,
        model="all-MiniLM-L6-v2" if args.model == "minilm" else "MemPalace's hash embedder",
        fresh=FRESH_SERVERS,
        written=kp.Kept("postgres", sizes[0]).manifest.get("written", "bulk"),
        in_place=args.in_place,
    )
    stamp = meta["when"].replace(" ", "_").replace(":", "")
    run = {"meta": meta, "cases": [], "partial": str(kp.KEEP / "runs" / f"commands-{args.part}-{stamp}.json")}
    embedder, url = bm.start_embedder(args.model)
    work = Path(tempfile.mkdtemp(prefix="mpbench_cmd_", dir=kp.KEEP))
    try:
        for n in sizes:
            for store in stores:
                if not kp.Kept(store, n).manifest:
                    print(f"  {n:,} {store}: no kept palace (kept_palaces.py build), left out", flush=True)
                    continue
                run_case(n, store, dsn, url, args.model, work, args, run)
    finally:
        embedder.terminate()
        embedder.wait()
        shutil.rmtree(work, ignore_errors=True)
    cases = run["cases"]
    name = section_name(meta)
    common.save_run(name, meta, {"cases": cases}, render(cases, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
