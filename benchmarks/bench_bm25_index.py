"""Trial: Timescale's pg_textsearch (a BM25 index, packaged by Debian for PostgreSQL 18) beside the
plugin's portable BM25 in SQL, on the same palace, server and queries.

Issue 29 asks whether pg_textsearch earns a place beside the portable scoring. On a server whose
``shared_preload_libraries`` holds ``pg_textsearch`` (the sid stack, with postgresql-18-pg-textsearch
installed), the corpus of bench_lexical is filed through the plugin (its bulk path), then a bm25
index is built on the collection's partition over ``lexical_text(document)`` (the plugin's word
splitting) with the ``simple`` configuration and FTS5's k1 and b, and each query set is answered:

* ``postgres``: the plugin's ``lexical_search(n_results=10)``;
* ``pg_textsearch``: ``ORDER BY lexical_text(document) <@> to_bm25query(lexical_text(query), index)
  LIMIT 10`` on the partition (Block-Max WAND over the index).

Agreement with SQLite FTS5's bm25() over every document (as bench_lexical), p50 / p95 in ms, the
index's build time and size.

Usage:  python benchmarks/bench_bm25_index.py --dsn postgresql://... [--corpora real,zipf] [--docs 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import common  # noqa: E402
from bench_lexical import agreement, corpus, fts5_index, fts5_scores, queries  # noqa: E402


def run_corpus(dsn: str, kind: str, n: int) -> dict:
    import psycopg
    from psycopg import sql

    docs = corpus(kind, n)
    qs = queries(kind, docs, 40)
    ftsdb = fts5_index(docs)
    reference = {
        label: [(s, float(np.sort(s)[-10])) for s in (fts5_scores(ftsdb, q, len(docs)) for q in qlist)]
        for label, qlist in qs.items()
    }
    tag = f"bm25_{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="mpbench_bm25_"))
    os.environ["MEMPALACE_CONFIG_DIR"] = str(workdir / "config")
    backend, col = common.open_collection("postgres", str(workdir / "palace"), dsn, tag)
    out: dict = {"documents": len(docs), "stores": {}}
    try:
        vecs = np.random.default_rng(1).normal(size=(len(docs), 8)).astype(np.float32)
        with col.bulk_load() as load:
            for s in range(0, len(docs), 1000):
                e = min(len(docs), s + 1000)
                load(
                    ids=[f"d{i}" for i in range(s, e)],
                    documents=docs[s:e],
                    metadatas=[{"wing": "w"}] * (e - s),
                    embeddings=vecs[s:e],
                )
        part = col.partition
        schema = part.db.schema
        index = f"{part.table_name}_bm25"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_textsearch")
            t = time.perf_counter()
            conn.execute(
                sql.SQL(
                    "CREATE INDEX {} ON {} USING bm25 ({}.lexical_text(document))"
                    " WITH (text_config = 'simple', k1 = 1.2, b = 0.75)"
                ).format(sql.Identifier(index), part.table, sql.Identifier(schema))
            )
            out["index_build_s"] = round(time.perf_counter() - t, 2)
            out["index_mb"] = round(
                conn.execute("SELECT pg_relation_size(%s::regclass)", (f"{schema}.{index}",)).fetchone()[0]
                / 2**20,
                1,
            )
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(part.table))
            stmt = sql.SQL(
                "SELECT id FROM {t}"
                " ORDER BY {s}.lexical_text(document) <@> to_bm25query({s}.lexical_text(%s), %s) LIMIT 10"
            ).format(t=part.table, s=sql.Identifier(schema))
            ways = {
                "postgres": lambda q: [h.id for h in col.lexical_search(query=q, n_results=10).hits],
                "pg_textsearch": lambda q: [
                    r[0] for r in conn.execute(stmt, (q, f"{schema}.{index}"), prepare=True).fetchall()
                ],
            }
            out["plan"] = "\n".join(
                r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + stmt, ("memory palace", f"{schema}.{index}"))
            )
            for way, fn in ways.items():
                row = {}
                for label, qlist in qs.items():
                    for q in qlist[:5]:
                        fn(q)  # warm-up
                    times, ids = [], []
                    for q in qlist:
                        t = time.perf_counter()
                        ids.append(fn(q))
                        times.append((time.perf_counter() - t) * 1000)
                    agree = agreement(reference[label], ids)
                    row[label] = {
                        "agreement_fts5": float(np.mean(agree)),
                        "agreement_fts5_min": float(np.min(agree)),
                        "p50": float(np.percentile(times, 50)),
                        "p95": float(np.percentile(times, 95)),
                    }
                out["stores"][way] = row
                print(f"[bench_bm25_index] {kind} {way}: {json.dumps(row)}", file=sys.stderr, flush=True)
    finally:
        try:
            common.cleanup("postgres", dsn, tag, col)
        finally:
            backend.close()
    return out


def render(report: dict) -> str:
    lines = [
        f"## BM25 as an index: pg_textsearch beside the portable scoring ({report['date']})",
        "",
        f"{report['server']}; `python benchmarks/bench_bm25_index.py --corpora {','.join(report['corpora'])} "
        f"--docs {report['docs']}`. The same palace and server for both ways; agreement: share of the top 10 "
        "in SQLite FTS5's bm25() top 10 over every document (mean over 40 queries, and the worst); "
        "p50 / p95 ms.",
        "",
        "| corpus | way | short: agreement (worst) | short: p50 / p95 "
        "| long: agreement (worst) | long: p50 / p95 |",
        "|---|---|---|---|---|---|",
    ]
    for kind, c in report["corpora"].items():
        for way, x in c["stores"].items():
            cells = [
                f"{x[s]['agreement_fts5']:.2f} ({x[s]['agreement_fts5_min']:.1f}) "
                f"| {x[s]['p50']:.2f} / {x[s]['p95']:.2f}"
                for s in ("short", "long")
            ]
            lines.append(f"| {kind}, {c['documents']:,} | {way} | " + " | ".join(cells) + " |")
    lines.append("")
    for kind, c in report["corpora"].items():
        lines.append(f"Index on {kind}: built in {c['index_build_s']} s, {c['index_mb']} MB.")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dsn")
    ap.add_argument("--corpora", default="real,zipf", type=lambda names: names.split(","))
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--json", default=str(HERE / "out" / "bench_bm25_index.json"))
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--from-json", help="re-render a saved report")
    args = ap.parse_args()
    if args.from_json:
        return report_out(json.loads(Path(args.from_json).read_text()), args.write_results)
    if not args.dsn:
        ap.error("--dsn is required (a server with pg_textsearch in shared_preload_libraries)")
    import psycopg

    with psycopg.connect(args.dsn) as conn:
        server = conn.execute("SELECT version()").fetchone()[0].split(" on ")[0]
        ext = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_textsearch'"
        ).fetchone()
    report = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "server": f"{server}, pg_textsearch {ext[0] if ext else 'missing'}",
        "docs": args.docs,
        "corpora": {},
    }
    for kind in args.corpora:
        report["corpora"][kind] = run_corpus(args.dsn, kind, args.docs)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return report_out(report, args.write_results)


def report_out(report: dict, write: bool) -> int:
    text = render(report)
    print(text)
    if write:
        common.record_report(HERE / "RESULTS.md", "bench_bm25_index", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
