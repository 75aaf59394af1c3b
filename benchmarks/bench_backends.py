"""Benchmark: this backend against MemPalace's built-in ones, through MemPalace's backend API, in one run.

    python benchmarks/bench_backends.py --sizes 10000,100000            # all backends, writes RESULTS.md
    python benchmarks/bench_backends.py --sizes 2000 --backends postgres --no-write   # quick look

Backends: ``postgres`` (this package), ``pgvector`` (MemPalace's built-in, as shipped: exact scans),
``pgvector_hnsw`` (the same after its opt-in ``run_maintenance("reindex")``) and ``chroma``
(MemPalace's default). The PostgreSQL ones use the same server (MEMPALACE_PG_DSN or the provisioned
test server). Each backend runs in its own child process, so memory figures are its own.

Data: 384-dimension unit vectors in 50 clusters, drawer metadata as ``mempalace mine`` writes it
(wing, room, source_file, chunk_index, filed_at, added_by, ...), ~60-word documents, one planted
rare term. Latencies are p50/p95 in milliseconds over repeated calls; recall@10 is measured
against exact cosine ground truth computed with numpy.
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
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from common import (
    BATCH,
    DIM,
    PLANTED,
    PLANTED_AT,
    ChildFailed,
    batch_data,
    child_json,
    cleanup,
    cluster_centers,
    load_drawers,
    open_collection,
    provisioned_dsn,
    query_vectors,
    ratio,
    record_report,
    rss_mb,
    settle,
    summary,
    timed,
    versions,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# ----------------------------------------------------------------------------- child: one backend, one size
def run_child(name: str, n: int, dsn: str) -> dict:
    tag = f"{name}_{n}_{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="mpbench_"))
    os.environ["MEMPALACE_CONFIG_DIR"] = str(workdir / "config")
    palace = str(workdir / "palace")
    centers = cluster_centers()
    backend, col = open_collection(name, palace, dsn, tag)
    out: dict = {"backend": name, "n": n}
    try:
        # -- bulk ingest until query-ready ---------------------------------------------------
        rss_before = rss_mb()
        load_s = load_drawers(col, name, n, centers)
        index_s = 0.0
        if name == "pgvector_hnsw":
            t1 = time.perf_counter()
            col.run_maintenance("reindex")
            col.run_maintenance("analyze")
            index_s = time.perf_counter() - t1
        out["ingest"] = {
            "seconds": load_s + index_s,
            "load_seconds": load_s,
            "index_seconds": index_s,
            "rows_per_s": n / (load_s + index_s),
            "rss_mb_peak": rss_mb(),
            "rss_mb_before": rss_before,
        }
        if name.startswith("pgvector"):
            # the built-in backend leaves its freshly filled table to autovacuum: settle it before measuring
            # (not counted as its ingest; `postgres` bulk loads end with their own VACUUM, which is counted)
            out["ingest"]["settle_seconds"] = settle(dsn, [(None, col._table)])
        assert col.count() == n, f"{name}: count {col.count()} != {n}"

        # -- ground truth ------------------------------------------------------------------------
        all_vecs = np.empty((n, DIM), dtype=np.float32)
        all_meta_wing = np.empty(n, dtype=object)
        all_meta_room = np.empty(n, dtype=object)
        all_ids = []
        for start in range(0, n, BATCH):
            ids, _docs, metas, vecs = batch_data(start, min(BATCH, n - start), centers)
            all_vecs[start : start + len(ids)] = vecs
            all_meta_wing[start : start + len(ids)] = [m["wing"] for m in metas]
            all_meta_room[start : start + len(ids)] = [m["room"] for m in metas]
            all_ids.extend(ids)
        all_ids_arr = np.asarray(all_ids)
        queries = query_vectors(100, 777, centers)
        filters = {
            "unfiltered": (None, np.ones(n, dtype=bool)),
            "wing": ({"wing": "wing_3"}, all_meta_wing == "wing_3"),
            "wing_room": (
                {"$and": [{"wing": "wing_3"}, {"room": "room_4"}]},
                (all_meta_wing == "wing_3") & (all_meta_room == "room_4"),
            ),
        }
        out["query"] = {}
        for label, (where, mask) in filters.items():
            recalls, returned = [], []
            # Ground truth first, so no numpy work runs between (or during) the timed calls.
            truths = [
                set(all_ids_arr[mask][np.argsort(-(all_vecs[mask] @ q))[:10]].tolist()) for q in queries
            ]

            def one(i, where=where):
                res = col.query(
                    query_embeddings=[queries[i].tolist()],
                    n_results=10,
                    where=where,
                    include=["metadatas", "distances"],
                )
                return res.ids[0]

            one(0)  # warm-up (planning, caches)
            times = []
            for i in range(len(queries)):
                t0 = time.perf_counter()
                got = one(i)
                times.append((time.perf_counter() - t0) * 1000)
                recalls.append(len(truths[i] & set(got)) / 10)
                returned.append(len(got))
                if i >= 9 and sum(times) > 30_000:
                    break
            out["query"][label] = {
                **summary(times),
                "recall_at_10": float(np.mean(recalls)),
                "rows_returned": float(np.mean(returned)),
            }
        del all_vecs

        rng = np.random.default_rng(99)
        sample = [all_ids[int(k)] for k in rng.choice(n, size=min(n, 400), replace=False)]
        ops = {}
        t, res = timed(
            lambda i: col.get(ids=sample[i * 10 : (i + 1) * 10], include=["documents", "metadatas"]), reps=40
        )
        assert len(res.ids) == 10
        ops["get_ids_10"] = summary(t)
        t, res = timed(lambda i: col.lexical_search(query=f"{PLANTED} palace", n_results=10), reps=30)
        ops["lexical_search"] = {
            **summary(t),
            "planted_found": bool(res.hits) and res.hits[0].id.endswith(f"{PLANTED_AT:08d}"),
        }
        t, res = timed(lambda i: col.get_recent(limit=20), reps=30)
        ops["get_recent_20"] = summary(t)
        try:
            t, res = timed(lambda i: col.facet_counts("wing"), reps=30)
            ops["facet_counts_wing"] = summary(t)
        except Exception as exc:  # reported
            ops["facet_counts_wing"] = {"error": f"{type(exc).__name__}: {exc}"}
        t, res = timed(lambda i: col.get_all_metadata(), reps=10, budget_s=30, min_reps=3)
        assert len(res) == n
        ops["get_all_metadata"] = summary(t)
        t, _ = timed(
            lambda i: col.get(
                where={"source_file": f"/home/user/projects/wing_1/file_{i * 7 + 1}.md"},
                include=["metadatas"],
                limit=1000,
                offset=0,
            ),
            reps=30,
        )
        ops["get_where_source_file"] = summary(t)

        # -- writes of 10: add and update ------------------------------------------------------
        newq = query_vectors(400, 4242, centers)

        def add10(i):
            col.add(
                ids=[f"new_{i}_{j}" for j in range(10)],
                documents=[f"new drawer {i} {j}" for j in range(10)],
                metadatas=[{"wing": "wing_new", "room": "r", "filed_at": "2027-01-01T00:00:00"}] * 10,
                embeddings=newq[i * 10 : (i + 1) * 10].tolist(),
            )

        t, _ = timed(add10, reps=20)
        ops["add_10"] = summary(t)
        t, _ = timed(
            lambda i: col.update(ids=sample[i * 10 : (i + 1) * 10], metadatas=[{"touched": i}] * 10), reps=20
        )
        ops["update_10"] = summary(t)
        out["ops"] = ops

        # -- incremental: batches of 50 into the full palace, as `mempalace mine` writes ----------
        inc_batches = 20
        t0 = time.perf_counter()
        last_ids, last_vecs = [], None
        for b in range(inc_batches):
            ids, docs, metas, vecs = batch_data(n + 100_000 + b * 50, 50, centers)
            col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
            last_ids, last_vecs = ids, vecs
        inc_s = time.perf_counter() - t0
        found = col.get(ids=last_ids, include=[]).ids
        top = col.query(query_embeddings=[last_vecs[-1].tolist()], n_results=1).ids[0]
        out["incremental"] = {
            "rows_per_s": inc_batches * 50 / inc_s,
            "batches": inc_batches,
            "findable": len(found) == 50 and top == [last_ids[-1]],
        }
        if name == "postgres":
            # Those rows wait in the tail until the folder process builds them a segment: time it.

            t0 = time.perf_counter()
            fresh_before = col.partition.index.fresh_count()
            col.partition.index.settle(timeout=600)
            out["incremental"]["merge_drain_s"] = time.perf_counter() - t0
            out["incremental"]["fresh_rows_at_end_of_writes"] = fresh_before
        if hasattr(col, "maintenance_state"):
            try:
                out["maintenance_state"] = col.maintenance_state()
            except Exception:
                pass
    finally:
        try:
            cleanup(name, dsn, tag, col)
        finally:
            backend.close()
            shutil.rmtree(workdir, ignore_errors=True)
    return out


def render(results: list[dict], meta: dict) -> str:
    lines = [f"## Backends at {', '.join(f'{n:,}' for n in meta['sizes'])} drawers — {meta['date']}", ""]
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".")
    lines.append(
        f"Command: `{meta['command']}`. Latencies in ms (p50 / p95); ratios are p50 of the other "
        "backend divided by p50 of `postgres` (higher = `postgres` faster)."
    )
    if any("settle_seconds" in r.get("ingest", {}) for r in results):
        lines.append(
            "The built-in `pgvector` tables were VACUUM (ANALYZE)d after loading, before any measurement "
            "(what autovacuum would do anyway; not counted as their ingest time). `postgres` bulk loads "
            "end with their own VACUUM, counted."
        )
    lines.append("")
    for n in meta["sizes"]:
        rows = {r["backend"]: r for r in results if r["n"] == n and "error" not in r}
        errs = [r for r in results if r["n"] == n and "error" in r]
        if not rows:
            continue
        names = [b for b in ("postgres", "pgvector", "pgvector_hnsw", "chroma") if b in rows]
        lines += [
            f"### {n:,} drawers",
            "",
            "| operation | "
            + " | ".join(names)
            + " | "
            + " | ".join(f"vs {b}" for b in names if b != "postgres")
            + " |",
            "|---" * (1 + len(names) + len([b for b in names if b != "postgres"])) + "|",
        ]

        def cell(stat):
            return (
                f"{stat['p50']:.2f} / {stat['p95']:.2f}"
                if stat and "p50" in stat
                else (stat or {}).get("error", "—")[:40]
            )

        def add_row(label, getter, extra=None):
            stats = {b: getter(rows[b]) for b in names}
            ours = stats.get("postgres")
            ratios = [
                ratio(stats[b]["p50"], ours["p50"])
                if ours and stats[b] and "p50" in stats[b] and "p50" in ours
                else "—"
                for b in names
                if b != "postgres"
            ]
            lines.append(
                f"| {label} | "
                + " | ".join(cell(stats[b]) for b in names)
                + " | "
                + " | ".join(ratios)
                + " |"
            )

        for q in ("unfiltered", "wing", "wing_room"):
            add_row(f"query k=10, {q.replace('_', '+')}", lambda r, q=q: r["query"][q])
        for op, label in (
            ("get_ids_10", "get(ids) of 10"),
            ("add_10", "add of 10"),
            ("update_10", "update of 10"),
            ("lexical_search", "lexical_search"),
            ("get_recent_20", "get_recent(20)"),
            ("facet_counts_wing", "facet_counts(wing)"),
            ("get_all_metadata", "get_all_metadata()"),
            ("get_where_source_file", "get(where source_file)"),
        ):
            add_row(label, lambda r, op=op: r["ops"].get(op))
        lines += ["", "| quality and ingest | " + " | ".join(names) + " |", "|---" * (1 + len(names)) + "|"]
        for q in ("unfiltered", "wing", "wing_room"):
            lines.append(
                f"| recall@10 / rows returned, {q.replace('_', '+')} | "
                + " | ".join(
                    f"{rows[b]['query'][q]['recall_at_10']:.3f} / {rows[b]['query'][q]['rows_returned']:.1f}"
                    for b in names
                )
                + " |"
            )
        lines.append(
            "| lexical: planted term found first | "
            + " | ".join(str(rows[b]["ops"]["lexical_search"].get("planted_found")) for b in names)
            + " |"
        )
        lines.append(
            "| bulk ingest to query-ready, drawers/s (s) | "
            + " | ".join(
                f"{rows[b]['ingest']['rows_per_s']:,.0f} ({rows[b]['ingest']['seconds']:.1f} s)"
                for b in names
            )
            + " |"
        )
        lines.append(
            "| incremental batches of 50 into the full palace, drawers/s | "
            + " | ".join(
                f"{rows[b]['incremental']['rows_per_s']:,.0f}"
                + ("" if rows[b]["incremental"]["findable"] else " (NOT findable)")
                for b in names
            )
            + " |"
        )
        if "merge_drain_s" in rows["postgres"]["incremental"] if "postgres" in rows else False:
            inc = rows["postgres"]["incremental"]
            lines.append(
                f"| `postgres`: rows still fresh after the writes / background merge drained in | "
                f"{inc['fresh_rows_at_end_of_writes']} / {inc['merge_drain_s']:.1f} s |"
                + " |"
                * (len(names) - 1)
            )
        lines.append(
            "| peak RSS of the ingesting process, MB | "
            + " | ".join(f"{rows[b]['ingest']['rss_mb_peak']:,.0f}" for b in names)
            + " |"
        )
        for e in errs:
            lines.append(f"\n{e['backend']} failed at {n:,}: `{e['error'][:300]}`")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--backends", default="postgres,pgvector,pgvector_hnsw,chroma")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    ap.add_argument("--json", default=str(HERE / "out" / "bench_backends.json"))
    ap.add_argument(
        "--no-write", action="store_true", help="print the report instead of appending it to --out"
    )
    ap.add_argument("--child", nargs=2, metavar=("BACKEND", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--from-json", help="render (and write) the report of an earlier run's --json file")
    args = ap.parse_args()
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        report = render(saved["results"], saved["meta"])
        if not args.no_write:
            record_report(Path(args.out), "bench_backends", report)
        print(report)
        return 0
    dsn = provisioned_dsn()
    if args.child:
        print(json.dumps(run_child(args.child[0], int(args.child[1]), dsn)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    for n in sizes:
        for name in args.backends.split(","):
            print(f"[bench] {name} at {n:,} drawers ...", file=sys.stderr, flush=True)
            t0 = time.time()
            try:
                results.append(child_json(__file__, [name, n], dsn, capture_stderr=True))
            except ChildFailed as exc:
                results.append(
                    {
                        "backend": name,
                        "n": n,
                        "error": exc.stderr.strip().splitlines()[-1] if exc.stderr.strip() else "failed",
                    }
                )
                print(exc.stderr[-3000:], file=sys.stderr)
            print(f"[bench]   done in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    meta = {
        "sizes": sizes,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "versions": versions(dsn),
        "command": "python benchmarks/bench_backends.py " + " ".join(sys.argv[1:]),
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    report = render(results, meta)
    if args.no_write:
        print(report)
    else:
        record_report(Path(args.out), "bench_backends", report)
        print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
