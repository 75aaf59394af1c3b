"""Benchmark: lexical search quality and speed against exact BM25, on a corpus with a natural word distribution.

    python benchmarks/bench_lexical.py                  # 20k documents, writes RESULTS.md
    python benchmarks/bench_lexical.py --docs 5000 --no-write

The drawer benchmarks use a uniform vocabulary, where every word is about as frequent as every other and BM25
ties everywhere. Here words follow a Zipf law (exponent 1.07 over 20,000 words, documents of 30-120 words), so
that a query's words range from rare to very common, as in real notes.

For each query, the reference is MemPalace's own BM25 scorer (``mempalace.backends.pgvector._bm25_scores``,
the one its built-in pgvector backend runs in Python over every document) computed over the whole corpus.
Agreement: the share of a store's top 10 that is in BM25's top 10 (a tie with BM25's tenth score counts).
Stores: ``postgres`` (this package) and MemPalace's Chroma backend (SQLite FTS5, best 500 by its rank,
re-scored with BM25 in Python). Two query sets: "short", 2-3 words each found in 150-3,000 documents; "long",
5 words found in more than 3,000 documents plus 4 from the short set's range.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_backends as bb  # noqa: E402
from bench_retrieval import run_benchmark  # noqa: E402

VOCAB = 20_000
ZIPF = 1.07


def corpus(n: int) -> list[str]:
    rng = np.random.default_rng(42)
    words = [f"t{i}" for i in range(VOCAB)]
    p = 1.0 / np.arange(1, VOCAB + 1) ** ZIPF
    p /= p.sum()
    return [" ".join(words[k] for k in rng.choice(VOCAB, size=int(size), p=p)) for size in rng.integers(30, 120, n)]


def queries(docs: list[str], count: int) -> dict[str, list[str]]:
    df: dict[str, int] = {}
    for doc in docs:
        for word in set(doc.split()):
            df[word] = df.get(word, 0) + 1
    mid = sorted(w for w, k in df.items() if 150 * len(docs) / 20_000 <= k <= 3000 * len(docs) / 20_000)
    common = sorted(w for w, k in df.items() if k > 3000 * len(docs) / 20_000)
    rng = np.random.default_rng(7)
    short = [" ".join(rng.choice(mid, size=int(rng.integers(2, 4)), replace=False)) for _ in range(count)]
    long = [" ".join(list(rng.choice(common, size=5, replace=False)) + list(rng.choice(mid, size=4, replace=False)))
            for _ in range(count)]
    return {"short": short, "long": long}


def run_child(store: str, n: int, dsn: str) -> dict:
    """Load the corpus into one store and time its lexical_search on every query; return ids and timings."""
    docs = corpus(n)
    qs = queries(docs, 40)
    tag = f"lex_{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="mpbench_lex_"))
    os.environ["MEMPALACE_CONFIG_DIR"] = str(workdir / "config")
    palace = str(workdir / "palace")
    backend, col = bb.open_collection(store, palace, dsn, tag)
    try:
        vecs = np.random.default_rng(1).normal(size=(n, 8)).astype(np.float32)
        t0 = time.perf_counter()
        batches = [(s, min(n, s + 1000)) for s in range(0, n, 1000)]
        if store == "postgres":  # its bulk path (as bench_backends loads it), which leaves nothing to merge
            with col.bulk_load() as load:
                for s, e in batches:
                    load(ids=[f"d{i}" for i in range(s, e)], documents=docs[s:e],
                         metadatas=[{"wing": "w"}] * (e - s), embeddings=vecs[s:e])
        else:
            for s, e in batches:
                col.upsert(ids=[f"d{i}" for i in range(s, e)], documents=docs[s:e],
                           metadatas=[{"wing": "w"}] * (e - s), embeddings=vecs[s:e].tolist())
        out: dict = {"store": store, "load_s": round(time.perf_counter() - t0, 1), "sets": {}}
        for label, qlist in qs.items():
            col.lexical_search(query=qlist[0], n_results=10)  # warm-up
            times, ids = [], []
            for q in qlist:
                t = time.perf_counter()
                hits = col.lexical_search(query=q, n_results=10).hits
                times.append((time.perf_counter() - t) * 1000)
                ids.append([h.id for h in hits])
            out["sets"][label] = {"p50": float(np.percentile(times, 50)), "p95": float(np.percentile(times, 95)),
                                  "ids": ids}
        return out
    finally:
        try:
            bb.cleanup(store, dsn, tag, col)
        finally:
            backend.close()
            shutil.rmtree(workdir, ignore_errors=True)


def run(args) -> dict:
    from mempalace.backends.pgvector import _bm25_scores

    dsn = bb.provisioned_dsn()
    docs = corpus(args.docs)
    qs = queries(docs, 40)
    # the reference: BM25 over every document, and its tenth score (ties at it count as agreement)
    reference = {label: [] for label in qs}
    for label, qlist in qs.items():
        for q in qlist:
            scores = np.asarray(_bm25_scores(q, docs))
            reference[label].append((scores, float(np.sort(scores)[-10])))
    out: dict = {"docs": args.docs, "stores": {}}
    for store in args.stores:
        print(f"[bench_lexical] {store} ...", file=sys.stderr, flush=True)
        try:
            child = bb.child_json(__file__, [store, "--docs", args.docs], dsn)
        except bb.ChildFailed as exc:
            raise SystemExit(f"the {store} child failed ({exc}); its log is above") from None
        result = {"load_s": child["load_s"]}
        for label, got in child["sets"].items():
            agree = [sum(scores[int(i[1:])] >= tenth - 1e-9 for i in ids) / 10
                     for (scores, tenth), ids in zip(reference[label], got["ids"])]
            result[label] = {"p50": got["p50"], "p95": got["p95"], "agreement": float(np.mean(agree)),
                             "agreement_min": float(np.min(agree))}
        out["stores"][store] = result
    return out


def render(report: dict) -> str:
    r, v = report["result"], report["versions"]
    lines = [f"## Lexical search against exact BM25 on {r['docs']:,} documents with Zipf-distributed words — "
             f"{report['date']}", "",
             f"PostgreSQL {v['postgresql']}, pgvector {v['pgvector']}, MemPalace {v['mempalace']}, chromadb "
             f"{v['chromadb']}, Python {v['python']}, {v['cpus']} CPUs. Command: `{report['command']}`.",
             "Reference: MemPalace's BM25 scorer over every document. Agreement: share of the store's top 10 in "
             "BM25's top 10 (mean, and the worst query). 40 queries per set; latency of `lexical_search(n_results=10)` "
             "in ms, p50 / p95.", "",
             "| store | short queries: agreement (worst) | short: p50 / p95 | long queries: agreement (worst) | "
             "long: p50 / p95 |", "|---|---|---|---|---|"]
    for store, x in r["stores"].items():
        s, lg = x["short"], x["long"]
        lines.append(f"| {store} | {s['agreement']:.2f} ({s['agreement_min']:.1f}) | {s['p50']:.2f} / {s['p95']:.2f} | "
                     f"{lg['agreement']:.2f} ({lg['agreement_min']:.1f}) | {lg['p50']:.2f} / {lg['p95']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--stores", default="postgres,chroma")
    return run_benchmark(ap, "bench_lexical", lambda args: run_child(args.child, args.docs, bb.provisioned_dsn()),
                         run, render)


if __name__ == "__main__":
    raise SystemExit(main())
