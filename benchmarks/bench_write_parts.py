"""Benchmark: what each part of a postgres write costs the writer (its triggers, its indexes).

    python benchmarks/bench_write_parts.py                     # 20,000 drawers, 3 rounds, writes RESULTS.md
    python benchmarks/bench_write_parts.py --drawers 5000 --rounds 1 --no-write

One writer cannot pass the rate at which its backend runs one 1,000-row upsert after another
(``bench_ingest_cpu``: the writer with no folder at all). Which parts of that statement cost it? In a
process of its own, with no folder (``MEMPALACE_PG_FOLDER=off``), a palace is loaded with ``--drawers``
drawers through MemPalace's ``upsert`` (batches of 1,000, ``bench_backends``' generated data), then timed
on ``--batches`` upserts of 1,000 new drawers per variant and round, the variants alternating round by
round on the same palace, each timed right after the shipped partition's own upserts:

* ``no <trigger>``: the partition's statement triggers of one kind disabled (facet counts, room counts,
  vector_bits, listing_keys);
* ``no <index>``: one of the partition's secondary indexes dropped (the two GIN indexes, the hash on id,
  the B-trees; never the unique key the upsert's ON CONFLICT needs), made again after the variant's
  round, untimed.

A variant's cost is the median of the shipped upserts beside it less its own. A scratch palace,
dropped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent
BATCH = 1000
TRIGGERS = {
    "facet counts": "count_facets_",
    "room counts": "count_rooms_",
    "vector_bits": "note_bits_",
    "listing_keys": "note_keys_",
}


def variants(conn, schema: str, table: str) -> dict:
    """name: (the DDL that makes it, the DDL that undoes it), for the partition as it stands."""
    from psycopg import sql

    out: dict = {}
    ident = sql.Identifier(schema, table)
    for label, prefix in TRIGGERS.items():
        names = [
            n
            for (n,) in conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal "
                "AND tgname LIKE %s",
                (f"{schema}.{table}", prefix + "%"),
            )
        ]
        off = [sql.SQL("ALTER TABLE {} DISABLE TRIGGER {}").format(ident, sql.Identifier(n)) for n in names]
        on = [sql.SQL("ALTER TABLE {} ENABLE TRIGGER {}").format(ident, sql.Identifier(n)) for n in names]
        out[f"no {label} triggers"] = (off, on)
    # a partition's index made through its parent's (records') is dropped and made again there: the
    # scratch schema holds this one collection, so only this partition is touched
    rows = conn.execute(
        "SELECT i.relname, COALESCE(p.relname, i.relname), pg_get_indexdef(COALESCE(p.oid, i.oid)), "
        "am.amname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam "
        "LEFT JOIN pg_inherits h ON h.inhrelid = i.oid LEFT JOIN pg_class p ON p.oid = h.inhparent "
        "WHERE x.indrelid = %s::regclass AND NOT x.indisunique AND NOT x.indisprimary ORDER BY 1",
        (f"{schema}.{table}",),
    ).fetchall()
    for name, owner, definition, method in rows:
        drop = [sql.SQL("DROP INDEX {}").format(sql.Identifier(schema, owner))]
        out[f"no {method} index {name}"] = (drop, [sql.SQL(definition)])
    return out


def child(n: int, rounds: int, batches: int, dsn: str) -> dict:
    import psycopg

    os.environ["MEMPALACE_PG_FOLDER"] = "off"
    tag = f"parts_{uuid.uuid4().hex[:6]}"
    workdir = tempfile.mkdtemp(prefix="mpbench_parts_")
    os.environ["MEMPALACE_CONFIG_DIR"] = str(Path(workdir) / "config")
    centers = common.cluster_centers()
    backend, col = common.open_collection("postgres", str(Path(workdir) / "palace"), dsn, tag)
    written = 0

    def upsert() -> float:
        nonlocal written
        ids, docs, metas, vecs = common.batch_data(written, BATCH, centers)
        t0 = time.perf_counter()
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
        written += BATCH
        return time.perf_counter() - t0

    try:
        while written < n:
            upsert()
        times: dict[str, list[float]] = {}
        with psycopg.connect(dsn, autocommit=True) as conn:
            schema, table = f"bench_{tag}", col.partition.table_name
            conn.execute(f'VACUUM ANALYZE "{schema}"."{table}"')
            plan = variants(conn, schema, table)
            for _ in range(rounds):
                for name, (make, undo) in plan.items():
                    # each variant beside the shipped partition timed just before it, both after a
                    # checkpoint: an index made again writes its WAL, which the next upserts would pay
                    conn.execute("CHECKPOINT")
                    upsert()
                    times.setdefault(f"{name}|shipped", []).extend(upsert() for _ in range(batches))
                    for statement in make:
                        conn.execute(statement)
                    conn.execute("CHECKPOINT")
                    upsert()  # the first batch after the change plans anew
                    times.setdefault(name, []).extend(upsert() for _ in range(batches))
                    for statement in undo:
                        conn.execute(statement)
        return {"n": n, "written": written, "ms": {k: [1000 * t for t in v] for k, v in times.items()}}
    finally:
        backend.close()
        common.cleanup("postgres", dsn, tag, None)
        shutil.rmtree(workdir, ignore_errors=True)


def render(result: dict, meta: dict) -> str:
    ms = result["ms"]
    lines = [
        f"## What each part of a postgres write costs ({meta['when']})",
        "",
        f"`{meta['command']}` ({meta['when']}, {meta['machine']}, {meta['versions']}). A palace of "
        f"{result['n']:,} drawers written through MemPalace's `upsert` with no folder, then upserts of "
        f"{BATCH:,} new drawers timed at the client: for each variant, in turn and round after round on the "
        "same palace, the shipped partition's upserts and then the variant's, each after a CHECKPOINT "
        f"({result['written']:,} drawers at the end). *Costs*: the shipped p50 beside it less the "
        "variant's, and its share of the shipped.",
        "",
        "| variant | upserts timed | p50 ms a 1,000-row upsert: shipped / variant | p95: shipped / variant | "
        "costs, ms | share |",
        "|---|---|---|---|---|---|",
    ]

    rows = []
    for name in (k for k in ms if not k.endswith("|shipped")):
        base, mine = common.summary(ms[f"{name}|shipped"]), common.summary(ms[name])
        rows.append((base["p50"] - mine["p50"], name, base, mine))
    for cost, name, base, mine in sorted(rows, reverse=True):
        lines.append(
            f"| {name} | {mine['n']} | {base['p50']:,.1f} / {mine['p50']:,.1f} | "
            f"{base['p95']:,.1f} / {mine['p95']:,.1f} | {cost:,.1f} | {cost / base['p50']:.0%} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        a = sys.argv[2:]
        print(json.dumps(child(int(a[0]), int(a[1]), int(a[2]), a[3])))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drawers", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=5, help="timed upserts per variant and round")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    dsn = common.provisioned_dsn()
    result = common.child_json(
        str(Path(__file__).resolve()), [args.drawers, args.rounds, args.batches, dsn], dsn
    )
    meta = common.run_meta(dsn, command="python benchmarks/bench_write_parts.py " + " ".join(sys.argv[1:]))
    common.save_run("bench_write_parts", meta, result, render(result, meta), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
