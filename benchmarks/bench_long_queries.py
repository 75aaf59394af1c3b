"""Searches of any length: a normal query against a pasted page, a log, a whole file, at 100,000 drawers.

    python benchmarks/bench_long_queries.py [--size 100000] [--lengths 100,10000,100000,1000000] [--no-write]

On fresh clones of the kept palaces (benchmarks/kept_palaces.py) of one size, a postgres one and a Chroma
one (MemPalace's default backend), in one run: queries of each length made of the palace's own words,
through

* MemPalace's ``search_memories`` (what ``mempalace search`` and ``mempalace_search`` call), on both;
* on postgres, the plugin's lexical search (``lexical_search``, BM25 in SQL) and its hybrid search
  (``PalaceSearch.hybrid``: vector and text, fused), which read at most the first 64 distinct words;
* the command line ``mempalace search QUERY`` (a process that exits, Python's start included) at the
  longest length an argument may have on Linux (100,000 characters; one argument is capped at 128 KiB).

Each entry: one call to warm up, then ``--reps`` timed calls in one process per backend; p50 / p95 ms.
Queries are embedded by MemPalace's hash embedder (scripts/embedding_server.py). The report replaces
this benchmark's section of RESULTS.md; raw figures go to out/bench_long_queries.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_mine
import common
import kept_palaces

HERE = Path(__file__).resolve().parent
CLI_CHARS = 100_000
MEMPALACE = str(Path(sys.executable).with_name("mempalace"))

CHILD = r"""
import json, random, sys, time
store, palace, reps = sys.argv[1], sys.argv[2], int(sys.argv[4])
lengths = [int(x) for x in sys.argv[3].split(",")]
from skewed_palace import WORDS  # first: importing mempalace takes this folder off sys.path
from mempalace.searcher import search_memories
rng = random.Random(49)
def text(n):
    return " ".join(rng.choice(WORDS) for _ in range(n // 5 + 1))[:n]
entries = {"search_memories": lambda q: search_memories(q, palace, n_results=5)}
if store == "postgres":
    from mempalace.palace import get_collection
    from mempalace_pg import PalaceSearch
    from mempalace_pg.retrieval.embedding import query_vector
    from mempalace_pg.store.collection import PostgresCollection
    col = get_collection(palace, create=False, backend="postgres")
    while not isinstance(col, PostgresCollection):
        col = col._inner
    ps = PalaceSearch(palace_path=palace)
    entries["lexical_search"] = lambda q: col.lexical_search(query=q, n_results=10)
    entries["hybrid"] = lambda q: ps.hybrid(q, query_vector(q), n_results=10)
out = {}
for name, call in entries.items():
    for n in lengths:
        queries = [text(n) for _ in range(reps + 1)]
        call(queries[0])
        times = []
        for q in queries[1:]:
            t = time.perf_counter()
            call(q)
            times.append((time.perf_counter() - t) * 1000)
        out[f"{name} {n}"] = times
print(json.dumps(out))
"""


def cli_times(palace: Path, env: dict, reps: int) -> list[float]:
    import random

    from skewed_palace import WORDS

    rng = random.Random(50)
    times = []
    for _ in range(reps):
        q = " ".join(rng.choice(WORDS) for _ in range(CLI_CHARS // 5 + 1))[:CLI_CHARS]
        t = time.perf_counter()
        proc = subprocess.run(
            [MEMPALACE, "--palace", str(palace), "search", q], env=env, capture_output=True, text=True
        )
        times.append((time.perf_counter() - t) * 1000)
        if proc.returncode:
            raise RuntimeError(f"mempalace search: {proc.stderr[-2000:]}")
    return times


def render(results: dict, meta: dict) -> str:
    lines = [
        "## Searches of any length",
        "",
        f"`{meta['command']}` ({meta['when']}, {meta['machine']}, {meta['versions']}).",
        f"Fresh clones of the kept palaces of {meta['size']:,} drawers (postgres and Chroma, MemPalace's",
        "default), in one run. Queries of each length made of the palace's own words; one warm-up call,",
        f"then {meta['reps']} timed calls in one process per backend (p50 / p95 ms). `search_memories` is",
        "what `mempalace search` and `mempalace_search` call (over MCP, MemPalace first cuts a query to",
        "250 characters); the plugin's `lexical_search` and `hybrid` read at most the first 64 distinct",
        "words. The command line: `mempalace search QUERY` of 100,000 characters (Linux caps one argument",
        "at 128 KiB), a process that exits, Python's start included.",
        "",
    ]
    lengths = meta["lengths"]
    lines.append("| entry | " + " | ".join(f"{n:,} chars" for n in lengths) + " |")
    lines.append("|---|" + "---|" * len(lengths))

    def cell(times):
        s = common.summary(times)
        return f"{s['p50']:.1f} / {s['p95']:.1f}"

    rows = [
        ("postgres", "search_memories", "MemPalace's search, postgres palace"),
        ("chroma", "search_memories", "MemPalace's search, Chroma palace"),
        ("postgres", "lexical_search", "the plugin's lexical search (BM25)"),
        ("postgres", "hybrid", "the plugin's hybrid search"),
    ]
    for store, entry, label in rows:
        cells = [cell(results[store][f"{entry} {n}"]) for n in lengths]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    longest = lengths[-1]
    pg, ch = (common.summary(results[s][f"search_memories {longest}"])["p50"] for s in ("postgres", "chroma"))
    lines += [
        "",
        f"At {longest:,} characters MemPalace's search takes {pg:.0f} ms on postgres and {ch:.0f} ms on "
        f"Chroma ({common.ratio(max(pg, ch), min(pg, ch))} apart).",
        "",
        "| command line, 100,000 characters | p50 / p95 ms |",
        "|---|---|",
    ]
    for store in ("postgres", "chroma"):
        lines.append(f"| `mempalace search`, {store} palace | {cell(results[store]['cli'])} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--lengths", default="100,10000,100000,1000000")
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--cli-reps", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    dsn = common.provisioned_dsn()
    embedder, url = bench_mine.start_embedder("hash")
    results: dict = {}
    try:
        with tempfile.TemporaryDirectory(prefix="mplong-") as work:
            for store in ("postgres", "chroma"):
                with kept_palaces.clone(store, args.size, dsn, Path(work), f"long{os.getpid()}") as (
                    palace,
                    env,
                    _,
                ):
                    env = {**env, "MEMPALACE_EMBEDDING_API_URL": url, "PYTHONPATH": str(HERE)}
                    out = common.run_code(CHILD, store, str(palace), args.lengths, str(args.reps), env=env)
                    results[store] = json.loads(out.strip().splitlines()[-1])
                    results[store]["cli"] = cli_times(palace, env, args.cli_reps)
                    print(store, {k: common.summary(v) for k, v in results[store].items()}, flush=True)
    finally:
        embedder.terminate()
        embedder.wait()
    lengths = [int(x) for x in args.lengths.split(",")]
    command = "python benchmarks/bench_long_queries.py" + (
        f" --size {args.size}" if args.size != 100_000 else ""
    )
    meta = common.run_meta(dsn, command=command, size=args.size, lengths=lengths, reps=args.reps)
    common.save_run("bench_long_queries", meta, results, render(results, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
