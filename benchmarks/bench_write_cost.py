"""Benchmark: what writing drawers costs, and how much of it is splitting words for lexical search.

    python benchmarks/bench_write_cost.py                              # 20,000 drawers, writes RESULTS.md
    python benchmarks/bench_write_cost.py --drawers 5000 --rounds 2 --no-write

Each store is loaded with ``--drawers`` drawers (bench_backends' generated data: 384-d vectors, 60 words a
document) in a process of its own, then timed on upserts of 50 new drawers (what ``mempalace mine`` sends
for a file), ``--upserts`` of them per round.

``postgres`` alternates, round after round on the same palace, two definitions of ``records.document_tsv``:

* ``words``: this code's, ``to_tsvector('simple', lexical_text(document))`` (sql/0006: a word ends at every
  character that is not a letter or a number, as in SQLite FTS5);
* ``tokens``: the definition before sql/0006, ``to_tsvector('simple', document)`` (PostgreSQL's own parser),
  put back with ``ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION`` (PostgreSQL 17 or later; it rewrites the
  table, between rounds, untimed).

No folder builds vector index segments meanwhile (``MEMPALACE_PG_FOLDER=off``), so every upsert is timed
alone rather than beside an index build. Then, over the palace's documents, the server's time per document for
``lexical_text()`` and for each tsvector definition: a full scan computing it, minus a scan that only reads
the documents, best of 5.

``chroma`` (MemPalace's default backend) runs the same upserts, for reference.
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

import common
import numpy as np
from bench_retrieval import run_benchmark

HERE = Path(__file__).resolve().parent

UPSERT = 50
VARIANTS = ("words", "tokens")
#: document_tsv per variant; {fn} is the palace schema's lexical_text()
TSV = {
    "words": "to_tsvector('simple'::regconfig, {fn}(document))",
    "tokens": "to_tsvector('simple'::regconfig, document)",
}


def _upserts(col, first: int, count: int, centers) -> list[float]:
    """``count`` upserts of UPSERT new drawers from drawer ``first`` on; ms each."""
    times = []
    for k in range(count):
        ids, docs, metas, vecs = common.batch_data(first + k * UPSERT, UPSERT, centers)
        t0 = time.perf_counter()
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _set_tsv(conn, schema: str, variant: str) -> None:
    from psycopg import sql

    expression = TSV[variant].format(fn=sql.Identifier(schema, "lexical_text").as_string(conn))
    conn.execute(
        sql.SQL("ALTER TABLE {} ALTER COLUMN document_tsv SET EXPRESSION AS ({})").format(
            sql.Identifier(schema, "records"), sql.SQL(expression)
        )
    )
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(schema, "records")))


def _per_document_us(conn, schema: str) -> dict:
    """Server time per document of each expression over every stored document, best of 5, in µs."""
    from psycopg import sql

    fn = sql.Identifier(schema, "lexical_text").as_string(conn)
    length_fn = sql.Identifier(schema, "lexical_length").as_string(conn)
    table = sql.Identifier(schema, "records")
    exprs = {
        "read only": "length(document)",
        "lexical_text()": f"length({fn}(document))",
        **{f"document_tsv, {v}": f"length({TSV[v].format(fn=fn)})" for v in VARIANTS},
        # what the facet-count triggers add per written row for BM25 (sql/0011), over reading the
        # stored tsvector
        "stored document_tsv, read": "length(document_tsv)",
        "lexical_length(document_tsv)": f"{length_fn}(document_tsv)",
    }
    rows = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(table)).fetchone()[0]
    best = {}
    for label, expr in exprs.items():
        query = sql.SQL("SELECT sum({}) FROM {}").format(sql.SQL(expr), table)
        runs = []
        for _ in range(5):
            t0 = time.perf_counter()
            conn.execute(query).fetchone()
            runs.append(time.perf_counter() - t0)
        best[label] = min(runs)
    return {
        "documents": rows,
        "mean_chars": conn.execute(
            sql.SQL("SELECT avg(length(document))::float8 FROM {}").format(table)
        ).fetchone()[0],
        "us_per_document": {
            k: (v - best["read only"]) / rows * 1e6 for k, v in best.items() if k != "read only"
        },
    }


def run_child(store: str, n: int, rounds: int, upserts: int, dsn: str) -> dict:
    import psycopg

    os.environ["MEMPALACE_PG_FOLDER"] = "off"  # no index build beside the timed writes
    tag = f"wc_{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="mpbench_wc_"))
    os.environ["MEMPALACE_CONFIG_DIR"] = str(workdir / "config")
    centers = common.cluster_centers()
    backend, col = common.open_collection(store, str(workdir / "palace"), dsn, tag)
    try:
        out: dict = {
            "store": store,
            "load_s": round(common.load_drawers(col, store, n, centers), 1),
            "rounds": [],
        }
        first = n
        _upserts(col, first, 5, centers)  # warm-up: statements prepared, pages cached
        first += 5 * UPSERT
        schema = f"bench_{tag}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            for r in range(rounds):
                for variant in VARIANTS if store == "postgres" else ("chroma",):
                    if store == "postgres":
                        _set_tsv(conn, schema, variant)
                    times = _upserts(col, first, upserts, centers)
                    first += upserts * UPSERT
                    out["rounds"].append({"round": r, "variant": variant, "ms": times})
            if store == "postgres":
                _set_tsv(conn, schema, "words")
                out["functions"] = _per_document_us(conn, schema)
        return out
    finally:
        try:
            common.cleanup(store, dsn, tag, col)
        finally:
            backend.close()
            shutil.rmtree(workdir, ignore_errors=True)


def run(args) -> dict:
    dsn = common.provisioned_dsn()
    out: dict = {"drawers": args.drawers, "rounds": args.rounds, "upserts": args.upserts, "stores": {}}
    for store in args.stores:
        print(f"[bench_write_cost] {store} ...", file=sys.stderr, flush=True)
        try:
            out["stores"][store] = common.child_json(
                __file__, [store, args.drawers, args.rounds, args.upserts], dsn
            )
        except common.ChildFailed as exc:
            raise SystemExit(f"the {store} child failed ({exc}); its log is above") from None
    return out


def _p(times: list, q: int) -> float:
    return float(np.percentile(np.asarray(times), q))


def render(report: dict) -> str:
    r, v = report["result"], report["versions"]
    lines = [
        f"## What a write costs, and the share of splitting words — {report['date']}",
        "",
        f"PostgreSQL {v['postgresql']}, pgvector {v['pgvector']}, MemPalace {v['mempalace']}, chromadb "
        f"{v['chromadb']}, Python {v['python']}, {v['cpus']} CPUs. Command: `{report['command']}`.",
        f"{r['drawers']:,} drawers loaded per store, then {r['rounds']} rounds of {r['upserts']} upserts of "
        f"{UPSERT} new drawers each; `postgres` alternates its `document_tsv` definition round by round "
        "(`words`: this code's; `tokens`: the one before sql/0006), with the background merge held off. "
        "Latency of one upsert in ms.",
        "",
        "| store, document_tsv | upsert of 50: p50 / p95 (all rounds) | p50 of each round | vs chroma |",
        "|---|---|---|---|",
    ]
    groups: dict = {}
    for store, x in r["stores"].items():
        for rnd in x["rounds"]:
            label = store if rnd["variant"] == "chroma" else f"{store}, {rnd['variant']}"
            groups.setdefault(label, []).append(rnd["ms"])
    chroma = groups.get("chroma")
    chroma_p50 = _p(sum(chroma, []), 50) if chroma else None
    for label, per_round in groups.items():
        pooled = sum(per_round, [])
        vs = f"{chroma_p50 / _p(pooled, 50):.1f}x" if chroma_p50 and label != "chroma" else "—"
        lines.append(
            f"| {label} | {_p(pooled, 50):.2f} / {_p(pooled, 95):.2f} | "
            + ", ".join(f"{_p(t, 50):.2f}" for t in per_round)
            + f" | {vs} |"
        )
    fns = r["stores"].get("postgres", {}).get("functions")
    if fns:
        lines += [
            "",
            f"Server time per document over the {fns['documents']:,} stored documents (mean "
            f"{fns['mean_chars']:.0f} characters), a full scan computing it minus one reading the "
            "documents, best of 5, µs:",
            "",
            "| expression | µs per document |",
            "|---|---|",
        ]
        lines += [f"| {k} | {us:.1f} |" for k, us in fns["us_per_document"].items()]
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--drawers", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--upserts", type=int, default=60)
    ap.add_argument("--stores", default="postgres,chroma")
    ap.add_argument("child_args", nargs="*", help=argparse.SUPPRESS)
    return run_benchmark(
        ap,
        "bench_write_cost",
        lambda args: run_child(args.child, *map(int, args.child_args), common.provisioned_dsn()),
        run,
        render,
    )


if __name__ == "__main__":
    raise SystemExit(main())
