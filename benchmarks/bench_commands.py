"""Benchmark: every MemPalace command and MCP tool a user reaches, on palaces as they grow (issue 26, item 3).

    python benchmarks/bench_commands.py --sizes 100000,300000,1000000        # writes RESULTS.md
    python benchmarks/bench_commands.py --sizes 5000,20000 --no-write        # a quick look

For each size, in a palace directory, home and schema of its own (dropped at the end):

1. a *writer* process opens the palace as ``mempalace mine`` does (``mempalace.palace.get_collection``,
   ``backend="postgres"``, which records the embedder) and upserts the drawers of
   :class:`skewed_palace.SkewedPalace` in batches of 1,000 through MemPalace's backend API, then adds
   ``--facts`` facts between ``--entities`` entities through the plugin's knowledge-graph API
   (``AgeKnowledgeGraph.add_triple``), each drawn from one of the drawers, and exits;
2. the run waits until the palace's folder has nothing left to do (as ``bench_filtered.py`` waits);
3. the command lines, each as a process that exits, timed from start to exit (Python's start and
   imports included, as a user waits for them; ``mempalace --version`` and ``mempalace-pg --help``
   show that floor): ``mempalace --backend postgres status`` (and
   ``search``, ``wake-up``), and every ``mempalace-pg`` command that reads the palace (``doctor``,
   ``db current``, ``kg stats``/``query``, ``search around``/``facts``/``entities``/``hybrid``,
   ``export``, ``backup``) and ``restore`` (of that backup, into a database made for each run, not
   timed, and dropped after it);
4. the MCP tools, called as an AI client calls them: the official ``mcp`` SDK's ``ClientSession`` over
   stdio, one long-lived session per server, timed at the client from request to parsed answer.
   MemPalace's own server (``python -m mempalace.mcp_server --palace P``) for its tools, the plugin's
   (``mempalace-pg mcp --palace P``) for the ``pg_*`` tools. One warm-up call per tool, not timed.
   ``pg_file_memory`` writes (a drawer and a fact per call) and runs last.

Queries are embedded by ``scripts/embedding_server.py`` through MemPalace's ``openai-compat`` setting
(MemPalace's hash embedder by default: the drawers' vectors are synthetic, and what a real model
costs per query does not depend on the palace). Per row: p50 / p95 ms, whether p95 is under 1 s,
and p50 at the largest size over p50 at the smallest (a row that pages through every drawer grows as
the palace does).
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
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))
import bench_backends as bb  # noqa: E402
import bench_filtered as bf  # noqa: E402
import bench_mine as bm  # noqa: E402
from skewed_palace import SkewedPalace  # noqa: E402

from mcp_client import mempalace_server, pg_server, stdio_session, text_of  # noqa: E402

BATCH = 1000
BIN = Path(sys.executable).parent
MEMPALACE = str(BIN / "mempalace")
MEMPALACE_PG = str(BIN / "mempalace-pg")
PREDICATES = ("works_on", "knows", "uses", "owns", "depends_on", "located_in", "reports_to", "mentions")
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


# ----------------------------------------------------------------------------- the palace
def fact_rows(palace: SkewedPalace, count: int, entities: int):
    """``count`` facts between ``entities`` entities (the first ones the busiest), each drawn from a drawer
    of the palace; about 8 % of them ended. The same on every run."""
    rng = np.random.default_rng((palace.seed, 9))
    weights = 1.0 / np.arange(1, entities + 1) ** 0.7
    weights /= weights.sum()
    ends = rng.random(count) < 0.08
    for i in range(count):
        s, o = (int(x) for x in rng.choice(entities, 2, replace=False, p=weights))
        year = 2012 + int(rng.integers(0, 13))
        yield {
            "subject": f"Entity {s}",
            "predicate": PREDICATES[i % len(PREDICATES)],
            "obj": f"Entity {o}",
            "valid_from": f"{year}-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}",
            "valid_to": f"{year + 1}-06-30" if ends[i] else None,
            "source_drawer_id": palace.drawer_id(int(rng.integers(0, palace.n))),
        }


def child_write(n: int, palace_dir: str, facts: int, entities: int) -> dict:
    """Drawers as ``mempalace mine`` writes them, then the facts; in a process that exits."""
    from mempalace.palace import get_collection

    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    palace = SkewedPalace(n)
    col = get_collection(palace_dir, create=True, backend="postgres")
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        ids, docs, metas, vecs = palace.batch(start, BATCH)
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    drawers_s = time.perf_counter() - t0
    kg = AgeKnowledgeGraph(palace_path=palace_dir)
    t0 = time.perf_counter()
    for row in fact_rows(palace, facts, entities):
        kg.add_triple(**row)
    facts_s = time.perf_counter() - t0
    stats = kg.stats()
    kg.close()
    return {
        "drawers_s": drawers_s,
        "drawers_per_s": n / drawers_s,
        "facts_s": facts_s,
        "facts_per_s": facts / facts_s if facts else 0.0,
        "kg": {k: stats[k] for k in ("entities", "triples")},
    }


class Case:
    """One size: its palace (directory, home, schema), what the calls ask about, and its timings."""

    def __init__(self, n: int, dsn: str, url: str, model: str, work: Path, args):
        self.n, self.dsn, self.args = n, dsn, args
        self.tag = f"cmd_{n}_{uuid.uuid4().hex[:6]}"
        self.schema = f"bench_{self.tag}"  # bench_filtered.wait_quiet's name for it
        self.root = work / self.tag
        self.p = bm.Palace(self.root, "postgres", url, model, dsn, self.schema)
        self.palace = str(self.p.path)
        skewed = SkewedPalace(n)
        rng = np.random.default_rng(20261204)
        picks = rng.integers(0, n, 64)
        self.drawers = [skewed.drawer_id(int(i)) for i in picks]
        self.places = [(skewed.wing_name(int(i)), skewed.room_name(int(i))) for i in picks]
        self.entities = [f"Entity {i}" for i in range(0, 60, 3)]
        self.rows: dict = {}
        self.errlog = self.root / "servers.log"

    def env(self, **extra) -> dict:
        return {**self.p.env, **extra}

    def palace_env(self) -> dict:
        """What this palace's environment adds to ours (for ``bench_backends.child_json``)."""
        return {k: v for k, v in self.p.env.items() if os.environ.get(k) != v and k != "MEMPALACE_PG_DSN"}

    def question(self, i: int) -> str:
        return f"{QUESTIONS[i % len(QUESTIONS)]} w{(i * 37) % 4000}"

    def record(self, label: str, through: str, times: list, error: str | None = None, **extra) -> None:
        row = {"through": through, **(bb.summary(times) if times else {"n": 0}), **extra}
        if error:
            row["error"] = error
        self.rows[label] = row
        shown = f"{row['p50']:.1f} / {row['p95']:.1f} ms (n={row['n']})" if times else "-"
        print(f"  {self.n:,}: {label}: {shown}" + (f"  ERROR {error[:200]}" if error else ""), flush=True)


# ----------------------------------------------------------------------------- command lines
def _preview(text: str) -> str:
    """The start of what a command or tool answered, kept in the JSON to show it answered something."""
    return " ".join((text or "").split())[:240]


def run_cli(cmd: list, env: dict) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, errors="backslashreplace", stdin=subprocess.DEVNULL
    )
    return (time.perf_counter() - t0) * 1000, proc


def time_cli(case: Case, label: str, make, *, reps: int, warm: bool = True, env=None, before=None) -> None:
    """Run ``make(i)`` (a command line) ``reps`` times as a process that exits, after a warm-up run;
    fewer past the time budget, never fewer than 2. Without ``warm`` (the jobs over a whole palace:
    export, backup, restore) no warm-up, and one run past the budget is enough.
    ``before(i)`` prepares run i, untimed."""
    env = env or case.env()
    times, error, proc = [], None, None
    start = time.perf_counter()
    for i in range(-1 if warm else 0, reps):
        if before:
            before(i)
        ms, proc = run_cli(make(i), env(i) if callable(env) else env)
        if proc.returncode != 0:
            error = f"exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-300:]}"
            break
        if i >= 0:
            times.append(ms)
        if i + 1 >= (2 if warm else 1) and time.perf_counter() - start > case.args.budget:
            break
    case.record(label, "process", times, error, answer=_preview(proc.stdout if proc else ""))


def pg_dump_tools(dsn: str) -> tuple[str, str]:
    """The server's own pg_dump / pg_restore (its major version), as the backup tests find them."""
    import psycopg
    from server_tools import chroot_tool

    with psycopg.connect(dsn) as conn:
        major = conn.info.server_version // 10000
    base = Path(os.environ.get("MEMPALACE_PG_ROOT_BASE", "/var/tmp/mempalace-pg"))
    for stack in (os.environ.get("MEMPALACE_PG_TEST_STACK"), "trixie", "sid"):
        if stack and (base / stack / f"usr/lib/postgresql/{major}/bin/pg_dump").exists():
            return tuple(
                chroot_tool(str(base / stack), f"/usr/lib/postgresql/{major}/bin/{t}")
                for t in ("pg_dump", "pg_restore")
            )
    return "pg_dump", "pg_restore"


def with_dbname(dsn: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    return make_conninfo(**{**conninfo_to_dict(dsn), "dbname": dbname})


def time_clis(case: Case) -> None:
    """The command lines a user runs on the palace, each as a process that exits."""
    reps, heavy = case.args.cli_reps, case.args.heavy_reps
    p = ["--palace", case.palace]
    mp = [MEMPALACE, "--palace", case.palace, "--backend", "postgres"]
    q, ent = case.question, lambda i: case.entities[i % len(case.entities)]
    # what any command costs before it does anything: the interpreter, the imports, the exit
    time_cli(case, "`mempalace --version` (a process's floor)", lambda i: [MEMPALACE, "--version"], reps=reps)
    time_cli(case, "`mempalace-pg --help` (a process's floor)", lambda i: [MEMPALACE_PG, "--help"], reps=reps)
    time_cli(case, "`mempalace status`", lambda i: [*mp, "status"], reps=reps)
    time_cli(case, "`mempalace search`", lambda i: [*mp, "search", q(i)], reps=reps)
    time_cli(case, "`mempalace wake-up`", lambda i: [*mp, "wake-up"], reps=reps)
    pg = [MEMPALACE_PG]
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
    out = case.root / "out"
    out.mkdir(exist_ok=True)
    time_cli(
        case,
        "`mempalace-pg export`",
        lambda i: [*pg, "export", str(out / "palace.jsonl"), *p],
        reps=heavy,
        warm=False,
    )
    case.rows["`mempalace-pg export`"]["bytes"] = _size(out / "palace.jsonl")
    (out / "palace.jsonl").unlink(missing_ok=True)
    pg_dump, pg_restore = pg_dump_tools(case.dsn)
    dump = out / "palace.dump"
    time_cli(
        case,
        "`mempalace-pg backup`",
        lambda i: [*pg, "backup", str(dump), "--pg-dump", pg_dump],
        reps=heavy,
        warm=False,
    )
    case.rows["`mempalace-pg backup`"]["bytes"] = _size(dump)
    if dump.exists():
        time_restores(case, dump, pg_restore)
    dump.unlink(missing_ok=True)


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def time_restores(case: Case, dump: Path, pg_restore: str) -> None:
    """``mempalace-pg restore`` of the backup, each run into a new database that has the extensions
    (``mempalace-pg db bootstrap``, untimed), dropped after it."""
    import psycopg

    made: list[str] = []

    def before(i: int) -> None:
        while made:
            drop_database(case.dsn, made.pop())
        name = f"{case.tag}_restore_{i + 1}"
        with psycopg.connect(case.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        boot = subprocess.run(
            [MEMPALACE_PG, "db", "bootstrap"],
            env=case.env(MEMPALACE_PG_DSN=with_dbname(case.dsn, name)),
            capture_output=True,
            text=True,
        )
        if boot.returncode:
            raise RuntimeError(f"db bootstrap of {name}: {boot.stderr[-500:]}")

    def env(i: int) -> dict:
        return case.env(MEMPALACE_PG_DSN=with_dbname(case.dsn, made[-1]))

    try:
        time_cli(
            case,
            "`mempalace-pg restore`",
            lambda i: [MEMPALACE_PG, "restore", str(dump), "--pg-restore", pg_restore],
            reps=case.args.heavy_reps,
            warm=False,
            env=env,
            before=before,
        )
    finally:
        while made:
            drop_database(case.dsn, made.pop())


def drop_database(dsn: str, name: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ----------------------------------------------------------------------------- MCP tools
def mempalace_tools(case: Case) -> list:
    """(row, tool, arguments of call i) on MemPalace's own server: its read tools and its graph tools."""
    drawer, place, ent, q = (
        lambda i: case.drawers[i % len(case.drawers)],
        lambda i: case.places[i % len(case.places)],
        lambda i: case.entities[i % len(case.entities)],
        case.question,
    )
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
    reps = case.args.reps
    for label, tool, arguments in tools:
        times, error, text, first = [], None, "", None
        start = time.perf_counter()
        for i in range(-1, reps):
            ms, error, text = await call(session, tool, arguments(i))
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
        async with stdio_session(pg_server(Path(case.palace)), case.env(), errlog=errlog) as pg:
            await time_tools(case, pg, "MCP, mempalace-pg mcp", pg_tools(case))


# ----------------------------------------------------------------------------- one size
def run_size(n: int, dsn: str, url: str, model: str, work: Path, args) -> dict:
    case = Case(n, dsn, url, model, work, args)
    script = str(Path(__file__).resolve())
    out: dict = {"n": n}
    try:
        out["write"] = bb.child_json(
            script, ["write", n, case.palace, args.facts, args.entities], dsn, env=case.palace_env()
        )
        w = out["write"]
        print(
            f"  {n:,}: written at {w['drawers_per_s']:.0f} drawers/s, {w['kg']['triples']} facts at "
            f"{w['facts_per_s']:.0f}/s",
            flush=True,
        )
        out["settle_s"] = bf.wait_quiet(dsn, case.tag)
        out["index"] = bf.index_state(dsn, case.tag)
        print(f"  {n:,}: quiet after {out['settle_s']:.0f} s, {out['index']}", flush=True)
        time_clis(case)
        anyio.run(time_mcp, case)
    finally:
        out["rows"] = case.rows
        with contextlib.suppress(TimeoutError):
            bf.wait_quiet(dsn, case.tag, timeout=300)  # pg_file_memory's drawers: let its folder finish
        bm.drop_postgres(dsn, case.schema)
    return out


# ----------------------------------------------------------------------------- report
def render(cases: list[dict], meta: dict) -> str:
    sizes = [c["n"] for c in cases]
    first, last = cases[0], cases[-1]
    head = "| command or tool | called through | " + " | ".join(
        f"{n:,}: p50 / p95 ms | p95 < 1 s" for n in sizes
    )
    grows = len(cases) > 1
    lines = [
        "## Every command and MCP tool, as the palace grows",
        "",
        f"`python benchmarks/bench_commands.py --sizes {meta['sizes']}` ({meta['when']}, {meta['machine']}, "
        f"{meta['versions']}). A palace of skewed wings and rooms (`benchmarks/skewed_palace.py`) upserted "
        "in batches of 1,000 through MemPalace's backend API by a process that exits, as `mempalace mine` "
        f"writes, and {meta['facts']:,} facts between {meta['entities']:,} entities through the plugin's "
        "knowledge-graph API, each drawn from a drawer; timed once the palace's folder had finished. "
        "Command lines: wall time of a process that exits (Python's start included), a warm-up run "
        f"first, {meta['cli_reps']} runs (`export`, `backup`, `restore`: {meta['heavy_reps']}, no warm-up; "
        "`restore` into a new database each time). MCP tools: called by the official MCP SDK's client "
        "over stdio, one session per server, a warm-up call first, then up to "
        f"{meta['reps']} calls, timed at the client. Queries embedded by {meta['model']}.",
        "",
        head + (f" | p50 {last['n']:,} ÷ {first['n']:,} |" if grows else " |"),
        "|---|---|" + "---|---|" * len(sizes) + ("---|" if grows else ""),
    ]
    labels = list(dict.fromkeys(label for c in cases for label in c["rows"]))
    if COLD_ROW in labels and "mempalace_traverse" in labels:  # beside the warm calls it explains
        labels.remove(COLD_ROW)
        labels.insert(labels.index("mempalace_traverse") + 1, COLD_ROW)
    for label in labels:
        through = next(c["rows"][label]["through"] for c in cases if label in c["rows"])
        cells = []
        for c in cases:
            row = c["rows"].get(label)
            if row is None or "error" in row:
                cells.append(("error: " + row["error"][:60].replace("|", "/")) if row else "—")
                cells.append("—")
            else:
                cells.append(f"{row['p50']:,.1f} / {row['p95']:,.1f}")
                cells.append("yes" if row["p95"] < SECONDS else "**no**")
        growth = ""
        if grows:
            a, b = first["rows"].get(label, {}), last["rows"].get(label, {})
            growth = f" {b['p50'] / a['p50']:.1f}x |" if "p50" in a and "p50" in b else " — |"
        lines.append(f"| {label} | {through} | " + " | ".join(cells) + " |" + growth)
    lines += [
        "",
        "`mempalace_traverse` and `mempalace_find_tunnels` answer from MemPalace's graph cache "
        "(`palace_graph.build_graph`, 60 s) after a server's first call, which reads the counts of "
        "every drawer grouped by room, wing and hall, as `mempalace_graph_stats` does on each call: "
        f"the row `{COLD_ROW}` times that first call, of {meta['fresh']} servers started for it.",
    ]
    lines += [
        "",
        "Writes: "
        + "; ".join(
            f"{c['n']:,} drawers at {c['write']['drawers_per_s']:,.0f}/s, facts at "
            f"{c['write']['facts_per_s']:,.0f}/s, folder quiet {c['settle_s']:.0f} s later"
            for c in cases
            if "write" in c and "settle_s" in c
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _role, n, palace_dir, facts, entities = sys.argv[2:7]
        print(json.dumps(child_write(int(n), palace_dir, int(facts), int(entities))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--facts", type=int, default=3000, help="facts in the knowledge graph (default 3000)")
    ap.add_argument("--entities", type=int, default=600, help="entities they are between (default 600)")
    ap.add_argument("--reps", type=int, default=30, help="calls per MCP tool (default 30)")
    ap.add_argument("--cli-reps", type=int, default=8, help="runs per command line (default 8)")
    ap.add_argument("--heavy-reps", type=int, default=3, help="runs of export, backup, restore (default 3)")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per row before fewer calls")
    ap.add_argument("--model", default="hash", choices=["hash", "minilm"], help="the query embedder")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    dsn = os.environ.get("MEMPALACE_PG_DSN") or bb.provisioned_dsn()
    sizes = [int(s) for s in args.sizes.split(",")]
    embedder, url = bm.start_embedder(args.model)
    work = Path(tempfile.mkdtemp(prefix="mpbench_cmd_"))
    cases = []
    try:
        for n in sizes:
            cases.append(run_size(n, dsn, url, args.model, work, args))
    finally:
        embedder.terminate()
        embedder.wait()
        shutil.rmtree(work, ignore_errors=True)
    meta = bb.run_meta(
        dsn,
        sizes=args.sizes,
        facts=args.facts,
        entities=args.entities,
        reps=args.reps,
        cli_reps=args.cli_reps,
        heavy_reps=args.heavy_reps,
        model="all-MiniLM-L6-v2" if args.model == "minilm" else "MemPalace's hash embedder",
        fresh=FRESH_SERVERS,
    )
    bb.save_run("commands", meta, {"cases": cases}, render(cases, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
