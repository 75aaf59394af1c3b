"""Benchmark: the real ``mempalace mine`` CLI over real text, then searches from other processes.

    python benchmarks/bench_mine.py                           # python3.11-doc, MiniLM, writes RESULTS.md
    python benchmarks/bench_mine.py --model hash --limit 60 --no-write --json /tmp/x.json   # quick look

For ``postgres`` (this package) and ``chroma`` (MemPalace's default), each in its own palace and home:

1. ``mempalace init`` and ``mempalace mine`` over a copy of Debian's Python documentation sources (or
   ``--corpus``), embedded offline by ``scripts/embedding_server.py`` through MemPalace's
   ``openai-compat`` setting (real all-MiniLM-L6-v2 by default): the CLI's own wall time;
2. 10 s after the mine exits, ``mempalace search`` as a new process for a few questions (wall time:
   Python start, query embedding, search, output), and MemPalace's ``search_memories`` (what the MCP
   server's ``mempalace_search`` runs) from another new process, 20 questions, p50/p95;
3. in that process, k=10 through the backend API with the questions' embeddings, against exact cosine
   ground truth over every stored drawer: p50/p95 and recall@10;
4. ``--mines K``: a second palace grown by K successive ``mine`` runs of about ``--mine-size`` drawers
   each (files taken in order), searched 10 s after each mine.
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
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import common
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MEMPALACE = str(Path(sys.executable).with_name("mempalace"))
CORPORA = {"python3.11-doc": (Path("/usr/share/doc/python3.11/html/_sources"), "*.rst.txt")}
QUESTIONS = [
    "how do I read a file line by line",
    "run a subprocess and capture its output",
    "asyncio event loop tasks",
    "decorator that takes arguments",
    "unicode normalization of strings",
    "parse command line arguments",
    "sort a list of dictionaries by a key",
    "thread pool executor futures",
    "regular expression named groups",
    "format a date as ISO 8601",
    "context manager with statement",
    "dataclass default values",
    "json encode custom objects",
    "virtual environment creation",
    "socket server example",
    "logging configuration to a file",
    "pickle security warning",
    "generator expressions and yield",
    "type hints for callables",
    "sqlite3 database connection",
]
SEARCH_AFTER_S = 10.0


def embed(url: str, texts: list[str]) -> np.ndarray:
    body = json.dumps({"model": "m", "input": texts}).encode()
    req = urllib.request.Request(
        url.rstrip("/") + "/v1/embeddings", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=300) as resp:
        data = json.loads(resp.read())["data"]
    return np.asarray([d["embedding"] for d in data], dtype=np.float32)


class Palace:
    def __init__(self, root: Path, backend: str, url: str, model: str, dsn: str, schema: str):
        self.backend = backend
        self.path = root / "palace"
        self.env = dict(
            os.environ,
            HOME=str(root / "home"),
            MEMPALACE_CONFIG_DIR=str(root / "config"),
            NO_COLOR="1",
            MEMPALACE_EMBEDDING_MODEL="openai-compat",
            MEMPALACE_EMBEDDING_API_URL=url,
            MEMPALACE_EMBEDDING_API_MODEL=model,
            MEMPALACE_PG_DSN=dsn,
            MEMPALACE_PG_SCHEMA=schema,
        )
        for key in ("MEMPALACE_BACKEND", "MEMPALACE_BACKEND_EXPLICIT", "MEMPALACE_PALACE_PATH"):
            self.env.pop(key, None)
        for d in ("home", "config"):
            (root / d).mkdir(parents=True, exist_ok=True)

    def cli(self, *args: str) -> float:
        """Run ``mempalace --palace P ARGS``; its wall time in seconds (fails on a non-zero exit)."""
        t0 = time.perf_counter()
        proc = subprocess.run(
            [MEMPALACE, "--palace", str(self.path), *args],
            env=self.env,
            capture_output=True,
            text=True,
            errors="backslashreplace",
            stdin=subprocess.DEVNULL,
        )
        if proc.returncode:
            raise RuntimeError(f"mempalace {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
        return time.perf_counter() - t0

    def mine(self, corpus: Path, first: bool) -> float:
        extra = ["--backend", "postgres"] if self.backend == "postgres" and first else []
        if first:
            self.cli(*extra, "init", str(corpus), "--yes", "--no-llm")
        return self.cli(*extra, "mine", str(corpus))


def child_search(palace: str, url: str, truth_vectors: str) -> dict:
    """In a new process (the env names the palace's config): MemPalace's search_memories as the MCP
    tool runs it, then k=10 through the backend API against exact ground truth."""
    from mempalace.backends import PalaceRef, get_backend
    from mempalace.searcher import search_memories

    out: dict = {}
    t, _ = common.timed(
        lambda i: search_memories(QUESTIONS[i % len(QUESTIONS)], palace, n_results=5),
        reps=len(QUESTIONS),
        budget_s=60,
    )
    out["search_memories"] = common.summary(t)

    marker = Path(palace) / "mempalace_pg.json"
    backend = get_backend("postgres" if marker.exists() else "chroma")
    col = backend.get_collection(
        palace=PalaceRef(id=palace, local_path=palace), collection_name="mempalace_drawers", create=False
    )
    got = col.get(include=["embeddings"])
    ids = np.asarray(got.ids)
    vecs = np.asarray(got.embeddings, dtype=np.float32)
    vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    queries = np.load(truth_vectors)
    truths = [set(ids[np.argsort(-(vecs @ q))[:10]].tolist()) for q in queries]
    times, recalls = [], []
    for _ in range(3):
        for q, truth in zip(queries, truths):
            t0 = time.perf_counter()
            res = col.query(query_embeddings=[q.tolist()], n_results=10).ids[0]
            times.append((time.perf_counter() - t0) * 1000)
            recalls.append(len(truth & set(res)) / 10)
    out["query_k10"] = {**common.summary(times), "recall_at_10": float(np.mean(recalls))}
    out["drawers"] = int(len(ids))
    backend.close()
    return out


def searches(p: Palace, url: str, qfile: str) -> dict:
    cli_times = [p.cli("search", q) * 1000 for q in QUESTIONS[:3]]
    script = str(Path(__file__).resolve())
    proc = subprocess.run(
        [sys.executable, script, "--child", str(p.path), url, qfile],
        env=p.env,
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    return {"cli_search_ms": cli_times, **json.loads(proc.stdout.strip().splitlines()[-1])}


def corpus_copy(dest: Path, files: list[Path], root: Path) -> Path:
    for f in files:
        target = dest / f.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
    return dest


def start_embedder(model: str) -> tuple[subprocess.Popen, str]:
    port_file = Path(tempfile.mkdtemp(prefix="mpbench_emb_")) / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "scripts" / "embedding_server.py"),
            "--model",
            model,
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--quiet",
        ]
    )
    deadline = time.time() + 120
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError("the embedding server did not start")
        time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port_file.read_text().strip()}"


def drop_postgres(dsn: str, schema: str) -> None:
    import psycopg

    from mempalace_pg.engine.indexing import folder_application_name

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (folder_application_name(schema),),
        )
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(
            "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
            (f"{schema}_kg",),
        )


def render(result: dict, meta: dict) -> str:
    lines = [
        f"## `mempalace mine` over real text, then search from other processes ({meta['date']})",
        "",
        f"{meta['corpus']}, embedded by {meta['model']} (scripts/embedding_server.py, `openai-compat`). "
        f"{meta['versions']}. Command: `{meta['command']}`.",
        "",
        f"Searches start {SEARCH_AFTER_S:.0f} s after the CLI that wrote exited. `mempalace search`: "
        "wall time of the CLI process; `search_memories`: what the MCP server's `mempalace_search` runs, "
        "in a new process; k=10: the backend API with the questions' vectors, recall against exact "
        "cosine over every drawer.",
        "",
        "| backend | drawers | mine (CLI wall) | `mempalace search` (CLI wall) | search_memories p50 / p95 "
        "| k=10 p50 / p95 (recall@10) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in result["one_mine"].items():
        s = r["search"]
        lines.append(
            f"| {name} | {s['drawers']:,} | {r['mine_s']:.1f} s | "
            f"{np.median(s['cli_search_ms']):.0f} ms | {s['search_memories']['p50']:.1f} / "
            f"{s['search_memories']['p95']:.1f} ms | {s['query_k10']['p50']:.2f} / "
            f"{s['query_k10']['p95']:.2f} "
            f"ms ({s['query_k10']['recall_at_10']:.2f}) |"
        )
    grown = result.get("grown")
    if grown:
        lines += [
            "",
            f"A palace grown by {len(next(iter(grown.values())))} successive mines (files in order), "
            "searched 10 s after each: k=10 p50 ms (recall@10) after mine 1, the middle one and the last; "
            "mine wall time, median.",
            "",
            "| backend | drawers at the end | mine, median s | first | middle | last |",
            "|---|---|---|---|---|---|",
        ]
        for name, runs in grown.items():
            pick = [runs[0], runs[len(runs) // 2], runs[-1]]
            lines.append(
                f"| {name} | {runs[-1]['search']['drawers']:,} | "
                f"{np.median([r['mine_s'] for r in runs]):.1f} | "
                + " | ".join(
                    f"{r['search']['query_k10']['p50']:.2f} ({r['search']['query_k10']['recall_at_10']:.2f})"
                    for r in pick
                )
                + " |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child_search(*sys.argv[2:5])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="python3.11-doc", choices=sorted(CORPORA))
    ap.add_argument("--model", default="minilm", choices=["minilm", "hash"])
    ap.add_argument("--limit", type=int, default=0, help="mine only the first N files (0: all)")
    ap.add_argument("--mines", type=int, default=0, help="also grow a palace by this many mines")
    ap.add_argument("--backends", default="postgres,chroma")
    ap.add_argument("--json", type=Path, default=HERE / "out" / "mine.json")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    dsn = common.provisioned_dsn()
    root, pattern = CORPORA[args.corpus]
    files = sorted(root.rglob(pattern))
    if not files:
        raise SystemExit(f"install Debian's {args.corpus} (scripts/real-text.sh {args.corpus})")
    files = files[: args.limit] if args.limit else files
    embedder, url = start_embedder(args.model)
    work = Path(tempfile.mkdtemp(prefix="mpbench_mine_"))
    result: dict = {"one_mine": {}, "grown": {}}
    try:
        qfile = str(work / "questions.npy")
        np.save(qfile, embed(url, QUESTIONS))
        corpus = corpus_copy(work / "corpus", files, root)
        for backend in args.backends.split(","):
            schema = f"bench_mine_{os.getpid()}"
            p = Palace(work / backend, backend, url, args.model, dsn, schema)
            try:
                mine_s = p.mine(corpus, first=True)
                time.sleep(SEARCH_AFTER_S)
                result["one_mine"][backend] = {"mine_s": mine_s, "search": searches(p, url, qfile)}
                print(backend, json.dumps(result["one_mine"][backend])[:300], flush=True)
            finally:
                if backend == "postgres":
                    drop_postgres(dsn, schema)
            if args.mines:
                schema = f"bench_grow_{os.getpid()}"
                g = Palace(work / f"{backend}_grown", backend, url, args.model, dsn, schema)
                runs = []
                step = max(1, len(files) // args.mines)
                try:
                    for k in range(args.mines):
                        part = corpus_copy(
                            work / f"part_{backend}_{k}", files[k * step : (k + 1) * step], root
                        )
                        mine_s = g.mine(part, first=(k == 0))
                        time.sleep(SEARCH_AFTER_S)
                        runs.append({"mine_s": mine_s, "search": searches(g, url, qfile)})
                        print(backend, "mine", k + 1, runs[-1]["search"]["query_k10"], flush=True)
                finally:
                    if backend == "postgres":
                        drop_postgres(dsn, schema)
                result["grown"][backend] = runs
    finally:
        embedder.terminate()
        shutil.rmtree(work, ignore_errors=True)
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "corpus": f"Debian's {args.corpus}" + (f" (first {args.limit} files)" if args.limit else ""),
        "model": "all-MiniLM-L6-v2" if args.model == "minilm" else "MemPalace's hash embedder",
        "versions": ", ".join(f"{k} {v}" for k, v in common.versions(dsn).items()),
        "command": "python benchmarks/bench_mine.py " + " ".join(sys.argv[1:]),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, **result}, indent=1))
    report = render(result, meta)
    print(report)
    if not args.no_write:
        common.record_report(HERE / "RESULTS.md", "mine", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
