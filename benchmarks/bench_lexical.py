"""Benchmark: lexical search quality and speed against exact BM25, on real documentation and on
Zipf-distributed words.

    python benchmarks/bench_lexical.py                          # both corpora, 20k documents, writes
    RESULTS.md
    python benchmarks/bench_lexical.py --before ed5ee4d         # also the code of that commit, in the same
    run
    python benchmarks/bench_lexical.py --corpora real --docs 5000 --no-write

Corpora (``--corpora``):

* ``real``: paragraph chunks of at most 800 characters of documentation Debian ships (linux-doc-6.1,
  python3.11-doc, postgresql-doc-15: ``bash scripts/real-text.sh linux-doc-6.1 python3.11-doc
  postgresql-doc-15`` installs them), taken file by file in sorted order: real prose, code, paths,
  URLs, e-mail addresses and dotted names, written by nobody here;
* ``zipf``: generated words following a Zipf law (exponent 1.07 over 20,000 words, documents of 30-120
  words), so that a query's words range from rare to very common.

For each query the reference is MemPalace's own BM25 scorer (``mempalace.backends.pgvector._bm25_scores``,
what its built-in pgvector backend runs in Python over every document) over the whole corpus. Agreement: the
share of a store's top 10 that is in BM25's top 10 (a tie with BM25's tenth score counts). Query sets, 40
queries each: "short", 2-3 words each found in 0.75-15% of the documents; "long", 5 words found in more than
15% plus 4 from the short range; on real text also "inside", 2 words taken from one path, URL, e-mail address
or dotted name of the corpus (``docs/bash/README.Debian`` -> "bash readme"), the words a tokenizer that keeps
such strings whole cannot find.

Stores: ``postgres`` (this package), MemPalace's Chroma backend (SQLite trigram FTS, best 500 by its rank,
re-scored with BM25 in Python) and, with ``--before REF``, ``postgres@REF``: this package as it was at commit
REF (its files from git, imported in the child instead of the working tree's), measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

import common  # noqa: E402
from bench_retrieval import run_benchmark  # noqa: E402

VOCAB = 20_000
ZIPF = 1.07
REAL_PACKAGES = ("linux-doc-6.1", "python3.11-doc", "postgresql-doc-15")
_BM25_TOKEN = re.compile(r"\w{2,}")
_COMPOUND = re.compile(r"[\w-]+(?:[/.@][\w-]+)+")


def zipf_corpus(n: int) -> list[str]:
    rng = np.random.default_rng(42)
    words = [f"t{i}" for i in range(VOCAB)]
    p = 1.0 / np.arange(1, VOCAB + 1) ** ZIPF
    p /= p.sum()
    return [
        " ".join(words[k] for k in rng.choice(VOCAB, size=int(size), p=p))
        for size in rng.integers(30, 120, n)
    ]


def real_corpus(n: int) -> list[str]:
    from real_text import real_documents

    return [d.text for d in real_documents(n, packages=REAL_PACKAGES, chunk=800, per_file=4)]


def corpus(kind: str, n: int) -> list[str]:
    return real_corpus(n) if kind == "real" else zipf_corpus(n)


def queries(kind: str, docs: list[str], count: int) -> dict[str, list[str]]:
    """The query sets, from the words MemPalace's BM25 sees (``\\w{2,}``, lower-cased) and their document
    frequencies."""
    tokenized = [set(_BM25_TOKEN.findall(d.lower())) for d in docs]
    df: dict[str, int] = {}
    for words in tokenized:
        for w in words:
            df[w] = df.get(w, 0) + 1
    n = len(docs)
    mid = sorted(w for w, k in df.items() if 0.0075 * n <= k <= 0.15 * n)
    common = sorted(w for w, k in df.items() if k > 0.15 * n)
    rng = np.random.default_rng(7)
    out = {
        "short": [
            " ".join(rng.choice(mid, size=int(rng.integers(2, 4)), replace=False)) for _ in range(count)
        ],
        "long": [
            " ".join(
                list(rng.choice(common, size=5, replace=False)) + list(rng.choice(mid, size=4, replace=False))
            )
            for _ in range(count)
        ],
    }
    if kind == "real":
        pairs = []
        for doc in docs:
            for compound in _COMPOUND.findall(doc):
                parts = list(dict.fromkeys(p.lower() for p in re.findall(r"[^\W_]{2,}", compound)))
                parts = [p for p in parts if 2 <= df.get(p, 0) <= 0.15 * n]
                if len(parts) >= 2:
                    pairs.append(f"{parts[0]} {parts[-1]}")
        pairs = sorted(set(pairs))
        out["inside"] = [pairs[i] for i in rng.choice(len(pairs), size=min(count, len(pairs)), replace=False)]
    return out


def run_child(store: str, kind: str, n: int, dsn: str) -> dict:
    """Load the corpus into one store and time its lexical_search on every query; return ids and timings."""
    docs = corpus(kind, n)
    qs = queries(kind, docs, 40)
    tag = f"lex_{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="mpbench_lex_"))
    os.environ["MEMPALACE_CONFIG_DIR"] = str(workdir / "config")
    palace = str(workdir / "palace")
    name = store.split("@")[0]
    backend, col = common.open_collection(name, palace, dsn, tag)
    try:
        vecs = np.random.default_rng(1).normal(size=(len(docs), 8)).astype(np.float32)
        t0 = time.perf_counter()
        batches = [(s, min(len(docs), s + 1000)) for s in range(0, len(docs), 1000)]
        if name == "postgres":  # its bulk path (as bench_backends loads it), which leaves nothing to merge
            with col.bulk_load() as load:
                for s, e in batches:
                    load(
                        ids=[f"d{i}" for i in range(s, e)],
                        documents=docs[s:e],
                        metadatas=[{"wing": "w"}] * (e - s),
                        embeddings=vecs[s:e],
                    )
        else:
            for s, e in batches:
                col.upsert(
                    ids=[f"d{i}" for i in range(s, e)],
                    documents=docs[s:e],
                    metadatas=[{"wing": "w"}] * (e - s),
                    embeddings=vecs[s:e].tolist(),
                )
        out: dict = {"store": store, "load_s": round(time.perf_counter() - t0, 1), "sets": {}}
        for label, qlist in qs.items():
            for q in qlist[:5]:  # warm-up
                col.lexical_search(query=q, n_results=10)
            times, ids = [], []
            for q in qlist:
                t = time.perf_counter()
                hits = col.lexical_search(query=q, n_results=10).hits
                times.append((time.perf_counter() - t) * 1000)
                ids.append([h.id for h in hits])
            out["sets"][label] = {
                "p50": float(np.percentile(times, 50)),
                "p95": float(np.percentile(times, 95)),
                "ids": ids,
            }
        return out
    finally:
        try:
            common.cleanup(name, dsn, tag, col)
        finally:
            backend.close()
            shutil.rmtree(workdir, ignore_errors=True)


def _checkout(ref: str) -> Path:
    """The package's files as they were at commit ``ref``, in a temporary directory (git archive)."""
    target = Path(tempfile.mkdtemp(prefix=f"mpbench_{ref}_"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "mempalace_pg", "sql", "migrations"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def agreement(reference: list, results: list) -> list:
    """Per query, the share of a store's top 10 that is in the reference's top 10 (a tie with the
    reference's tenth score counts)."""
    return [
        sum(scores[int(i[1:])] >= tenth - 1e-9 for i in ids) / 10
        for (scores, tenth), ids in zip(reference, results)
    ]


def fts5_index(docs: list[str]):
    """SQLite FTS5 over the documents, tokenized by unicode61 as lexical search splits words."""
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(d, tokenize='unicode61 remove_diacritics 0')")
    db.executemany("INSERT INTO t (rowid, d) VALUES (?, ?)", list(enumerate(docs)))
    return db


def fts5_scores(db, query: str, n: int) -> np.ndarray:
    """FTS5's bm25() of every document for the query's words of two or more characters (any of them),
    as positive scores (0: no word found)."""
    words = sorted(set(re.findall(r"[^\W_]{2,}", query.lower())))
    scores = np.zeros(n)
    if words:
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        for rowid, score in db.execute("SELECT rowid, -bm25(t) FROM t WHERE t MATCH ?", (match,)):
            scores[rowid] = score
    return scores


def run(args) -> dict:
    from mempalace.backends.pgvector import _bm25_scores  # noqa: PLC2701 - the exact BM25 we compare with

    dsn = common.provisioned_dsn()
    before = _checkout(args.before) if args.before else None
    out: dict = {"docs": args.docs, "corpora": {}, "before": args.before}
    try:
        for kind in args.corpora:
            docs = corpus(kind, args.docs)
            qs = queries(kind, docs, 40)
            # the references: BM25 over every document, MemPalace's and SQLite FTS5's, and each one's
            # tenth score (ties at it count as agreement)
            reference = {label: [] for label in qs}
            fts5 = {label: [] for label in qs}
            ftsdb = fts5_index(docs)
            for label, qlist in qs.items():
                for q in qlist:
                    scores = np.asarray(_bm25_scores(q, docs))
                    reference[label].append((scores, float(np.sort(scores)[-10])))
                    scores = fts5_scores(ftsdb, q, len(docs))
                    fts5[label].append((scores, float(np.sort(scores)[-10])))
            stores = list(args.stores) + ([f"postgres@{args.before}"] if before else [])
            result: dict = {"documents": len(docs), "characters": sum(map(len, docs)), "stores": {}}
            for store in stores:
                print(f"[bench_lexical] {kind}: {store} ...", file=sys.stderr, flush=True)
                # the child of postgres@REF imports the earlier code before the working tree's
                env = (
                    {"PYTHONPATH": os.pathsep.join(filter(None, [str(before), os.environ.get("PYTHONPATH")]))}
                    if "@" in store
                    else None
                )
                try:
                    child = common.child_json(__file__, [store, kind, args.docs], dsn, env=env)
                except common.ChildFailed as exc:
                    raise SystemExit(f"the {store} child failed ({exc}); its log is above") from None
                row = {"load_s": child["load_s"]}
                for label, got in child["sets"].items():
                    agree = agreement(reference[label], got["ids"])
                    agree_fts5 = agreement(fts5[label], got["ids"])
                    row[label] = {
                        "p50": got["p50"],
                        "p95": got["p95"],
                        "agreement": float(np.mean(agree)),
                        "agreement_min": float(np.min(agree)),
                        "agreement_fts5": float(np.mean(agree_fts5)),
                        "agreement_fts5_min": float(np.min(agree_fts5)),
                        "answered": sum(1 for i in got["ids"] if i) / len(got["ids"]),
                    }
                result["stores"][store] = row
            out["corpora"][kind] = result
    finally:
        if before:
            shutil.rmtree(before, ignore_errors=True)
    return out


def render(report: dict) -> str:
    r, v = report["result"], report["versions"]
    lines = [
        "## Lexical search against exact BM25, real documentation and Zipf-distributed words — "
        f"{report['date']}",
        "",
        f"PostgreSQL {v['postgresql']}, pgvector {v['pgvector']}, MemPalace {v['mempalace']}, chromadb "
        f"{v['chromadb']}, Python {v['python']}, {v['cpus']} CPUs. Command: `{report['command']}`.",
        "References: MemPalace's BM25 scorer and SQLite FTS5's bm25() (unicode61, the query's words of two "
        "or more characters), each over every document. Agreement: share of the store's top 10 in the "
        "reference's top 10, MemPalace's / FTS5's (mean over 40 queries, and FTS5's worst query); answered: "
        "share of queries with at least one hit. Latency of `lexical_search(n_results=10)` in ms, p50 / p95."
        + (
            f" `postgres@{r['before']}` is this package at commit {r['before']}, measured in the same run."
            if r.get("before")
            else ""
        ),
        "",
    ]
    for kind, c in r["corpora"].items():
        title = (
            "real documentation (linux-doc-6.1, python3.11-doc, postgresql-doc-15, chunks of at most 800 "
            "characters)"
            if kind == "real"
            else "Zipf-distributed generated words"
        )
        lines += [
            f"### {c['documents']:,} documents of {title}, {c['characters'] / 1e6:.1f} M characters",
            "",
        ]
        sets = [s for s in ("short", "long", "inside") if any(s in x for x in c["stores"].values())]
        lines += [
            "| store | load, s | "
            + " | ".join(f"{s}: agreement (worst), answered | {s}: p50 / p95" for s in sets)
            + " |",
            "|---|---|" + "---|---|" * len(sets),
        ]
        for store, x in c["stores"].items():
            cells = [
                f"{x[s]['agreement']:.2f} / {x[s].get('agreement_fts5', float('nan')):.2f} "
                f"({x[s].get('agreement_fts5_min', float('nan')):.1f}), {x[s]['answered']:.2f} | "
                f"{x[s]['p50']:.2f} / {x[s]['p95']:.2f}"
                for s in sets
            ]
            lines.append(f"| {store} | {x['load_s']:.1f} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--corpora", default="real,zipf", type=lambda names: names.split(","))
    ap.add_argument("--stores", default="postgres,chroma")
    ap.add_argument("--before", help="also measure this package as it was at this git commit")
    ap.add_argument("child_args", nargs="*", help=argparse.SUPPRESS)
    return run_benchmark(
        ap,
        "bench_lexical",
        lambda args: run_child(
            args.child, args.child_args[0], int(args.child_args[1]), common.provisioned_dsn()
        ),
        run,
        render,
    )


if __name__ == "__main__":
    raise SystemExit(main())
