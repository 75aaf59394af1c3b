"""Benchmark: a team on one palace through MemPalace's HTTP team server, postgres against Chroma.

    python benchmarks/bench_team.py                        # 4, 16, 64 clients, paced and back to back
    python benchmarks/bench_team.py --clients 4 --think 0 --seconds 10 --no-write   # a quick look
    python benchmarks/bench_team.py --backends postgres --clients 64 --control-backlog 128   # the control
    python benchmarks/bench_team.py --render               # chart and RESULTS.md section of the saved run

For ``postgres`` (this package) and ``chroma`` (MemPalace's default), each in a palace and home of its own:

1. ``mempalace init`` and ``mempalace mine`` over Debian's Python library documentation (python3.11-doc),
   embedded offline by ``scripts/embedding_server.py`` through MemPalace's ``openai-compat`` setting;
2. ``mempalace serve`` on 127.0.0.1 (the real team server: ThreadingHTTPServer, JSON-RPC on ``/mcp``), and
   facts about a set of entities filed through it;
3. for each load shape (``--think``: a mean pause before each call, as an agent between turns, or none)
   and each client count, that many clients for the given seconds, each doing MCP's ``initialize`` and
   then ``tools/call``, the tool drawn at random: ``mempalace_search`` 70%, ``mempalace_add_drawer`` 20%
   (a paragraph of real text with a unique token), ``mempalace_kg_add`` 5% (a new fact),
   ``mempalace_kg_query`` 5%. Beside them, from the start, ``mempalace mine`` of a slice of the rest of
   the documentation: MemPalace hands it to the live server (a mine of its own is refused while the
   server holds the palace);
4. afterwards, with the server stopped, a new process reads the palace: every acknowledged drawer must be
   there exactly once (its token in one drawer) and every acknowledged fact once; the mines' drawers are
   counted, and for Chroma ``mempalace repair-status`` (its index against its SQLite) is run.

Clients run as threads in two processes, on the same two cores as the server, PostgreSQL and the embedder:
what is measured is the whole machine a homelab runs it on. Latency is per call, from the request written
to the answer read, so it includes the server's queue. ``--control-backlog N`` starts the server serve
would start, with socketserver's listen backlog raised to N: a control that tells accept-queue overflows
apart from anything the storage does, reported as a section of its own.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import bench_kg
import bench_mine as bm
import common
import numpy as np

HERE = Path(__file__).resolve().parent
DOCS = Path("/usr/share/doc/python3.11/html/_sources")
MIX = (
    ("mempalace_search", 70),
    ("mempalace_add_drawer", 20),
    ("mempalace_kg_add", 5),
    ("mempalace_kg_query", 5),
)
ENTITIES = [
    f"Project {name}" for name in ("Atlas", "Borealis", "Cedar", "Dune", "Ember", "Fjord", "Granite")
] + [
    f"{first} {last}"
    for first in ("Ana", "Ben", "Chen", "Dara", "Eli")
    for last in ("Okafor", "Lind", "Moreau")
]
TOKEN = re.compile(r"\bteamtok-[0-9a-f]{6}-\d+-\d+\b")
WING = "team_notes"


# ----------------------------------------------------------------------------- the server and its protocol
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CallFailed(RuntimeError):
    """A call that did not get an answer, with where it failed."""


class Client:
    """One MCP client: one keep-alive HTTP connection, JSON-RPC as MemPalace's ``/mcp`` speaks it."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.next_id = 0

    def rpc(self, method: str, params: dict) -> dict:
        self.next_id += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        # MemPalace's server answers every request with "Connection: close", so each call connects
        # anew; a failure is told apart by where it happened.
        try:
            self.conn.request("POST", "/mcp", body, {"Content-Type": "application/json"})
        except OSError as exc:
            raise CallFailed(f"connecting or sending: {type(exc).__name__}: {exc}") from exc
        try:
            resp = self.conn.getresponse()
            data = resp.read()
        except OSError as exc:
            raise CallFailed(f"waiting for the answer: {type(exc).__name__}: {exc}") from exc
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
        answer = json.loads(data)
        if "error" in answer:
            raise RuntimeError(f"JSON-RPC error {answer['error']}")
        return answer["result"]

    def call(self, tool: str, arguments: dict) -> dict:
        """The tool's answer (its JSON text), raising when the call or the tool failed."""
        result = self.rpc("tools/call", {"name": tool, "arguments": arguments})
        payload = json.loads(result["content"][0]["text"])
        if result.get("isError") or (
            isinstance(payload, dict) and (payload.get("success") is False or "error" in payload)
        ):
            raise RuntimeError(f"tool error: {str(payload)[:300]}")
        return payload

    def initialize(self) -> None:
        self.rpc(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench_team", "version": "1"},
            },
        )

    def close(self) -> None:
        self.conn.close()


def tcp_counters() -> dict:
    """The kernel's count of connections dropped because a listening socket's accept queue was full,
    and of connections reset because they were closed with data unread (for the whole machine)."""
    lines = [
        ln.split() for ln in Path("/proc/net/netstat").read_text().splitlines() if ln.startswith("TcpExt:")
    ]
    counters = dict(zip(lines[0][1:], map(int, lines[1][1:])))
    return {k: counters.get(k, 0) for k in ("ListenOverflows", "TCPAbortOnData")}


class Server:
    """``mempalace serve`` for a palace, on a free loopback port (no token: a loopback bind needs none)."""

    def __init__(self, palace: bm.Palace, log: Path, backlog: int = 0):
        self.port = free_port()
        self.log = log.open("w")
        where = ["--palace", str(palace.path), "--host", "127.0.0.1", "--port", str(self.port)]
        # serve's own --palace: the global one before the command does not reach the server it starts
        command = [bm.MEMPALACE, "serve", *where]
        if backlog:
            # A control, not the user's path: the server serve starts, with socketserver's listen backlog
            # (5) raised, to tell its accept-queue overflows from anything the palace's storage does.
            patch = (
                "import runpy, socketserver, sys; "
                "socketserver.TCPServer.request_queue_size = int(sys.argv.pop(1)); "
                "sys.argv[0] = 'mempalace.mcp_server'; "
                "runpy.run_module('mempalace.mcp_server', run_name='__main__')"
            )
            command = [sys.executable, "-c", patch, str(backlog), "--transport", "http", *where]
        self.proc = subprocess.Popen(
            command,
            # what serve puts in its child's environment
            env=dict(palace.env, **({"MEMPALACE_PALACE_PATH": str(palace.path)} if backlog else {})),
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.time() + 120
        while True:
            try:
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    c.close()
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"mempalace serve did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


# ----------------------------------------------------------------------------- the clients (child processes)
def client_loop(
    port: int, cid: int, run: str, start: float, seconds: float, think_s: float, paragraphs: list, out: list
) -> None:
    """One client until the clock runs out; with ``think_s``, an exponentially distributed pause of that
    mean before each call (an agent between turns), the first one drawn uniformly so clients spread."""
    rng = random.Random(f"{run}-{cid}")
    tools, weights = zip(*MIX)
    c = Client(port)
    t0 = time.perf_counter()
    try:
        c.initialize()
    except Exception as exc:  # counted like any call; the client goes on (MCP here is stateless)
        out.append(
            {
                "tool": "initialize",
                "ok": False,
                "error": str(exc)[:300],
                "at": 0.0,
                "ms": (time.perf_counter() - t0) * 1000,
            }
        )
    seq = 0
    while time.time() < start:
        time.sleep(0.001)
    pause = rng.uniform(0, think_s)
    while True:
        if think_s:
            time.sleep(pause)
            pause = rng.expovariate(1 / think_s)
        if time.time() >= start + seconds:
            break
        tool = rng.choices(tools, weights)[0]
        seq += 1
        record: dict = {"tool": tool}
        if tool == "mempalace_search":
            args = {"query": rng.choice(bm.QUESTIONS), "limit": 5}
        elif tool == "mempalace_add_drawer":
            token = f"teamtok-{run}-{cid}-{seq}"
            text = rng.choice(paragraphs)
            args = {
                "wing": WING,
                "room": f"member_{cid % 8}",
                "content": f"{token} {text}",
                "added_by": f"member{cid}",
            }
            record["token"] = token
        elif tool == "mempalace_kg_add":
            triple = [f"Note {run}-{cid}-{seq}", "concerns", rng.choice(ENTITIES)]
            args = {
                "subject": triple[0],
                "predicate": triple[1],
                "object": triple[2],
                "valid_from": "2026-12-02",
            }
            record["triple"] = triple
        else:
            args = {"entity": rng.choice(ENTITIES)}
        t0 = time.perf_counter()
        try:
            answer = c.call(tool, args)
            record["ok"] = True
            if tool == "mempalace_add_drawer":
                record["drawer_id"] = answer.get("drawer_id")
        except Exception as exc:  # every failure is a measured outcome, kept with its words
            record["ok"] = False
            record["error"] = (str(exc) if isinstance(exc, CallFailed) else f"{type(exc).__name__}: {exc}")[
                :300
            ]
            c.close()
            c = Client(port)
            try:
                c.initialize()
            except Exception:  # the next call records the failure
                pass
        record["ms"] = (time.perf_counter() - t0) * 1000
        record["at"] = time.time() - start
        out.append(record)
    c.close()


def child_clients(
    port: str, first: str, count: str, run: str, start: str, seconds: str, think_s: str, para_file: str
) -> None:
    paragraphs = json.loads(Path(para_file).read_text())
    records: list = []
    threads = [
        threading.Thread(
            target=client_loop,
            args=(
                int(port),
                int(first) + i,
                run,
                float(start),
                float(seconds),
                float(think_s),
                paragraphs,
                records,
            ),
        )
        for i in range(int(count))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(records))


def child_verify(palace: str, acked_file: str) -> None:
    """In a new process: are the acknowledged drawers and facts in the palace, each exactly once?"""
    from mempalace.backends import PalaceRef, get_backend
    from mempalace.knowledge_graph import KnowledgeGraph

    acked = json.loads(Path(acked_file).read_text())
    backend = get_backend("postgres" if (Path(palace) / "mempalace_pg.json").exists() else "chroma")
    col = backend.get_collection(
        palace=PalaceRef(id=palace, local_path=palace), collection_name="mempalace_drawers", create=False
    )
    got = col.get(where={"wing": WING}, include=["documents"])
    seen: dict[str, int] = {}
    for doc in got.documents:
        for token in TOKEN.findall(doc or ""):
            seen[token] = seen.get(token, 0) + 1
    ids = set(got.ids)
    tokens = acked["tokens"]
    drawers = {
        "acknowledged": len(tokens),
        "once": sum(1 for t in tokens if seen.get(t) == 1),
        "missing": sum(1 for t in tokens if t not in seen),
        "duplicated": sum(1 for t in tokens if seen.get(t, 0) > 1),
        "ids_missing": sum(1 for d in acked["drawer_ids"] if d not in ids),
        "in_wing": len(got.ids),
    }
    kg = KnowledgeGraph(db_path=str(Path(palace) / "knowledge_graph.sqlite3"))
    once = missing = dup = 0
    for subject, predicate, obj in acked["triples"]:
        n = sum(
            1
            for f in kg.query_entity(subject, direction="outgoing")
            if f.get("predicate") == predicate and f.get("object") == obj
        )
        once += n == 1
        missing += n == 0
        dup += n > 1
    facts = {"acknowledged": len(acked["triples"]), "once": once, "missing": missing, "duplicated": dup}
    mine_wings = {}
    for wing in acked["mine_wings"]:
        mine_wings[wing] = len(col.get(where={"wing": wing}, include=[]).ids)
    print(json.dumps({"drawers": drawers, "facts": facts, "mine_wings": mine_wings, "total": col.count()}))


# ----------------------------------------------------------------------------- parent: orchestrate + report
def paragraphs(files: list[Path], n: int = 400) -> list[str]:
    """Paragraphs of real prose (200-700 characters) from the documentation, for the drawers clients add."""
    out = []
    for f in files:
        for block in f.read_text(errors="replace").split("\n\n"):
            block = " ".join(block.split())
            if 200 <= len(block) <= 700 and not block.startswith((".. ", "=", "-", "*")):
                out.append(block)
    random.Random(7).shuffle(out)
    return out[:n]


def slices(files: list[Path], k: int) -> list[list[Path]]:
    """``files`` in ``k`` groups of about equal size (bytes), for one mine beside each client count."""
    groups: list[list[Path]] = [[] for _ in range(k)]
    sizes = [0] * k
    for f in sorted(files, key=lambda f: -f.stat().st_size):
        i = sizes.index(min(sizes))
        groups[i].append(f)
        sizes[i] += f.stat().st_size
    return groups


def run_level(
    server: Server, palace: bm.Palace, n: int, shape: dict, run: str, para_file: Path, mine_dir: Path
) -> dict:
    seconds, think_s = shape["seconds"], shape["think_s"]
    procs = min(2, n)
    start = time.time() + 3.0  # every client connected and initialised before the clock starts
    script = str(Path(__file__).resolve())
    counts = [n // procs + (1 if p < n % procs else 0) for p in range(procs)]  # clients per process
    clients = []
    for p, count in enumerate(counts):
        first = sum(counts[:p])
        clients.append(
            subprocess.Popen(
                [
                    sys.executable,
                    script,
                    "--child-clients",
                    str(server.port),
                    str(first),
                    str(count),
                    run,
                    str(start),
                    str(seconds),
                    str(think_s),
                    str(para_file),
                ],
                stdout=subprocess.PIPE,
                text=True,
                env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
            )
        )
    while time.time() < start:
        time.sleep(0.01)
    wing = f"team_mine_{run}"
    mine_t0 = time.perf_counter()
    mine = subprocess.Popen(
        [bm.MEMPALACE, "--palace", str(palace.path), "mine", str(mine_dir), "--wing", wing],
        # MemPalace hands it to the palace's live server; one of its own (MEMPALACE_HUB_FORWARD=0) is
        # refused while the server holds the palace ("palace ... is held by PID ...")
        env=palace.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="backslashreplace",
    )
    mine_done: dict = {}

    def wait_for_mine() -> None:  # its own end time, not when the clients were done
        mine_done["out"], mine_done["err"] = mine.communicate(timeout=1800)
        mine_done["wall_s"] = time.perf_counter() - mine_t0

    waiter = threading.Thread(target=wait_for_mine)
    waiter.start()
    cpu0, tcp0 = server.cpu_s(), tcp_counters()
    records = []
    for proc in clients:
        stdout, _ = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"a client process exited {proc.returncode}")
        records += json.loads(stdout.strip().splitlines()[-1])
    cpu = server.cpu_s() - cpu0
    tcp = {k: v - tcp0[k] for k, v in tcp_counters().items()}
    waiter.join()
    mine_err, mine_s = mine_done["err"], mine_done["wall_s"]
    return {
        "clients": n,
        "think_s": think_s,
        "seconds": seconds,
        "records": records,
        "server_cpu_share": cpu / seconds,
        "tcp": tcp,
        "mine": {
            "wing": wing,
            "rc": mine.returncode,
            "wall_s": mine_s,
            "stderr_tail": mine_err[-1500:],
        },
    }


def digest(level: dict) -> dict:
    """Per tool: calls, errors, p50/p95/p99 ms; calls/s over the level (successful ones)."""
    out: dict = {"clients": level["clients"], "think_s": level["think_s"], "tools": {}, "errors": {}}
    recs = level["records"]
    for tool, _ in MIX:
        mine = [r for r in recs if r["tool"] == tool]
        ok = [r["ms"] for r in mine if r["ok"]]
        row = {"calls": len(mine), "failed": len(mine) - len(ok)}
        if ok:
            p = np.percentile(np.asarray(ok), [50, 95, 99])
            row.update(p50=float(p[0]), p95=float(p[1]), p99=float(p[2]))
        out["tools"][tool] = row
    for r in recs:
        if not r["ok"]:
            key = re.sub(r"\d+", "N", r["error"])[:160]
            out["errors"][key] = out["errors"].get(key, 0) + 1
    mine_end = level["mine"]["wall_s"]
    for phase, keep in (
        ("while_mining", lambda r: r["at"] < mine_end),
        ("after_mine", lambda r: r["at"] >= mine_end),
    ):
        ok = [r["ms"] for r in recs if r["ok"] and r["tool"] == "mempalace_search" and keep(r)]
        if ok:
            p = np.percentile(np.asarray(ok), [50, 95])
            out[f"search_{phase}"] = {"calls": len(ok), "p50": float(p[0]), "p95": float(p[1])}
    out["initialize_failed"] = sum(1 for r in recs if r["tool"] == "initialize")
    out["ok_per_s"] = sum(1 for r in recs if r["ok"]) / level["seconds"]
    out["failures"] = [
        {k: r[k] for k in ("tool", "at", "ms", "error")}
        for r in sorted(recs, key=lambda r: r["at"])
        if not r["ok"]
    ][:8]
    out["server_cpu_share"] = level["server_cpu_share"]
    out["tcp"] = level["tcp"]
    out["mine"] = {k: v for k, v in level["mine"].items() if k in ("wing", "rc", "wall_s")}
    if level["mine"]["rc"]:
        out["mine"]["stderr_tail"] = level["mine"]["stderr_tail"]
    return out


def run_backend(
    backend: str, work: Path, url: str, dsn: str, args, para_file: Path, base: list, rest: list
) -> dict:
    root = work / backend
    schema = f"bench_team_{uuid.uuid4().hex[:6]}"
    palace = bm.Palace(root, backend, url, args.model, dsn, schema)
    corpus = bm.corpus_copy(root / "library", base, DOCS)
    result: dict = {"schema": schema if backend == "postgres" else None}
    result["mine_base_s"] = palace.mine(corpus, first=True)
    plan = [{"think_s": t, "seconds": args.seconds, "clients": n} for t in args.think for n in args.clients]
    groups = slices(rest, len(plan))
    mine_dirs = [bm.corpus_copy(root / f"slice{i}", g, DOCS) for i, g in enumerate(groups)]
    server = Server(palace, root / "serve.log", args.control_backlog)
    levels, acked = [], {"tokens": [], "drawer_ids": [], "triples": [], "mine_wings": []}
    try:
        seeder = Client(server.port)
        seeder.initialize()
        for i, entity in enumerate(ENTITIES):  # facts for kg_query to find
            for other in ENTITIES[i + 1 : i + 4]:
                seeder.call(
                    "mempalace_kg_add", {"subject": entity, "predicate": "works_with", "object": other}
                )
        seeder.close()
        for i, shape in enumerate(plan):
            run = f"{uuid.uuid4().hex[:6]}"
            n = shape["clients"]
            print(
                f"[bench_team] {backend}: {n} clients, think {shape['think_s']} s, for {args.seconds:.0f} s, "
                "a mine beside",
                file=sys.stderr,
            )
            level = run_level(server, palace, n, shape, run, para_file, mine_dirs[i])
            for r in level["records"]:
                if r["ok"] and r["tool"] == "mempalace_add_drawer":
                    acked["tokens"].append(r["token"])
                    acked["drawer_ids"].append(r["drawer_id"])
                elif r["ok"] and r["tool"] == "mempalace_kg_add":
                    acked["triples"].append(r["triple"])
            acked["mine_wings"].append(level["mine"]["wing"])
            levels.append(digest(level))
            summary = {k: levels[-1][k] for k in ("clients", "think_s", "ok_per_s", "errors")}
            print(f"[bench_team] {json.dumps(summary)[:600]}", file=sys.stderr)
    finally:
        server.stop()
    acked_file = root / "acked.json"
    acked_file.write_text(json.dumps(acked))
    script = str(Path(__file__).resolve())
    proc = subprocess.run(
        [sys.executable, script, "--child-verify", str(palace.path), str(acked_file)],
        env=palace.env,
        capture_output=True,
        text=True,
    )
    result["verify"] = (
        json.loads(proc.stdout.strip().splitlines()[-1])
        if proc.returncode == 0
        else {"failed": proc.stderr[-2000:]}
    )
    if backend == "chroma":
        status = subprocess.run(
            [bm.MEMPALACE, "--palace", str(palace.path), "repair-status"],
            env=palace.env,
            capture_output=True,
            text=True,
        )
        result["repair_status"] = {"rc": status.returncode, "output": (status.stdout + status.stderr)[-1500:]}
    result["levels"] = levels
    return result


def cell(row: dict) -> str:
    if "p50" not in row:
        return "none succeeded"
    return f"{row['p50']:.1f} / {row['p95']:.1f} / {row['p99']:.1f}"


def shape_name(think_s: float) -> str:
    return (
        "back to back (no pause)" if not think_s else f"a pause of {think_s:g} s on average before each call"
    )


def failure_notes(results: dict) -> list[str]:
    """What failed, per row, in the clients' and servers' own words (most frequent first)."""
    notes: list[str] = []
    for backend, r in results.items():
        for lv in r["levels"]:
            where = f"{backend}, {lv['clients']} clients, {'no pause' if not lv['think_s'] else 'paced'}"
            for err, k in sorted(lv["errors"].items(), key=lambda kv: -kv[1])[:3]:
                notes.append(f"- {where}, {k:,}×: `{err}`")
            if lv["mine"]["rc"]:
                tail = lv["mine"].get("stderr_tail", "").strip().splitlines()[-1:] or [""]
                notes.append(f"- {where}: the mine beside exited {lv['mine']['rc']}: `{tail[0][:200]}`")
        if "repair_status" in r:
            out = [ln for ln in r["repair_status"]["output"].splitlines() if ln.strip()][-4:]
            notes.append(
                f"- {backend}: `mempalace repair-status` afterwards (exit {r['repair_status']['rc']}): "
                + " / ".join(f"`{ln.strip()[:120]}`" for ln in out)
            )
    return notes


def render(results: dict, meta: dict) -> str:
    lines = [
        (
            f"## Control: the team load with MemPalace's server given a listen backlog of "
            f"{meta['control_backlog']} ({meta['when']})"
            if meta.get("control_backlog")
            else "## A team on one palace: `mempalace serve` under load, postgres against Chroma "
            f"({meta['when']})"
        ),
        "",
        f"Command: `{meta['command']}`. {meta['machine']}; {meta['versions']}. Palace: Debian's Python "
        f"library documentation mined by the real CLI ({meta['base_files']} files), embedded by "
        f"{meta['embedder']}, served by MemPalace's own `mempalace serve`. Each client calls tools over its "
        "HTTP endpoint (`mempalace_search` 70%, `mempalace_add_drawer` 20%, `mempalace_kg_add` 5%, "
        f"`mempalace_kg_query` 5%) for {meta['seconds']:.0f} s per row, while a `mempalace mine` of another "
        "slice of the documentation, started with the row, runs beside them (MemPalace hands a mine to the "
        "palace's live server, which runs it between requests). Clients, server, PostgreSQL and the "
        "embedder share the two cores. Latency p50 / p95 / p99 in ms per call, queueing in the server "
        "included.",
    ]
    backends = list(results)
    shapes = sorted({lv["think_s"] for r in results.values() for lv in r["levels"]}, reverse=True)
    if not meta.get("control_backlog"):
        lines += ["", "![the team load, postgres against Chroma](out/team.png)"]
    for think in shapes:
        lines += [
            "",
            f"**Clients {shape_name(think)}.**",
            "",
            "| backend | clients | calls/s (ok) | search | add_drawer | kg_add | kg_query | failed calls "
            "| the mine beside |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for backend in backends:
            for lv in (lv for lv in results[backend]["levels"] if lv["think_s"] == think):
                t = lv["tools"]
                failed = sum(row["failed"] for row in t.values()) + lv["initialize_failed"]
                calls = sum(row["calls"] for row in t.values()) + lv["initialize_failed"]
                mine = lv["mine"]
                lines.append(
                    f"| {backend} | {lv['clients']} | {lv['ok_per_s']:,.1f} | "
                    + " | ".join(cell(t[tool]) for tool, _ in MIX)
                    + f" | {failed:,} of {calls:,} | "
                    f"{mine['wall_s']:.0f} s, exit {mine['rc']} |"
                )
    lines += [
        "",
        "Search latency split at the moment the mine beside finished (p50 / p95 ms, calls):",
        "",
        "| backend | clients | pause s | search while the mine ran | search after it |",
        "|---|---|---|---|---|",
    ]
    for backend in backends:
        for lv in results[backend]["levels"]:
            halves = [lv.get(f"search_{phase}") for phase in ("while_mining", "after_mine")]
            cells = [f"{h['p50']:.1f} / {h['p95']:.1f} ({h['calls']:,})" if h else "none" for h in halves]
            lines.append(f"| {backend} | {lv['clients']} | {lv['think_s']:g} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        "Afterwards, with the server stopped, a new process read each palace:",
        "",
        "| backend | drawers acknowledged | present once | missing | duplicated | facts acknowledged "
        "| present once | missing | duplicated | the mines' drawers |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for backend, r in results.items():
        v = r["verify"]
        if "failed" in v:
            lines.append(f"| {backend} | the check failed: {v['failed'][-300:]!r} |||||||||")
            continue
        d, f = v["drawers"], v["facts"]
        mines = ", ".join(f"{n:,}" for n in v["mine_wings"].values())
        lines.append(
            f"| {backend} | {d['acknowledged']:,} | {d['once']:,} | {d['missing']:,} | {d['duplicated']:,} | "
            f"{f['acknowledged']:,} | {f['once']:,} | {f['missing']:,} | {f['duplicated']:,} | {mines} |"
        )
    notes = failure_notes(results)
    if notes:
        lines += [
            "",
            "What failed, in the clients' and servers' own words (most frequent first):",
            "",
            *notes,
        ]
    lines += [
        "",
        "Connections the kernel dropped because a listening socket's accept queue was full "
        "(`ListenOverflows`,"
        " /proc/net/netstat, the whole machine) during each row: "
        + "; ".join(
            f"{b} " + ", ".join(f"{lv['tcp']['ListenOverflows']:,}" for lv in r["levels"])
            for b, r in results.items()
        )
        + ".",
    ]
    if "postgres" in results and not meta.get("control_backlog"):
        lines += ["", *targets(results["postgres"])]
    lines += [
        "",
        "The server process's CPU, as a share of one core, per row: "
        + "; ".join(
            f"{b} " + ", ".join(f"{lv['server_cpu_share']:.2f}" for lv in r["levels"])
            for b, r in results.items()
        )
        + ".",
    ]
    return "\n".join(lines) + "\n"


def targets(pg: dict) -> list[str]:
    """Issue 17's targets for postgres, checked against this run: each says held or missed, with figures."""

    def row(clients, think):
        return next((lv for lv in pg["levels"] if lv["clients"] == clients and lv["think_s"] == think), None)

    out = ["Issue 17's targets for postgres, this run:", ""]
    v = pg["verify"]
    for think in sorted({lv["think_s"] for lv in pg["levels"]}, reverse=True):
        shape = "no pause" if not think else f"{think:g} s pauses"
        at64, at4, at16 = row(64, think), row(4, think), row(16, think)
        if at64:
            failed = sum(t["failed"] for t in at64["tools"].values()) + at64["initialize_failed"]
            out.append(
                f"- 0 errors at 64 clients ({shape}): {'held' if not failed else 'missed'}, {failed} failed "
                f"({', '.join(f'{k}× {e[:90]}' for e, k in at64['errors'].items()) or 'none'})"
            )
        if at16:
            p95 = at16["tools"]["mempalace_search"].get("p95")
            after = at16.get("search_after_mine")
            tail = f"; {after['p95']:.1f} ms once the mine beside had finished" if after else ""
            out.append(
                f"- search p95 under 50 ms at 16 clients ({shape}): "
                f"{'held' if p95 and p95 < 50 else 'missed'}, {p95:.1f} ms over the minute{tail}"
            )
        if at4 and at16:
            grew = at16["ok_per_s"] > at4["ok_per_s"] * 1.5
            out.append(
                f"- throughput growing from 4 to 16 clients ({shape}): {'held' if grew else 'missed'}, "
                f"{at4['ok_per_s']:.1f} to {at16['ok_per_s']:.1f} calls/s"
            )
    if "failed" not in v:
        lost = (
            v["drawers"]["missing"]
            + v["drawers"]["duplicated"]
            + v["facts"]["missing"]
            + v["facts"]["duplicated"]
        )
        out.append(
            f"- 0 lost or duplicated writes: {'held' if not lost else 'missed'}, "
            f"{v['drawers']['acknowledged']:,} drawers and {v['facts']['acknowledged']:,} facts "
            f"acknowledged, {lost} missing or twice"
        )
    return out


def chart(results: dict, path: Path) -> None:
    """Per load shape: successful calls/s and search p95 against the number of clients, per backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = sorted({lv["think_s"] for r in results.values() for lv in r["levels"]}, reverse=True)
    fig, axes = plt.subplots(2, len(shapes), figsize=(5.5 * len(shapes), 7), squeeze=False)
    for col, think in enumerate(shapes):
        for backend, r in results.items():
            rows = [lv for lv in r["levels"] if lv["think_s"] == think]
            xs = [lv["clients"] for lv in rows]
            axes[0][col].plot(xs, [lv["ok_per_s"] for lv in rows], marker="o", label=backend)
            p95 = [lv["tools"]["mempalace_search"].get("p95") for lv in rows]
            axes[1][col].plot(xs, p95, marker="o", label=backend)
        axes[0][col].set_title(f"clients {shape_name(think)}", fontsize=10)
        axes[0][col].set_ylabel("successful calls/s")
        axes[1][col].set_ylabel("mempalace_search p95, ms")
        axes[1][col].set_yscale("log")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_xscale("log", base=2)
            ax.set_xticks([4, 16, 64], ["4", "16", "64"])
            ax.set_xlabel("clients")
            ax.grid(True, which="both", alpha=0.3)
        axes[0][col].legend()
    fig.suptitle("mempalace serve on 2 cores, a mine beside: postgres against Chroma", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-clients":
        child_clients(*sys.argv[2:])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--child-verify":
        child_verify(*sys.argv[2:])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "--render":  # chart and RESULTS.md section of a saved run
        saved = json.loads((HERE / "out" / "bench_team.json").read_text())
        chart(saved["results"], HERE / "out" / "team.png")
        common.record_report(HERE / "RESULTS.md", "bench_team", render(saved["results"], saved["meta"]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[4, 16, 64])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument(
        "--think",
        type=lambda s: [float(x) for x in s.split(",")],
        default=[1.0, 0.0],
        help="mean pause before each call, seconds, one load shape each (0: back to back)",
    )
    ap.add_argument("--backends", default="postgres,chroma")
    ap.add_argument("--model", default="hash", help="hash (MemPalace's hash embedder) or minilm")
    ap.add_argument("--base-files", type=int, default=0, help="library files to mine first (0: all)")
    ap.add_argument(
        "--control-backlog",
        type=int,
        default=0,
        help="a control run: start MemPalace's server with this listen backlog instead of its 5",
    )
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--json", help="also save the results here")
    ap.add_argument("--keep", action="store_true", help="keep the palaces (under /tmp)")
    args = ap.parse_args()
    dsn = common.provisioned_dsn()
    library = sorted((DOCS / "library").glob("*.rst.txt"))
    base = library[: args.base_files] if args.base_files else library
    rest = sorted(f for f in DOCS.rglob("*.rst.txt") if f.parent.name != "library")
    work = Path(tempfile.mkdtemp(prefix="mpbench_team_"))
    para_file = work / "paragraphs.json"
    para_file.write_text(json.dumps(paragraphs(rest)))
    embedder, url = bm.start_embedder(args.model)
    results: dict = {}
    try:
        for backend in args.backends.split(","):
            results[backend] = run_backend(backend, work, url, dsn, args, para_file, base, rest)
    finally:
        embedder.terminate()
        embedder.wait()
        for r in results.values():
            if r.get("schema"):
                bench_kg.fresh_schema(dsn, r["schema"])  # drops the palace's schema and graph
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    meta = common.run_meta(
        dsn,
        command="python benchmarks/bench_team.py " + " ".join(sys.argv[1:]),
        seconds=args.seconds,
        think=args.think,
        control_backlog=args.control_backlog,
        base_files=len(base),
        embedder="MemPalace's hash embedder" if args.model == "hash" else "all-MiniLM-L6-v2",
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    if not args.control_backlog and not args.no_write:
        chart(results, HERE / "out" / "team.png")
    name = "bench_team_backlog_control" if args.control_backlog else "bench_team"
    common.save_run(name, meta, results, render(results, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
