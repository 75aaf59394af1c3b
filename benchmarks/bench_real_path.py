"""Benchmark: the path MemPalace takes. A process writes a palace through ``upsert`` and exits; new
processes search it 1, 10 and 60 seconds later. Every backend the same way, in one run.

    python benchmarks/bench_real_path.py --sizes 10000,100000               # writes RESULTS.md
    python benchmarks/bench_real_path.py --sizes 5000 --batches 1000 --no-write --json /tmp/x.json

``mempalace mine`` writes each file's drawers with ``upsert`` (batches of 50 or so; bigger files and
``migrate`` write 1,000), from a CLI process that exits when it is done; the MCP server then searches
from another, long-lived process. So here, for each backend and batch size:

1. a *writer* process opens a fresh palace through MemPalace's backend API and upserts 0 -> N drawers
   (``bench_backends.batch_data``: 384-d vectors in 50 clusters, metadata as ``mine`` writes it), then exits;
2. a *search* process starts 1 s, 10 s and 60 s after the writer exited, opens the palace anew and runs
   k=10 queries unfiltered, in a wing and in a wing and room (p50/p95 ms, recall@10 against exact
   cosine ground truth, rows returned), within a time budget so that it ends before the next probe;
3. after the 60 s probe, the same process times ``get(ids)``, ``lexical_search``, ``facet_counts``
   (status), ``get_recent`` and 20 more upserts of 50 into the full palace, and reports its peak RSS
   and (``postgres``) the vector index: segments, rows waiting, size.

``postgres``'s ``bulk_load`` (what ``mempalace-pg migrate`` uses; MemPalace itself never calls it) is
reported on its own line, searched straight after. Backends: ``postgres`` (this package), ``pgvector``
(MemPalace's built-in, as shipped) and ``chroma`` (MemPalace's default).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import common
import numpy as np

HERE = Path(__file__).resolve().parent
PROBES = (1.0, 10.0, 60.0)
FILTERS = {
    "unfiltered": None,
    "wing": {"wing": "wing_3"},
    "wing_room": {"$and": [{"wing": "wing_3"}, {"room": "room_4"}]},
}
QUERIES = 60
CHUNK = 1000
#: Seconds a probe may spend per filter (so the +1 s probe ends before the +10 s one starts).
PROBE_BUDGET_S = 2.5


# ----------------------------------------------------------------------------- children
def batches(n: int, batch: int, centers):
    """Drawers 0..n in write batches of ``batch``; the data is made in blocks of CHUNK whatever the batch,
    so every batch size writes the same drawers (and one ground truth serves all)."""
    for start in range(0, n, CHUNK):
        ids, docs, metas, vecs = common.batch_data(start, min(CHUNK, n - start), centers)
        for i in range(0, len(ids), batch):
            yield ids[i : i + batch], docs[i : i + batch], metas[i : i + batch], vecs[i : i + batch]


def child_write(store: str, n: int, batch: int, dsn: str, workdir: str, tag: str, mode: str) -> dict:
    os.environ["MEMPALACE_CONFIG_DIR"] = str(Path(workdir) / "config")
    centers = common.cluster_centers()
    backend, col = common.open_collection(store, str(Path(workdir) / "palace"), dsn, tag)
    t0 = time.perf_counter()
    if mode == "bulk_load":
        with col.bulk_load() as load:
            for ids, docs, metas, vecs in batches(n, batch, centers):
                load(ids=ids, documents=docs, metadatas=metas, embeddings=vecs)
    else:
        for ids, docs, metas, vecs in batches(n, batch, centers):
            col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    seconds = time.perf_counter() - t0
    assert col.count() == n
    table = getattr(col, "_table", None) if store == "pgvector" else None  # dropped by the parent
    backend.close()
    return {"seconds": seconds, "rows_per_s": n / seconds, "rss_mb": common.peak_rss_mb(), "table": table}


def truths(n: int) -> dict:
    """Exact top-10 ids per filter for the benchmark's queries."""
    centers = common.cluster_centers()
    vecs = np.empty((n, common.DIM), dtype=np.float32)
    wing = np.empty(n, dtype=object)
    room = np.empty(n, dtype=object)
    ids = []
    for start in range(0, n, CHUNK):
        i, _d, m, v = common.batch_data(start, min(CHUNK, n - start), centers)
        vecs[start : start + len(i)] = v
        wing[start : start + len(i)] = [x["wing"] for x in m]
        room[start : start + len(i)] = [x["room"] for x in m]
        ids.extend(i)
    ids_arr = np.asarray(ids)
    masks = {
        "unfiltered": np.ones(n, dtype=bool),
        "wing": wing == "wing_3",
        "wing_room": (wing == "wing_3") & (room == "room_4"),
    }
    queries = common.query_vectors(QUERIES, 777, centers)
    return {
        label: [ids_arr[mask][np.argsort(-(vecs[mask] @ q))[:10]].tolist() for q in queries]
        for label, mask in masks.items()
    }


def child_search(store: str, n: int, dsn: str, workdir: str, tag: str, truth_file: str, ops: bool) -> dict:
    started = time.time()
    os.environ["MEMPALACE_CONFIG_DIR"] = str(Path(workdir) / "config")
    centers = common.cluster_centers()
    truth = json.loads(Path(truth_file).read_text())
    backend, col = common.open_collection(store, str(Path(workdir) / "palace"), dsn, tag)
    queries = common.query_vectors(QUERIES, 777, centers)
    out: dict = {"started": started, "query": {}}
    if store == "postgres":
        index = col.partition.index
        layout = index.layout(fresh=True, start_folder=True)
        out["index_at_start"] = {"segments": len(layout.segments), "waiting": index.fresh_count()}
    for label, where in FILTERS.items():
        times, recalls, returned = [], [], []
        budget = time.perf_counter() + PROBE_BUDGET_S
        for i, q in enumerate(queries):
            t0 = time.perf_counter()
            got = col.query(query_embeddings=[q.tolist()], n_results=10, where=where).ids[0]
            times.append((time.perf_counter() - t0) * 1000)
            recalls.append(len(set(got) & set(truth[label][i])) / 10)
            returned.append(len(got))
            if i >= 4 and time.perf_counter() > budget:
                break
        out["query"][label] = {
            **common.summary(times),
            "recall_at_10": float(np.mean(recalls)),
            "rows_returned": float(np.mean(returned)),
        }
    if ops:
        rng = np.random.default_rng(99)
        sample = [common.batch_data(int(k), 1, centers)[0][0] for k in rng.choice(n, size=200, replace=False)]
        res = {}
        t, _ = common.timed(
            lambda i: col.get(ids=sample[i * 10 : (i + 1) * 10], include=["documents", "metadatas"]),
            reps=20,
            budget_s=5,
        )
        res["get_ids_10"] = common.summary(t)
        t, _ = common.timed(
            lambda i: col.lexical_search(query=f"{common.PLANTED} palace", n_results=10), reps=20, budget_s=5
        )
        res["lexical_search"] = common.summary(t)
        try:
            t, _ = common.timed(lambda i: col.facet_counts("wing"), reps=20, budget_s=5)
            res["facet_counts_wing"] = common.summary(t)
        except Exception:  # Chroma has no facet_counts: MemPalace reads all metadata instead
            res["facet_counts_wing"] = None
        t, _ = common.timed(lambda i: col.get_recent(limit=20), reps=20, budget_s=5)
        res["get_recent_20"] = common.summary(t)
        t0 = time.perf_counter()
        for b in range(20):
            ids, docs, metas, vecs = common.batch_data(n + 500_000 + b * 50, 50, centers)
            col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
        res["incremental_50_rows_per_s"] = 1000 / (time.perf_counter() - t0)
        out["ops"] = res
        if store == "postgres":
            state = col.maintenance_state()
            size = col.partition.db.run(
                lambda conn: conn.execute(
                    "SELECT COALESCE(sum(pg_relation_size(to_regclass(quote_ident(%s) || '.' || "
                    "quote_ident(index_name)))), 0)"
                    f" FROM {col.partition.db.schema}.vector_segments WHERE collection_pk = %s",
                    (col.partition.db.schema, col.partition.pk),
                ).fetchone()[0]
            )
            out["index"] = {
                "segments": len(state["vector_index_segments"]),
                "index_mb": float(size) / 1e6,
                "table_mb": col.partition.db.run(
                    lambda conn: conn.execute(
                        "SELECT pg_total_relation_size(%s::regclass)", (col.partition.relname,)
                    ).fetchone()[0]
                )
                / 1e6,
            }
    out["rss_mb"] = common.peak_rss_mb()
    backend.close()
    return out


# ----------------------------------------------------------------------------- parent
def run_case(
    store: str, n: int, batch: int, dsn: str, truth_file: str, mode: str = "upsert", probes: tuple = PROBES
) -> dict:
    tag = f"rp_{store}_{uuid.uuid4().hex[:6]}"
    workdir = tempfile.mkdtemp(prefix="mpbench_rp_")
    script = str(Path(__file__).resolve())
    case: dict = {"store": store, "n": n, "batch": batch, "mode": mode}
    try:
        t0 = time.time()
        case["write"] = common.child_json(script, ["write", store, n, batch, dsn, workdir, tag, mode], dsn)
        exited = time.time()
        case["write"]["process_seconds"] = exited - t0
        case["probes"] = []
        probes = probes[:1] if mode == "bulk_load" else probes
        for i, delay in enumerate(probes):
            time.sleep(max(0.0, exited + delay - time.time()))
            last = i == len(probes) - 1
            probe = common.child_json(
                script, ["search", store, n, dsn, workdir, tag, truth_file, int(last)], dsn
            )
            probe["after_exit_s"] = probe["started"] - exited
            case["probes"].append({"delay": delay, **probe})
            print(
                f"  {store} n={n} batch={batch} {mode} +{delay:.0f}s: "
                + ", ".join(
                    f"{k} {v['p50']:.1f} ms r{v['recall_at_10']:.2f}" for k, v in probe["query"].items()
                ),
                flush=True,
            )
    finally:
        _cleanup(store, dsn, tag, (case.get("write") or {}).get("table"))
        shutil.rmtree(workdir, ignore_errors=True)
    return case


def _cleanup(store: str, dsn: str, tag: str, table) -> None:
    import psycopg

    from mempalace_pg.engine.indexing import folder_application_name

    with psycopg.connect(dsn, autocommit=True) as conn:
        if store == "postgres":
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                (folder_application_name(f"bench_{tag}"),),
            )
            conn.execute(f"DROP SCHEMA IF EXISTS bench_{tag} CASCADE")
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
                (f"bench_{tag}_kg",),
            )
        elif store == "pgvector" and table:
            from psycopg import sql

            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


def render(cases: list[dict], meta: dict) -> str:
    lines = [
        f"## The real path: upsert from a process that exits, then search from new ones ({meta['date']})",
        "",
        f"Machine: {meta['machine']}. {meta['versions']}. Command: `{meta['command']}`.",
        "",
        "Each backend written through MemPalace's backend API by a process that exits; searched by new "
        "processes +1 s, +10 s and +60 s after that exit. Query cells: p50 ms (recall@10). `postgres` "
        "index: segments / rows waiting for the index when the search process started.",
        "",
        "![real path](out/real_path.png)",
        "",
    ]
    for n in sorted({c["n"] for c in cases}):
        lines += [
            f"### {n:,} drawers",
            "",
            "| backend | batch | ingest rows/s | probe | unfiltered | wing | wing+room | postgres index |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for c in (c for c in cases if c["n"] == n):
            name = c["store"] + (" (bulk_load)" if c["mode"] == "bulk_load" else "")
            for i, p in enumerate(c["probes"]):
                q = p["query"]
                cells = [
                    f"{q[k]['p50']:.1f} / p95 {q[k]['p95']:.1f} ({q[k]['recall_at_10']:.2f}"
                    + ("" if q[k]["rows_returned"] == 10 else f", {q[k]['rows_returned']:.1f} rows")
                    + ")"
                    for k in FILTERS
                ]
                idx = p.get("index_at_start")
                first = (
                    [name, str(c["batch"]), f"{c['write']['rows_per_s']:,.0f}"] if i == 0 else ["", "", ""]
                )
                index = f"{idx['segments']} / {idx['waiting']:,}" if idx else ""
                lines.append("| " + " | ".join(first + [f"+{p['after_exit_s']:.0f} s", *cells, index]) + " |")
        lines.append("")
        ops_rows = [c for c in cases if c["n"] == n and c["probes"] and "ops" in c["probes"][-1]]
        if ops_rows:
            lines += [
                "After the last probe, same process: p50 ms; 20 more upserts of 50 into the full palace; "
                "peak RSS of the writer and of the search process.",
                "",
                "| backend | batch | get 10 ids | lexical | facet_counts | get_recent 20 | 20 x 50 upserts, "
                "rows/s "
                "| RSS writer / search MB | index MB / table MB |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for c in ops_rows:
                o, p = c["probes"][-1]["ops"], c["probes"][-1]
                ix = p.get("index")
                facets = f"{o['facet_counts_wing']['p50']:.2f}" if o["facet_counts_wing"] else "n/a"
                cells = [
                    c["store"] + (" (bulk_load)" if c["mode"] == "bulk_load" else ""),
                    str(c["batch"]),
                    f"{o['get_ids_10']['p50']:.2f}",
                    f"{o['lexical_search']['p50']:.2f}",
                    facets,
                    f"{o['get_recent_20']['p50']:.2f}",
                    f"{o['incremental_50_rows_per_s']:,.0f}",
                    f"{c['write']['rss_mb']:.0f} / {p['rss_mb']:.0f}",
                    f"{ix['index_mb']:.0f} / {ix['table_mb']:.0f}" if ix else "",
                ]
                lines.append("| " + " | ".join(cells) + " |")
            lines.append("")
    lines += targets(cases)
    return "\n".join(lines) + "\n"


def chart(cases: list[dict], path: Path) -> None:
    """p50 of each query kind at each probe, per backend, for the largest size and batches of 1,000 (log
    scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(c["n"] for c in cases)
    chosen = [c for c in cases if c["n"] == n and c["batch"] == 1000]
    fig, axes = plt.subplots(1, len(FILTERS), figsize=(13, 4), sharey=True)
    for ax, key in zip(axes, FILTERS):
        for c in chosen:
            label = c["store"] + (" (bulk_load)" if c["mode"] == "bulk_load" else "")
            xs = [p["delay"] for p in c["probes"]]
            ax.plot(xs, [p["query"][key]["p50"] for p in c["probes"]], marker="o", label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks([1, 10, 60], ["+1 s", "+10 s", "+60 s"])
        ax.set_title(f"{n:,} drawers, k=10 {key.replace('_', '+')}")
        ax.set_xlabel("search process started after the writer exited")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("p50 ms")
    axes[0].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def targets(cases: list[dict]) -> list[str]:
    """Issue 13's targets, checked against this run: each line says held or missed, with the figures."""
    out = ["### Targets (issue 13), this run", ""]
    for n in sorted({c["n"] for c in cases}):
        for batch in sorted({c["batch"] for c in cases if c["n"] == n and c["mode"] == "upsert"}):
            by = {
                c["store"]: c for c in cases if c["n"] == n and c["batch"] == batch and c["mode"] == "upsert"
            }
            if not {"postgres", "pgvector", "chroma"} <= set(by):
                continue
            pg, pv, ch = by["postgres"], by["pgvector"], by["chroma"]
            rate = pg["write"]["rows_per_s"]
            ok = rate >= pv["write"]["rows_per_s"] and rate >= 5 * ch["write"]["rows_per_s"]
            out.append(
                f"- {n:,} drawers, batches of {batch}: ingest {rate:,.0f} rows/s against built-in pgvector "
                f"{pv['write']['rows_per_s']:,.0f} and 5 x Chroma {5 * ch['write']['rows_per_s']:,.0f}: "
                f"{'held' if ok else 'missed'}."
            )
            for probe, slack in ((1, 1.0), (2, 1.0), (0, 2.0)):  # +10 s, +60 s: the targets; +1 s: within 2x
                if probe >= len(pg["probes"]):
                    continue
                label = f"+{pg['probes'][probe]['delay']:.0f} s"
                q, qv, qc = (c["probes"][probe]["query"] for c in (pg, pv, ch))
                u = q["unfiltered"]
                held = u["p50"] <= slack * qc["unfiltered"]["p50"] and u["recall_at_10"] >= 0.95
                out.append(
                    f"  - {label}: unfiltered {u['p50']:.1f} ms (recall {u['recall_at_10']:.2f}) against "
                    f"Chroma {qc['unfiltered']['p50']:.1f} ms{' x 2' if slack > 1 else ''}: "
                    f"{'held' if held else 'missed'}."
                )
                for k in ("wing", "wing_room"):
                    need_v, need_c = qv[k]["p50"] / (20 / slack), qc[k]["p50"] / (25 / slack)
                    held = q[k]["p50"] <= min(need_v, need_c) and q[k]["rows_returned"] == 10
                    out.append(
                        f"  - {label}: {k} {q[k]['p50']:.2f} ms against built-in pgvector {qv[k]['p50']:.1f} "
                        f"/ {20 / slack:.0f} and Chroma {qc[k]['p50']:.1f} / {25 / slack:.1f}: "
                        f"{'held' if held else 'missed'}."
                    )
    return out + [""]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, args = sys.argv[2], sys.argv[3:]
        if kind == "write":
            result = child_write(args[0], int(args[1]), int(args[2]), args[3], args[4], args[5], args[6])
        else:
            result = child_search(
                args[0], int(args[1]), args[2], args[3], args[4], args[5], bool(int(args[6]))
            )
        print(json.dumps(result))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--batches", default="1000,50")
    ap.add_argument("--backends", default="postgres,pgvector,chroma")
    ap.add_argument(
        "--probes",
        default=",".join(f"{p:g}" for p in PROBES),
        help="seconds after the writer's exit at which search processes start",
    )
    ap.add_argument(
        "--bulk-load",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time postgres's bulk_load (what migrate uses)",
    )
    ap.add_argument("--json", type=Path, default=HERE / "out" / "real_path.json")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    dsn = common.provisioned_dsn()
    probes = tuple(float(x) for x in args.probes.split(","))
    cases = []
    for n in [int(x) for x in args.sizes.split(",")]:
        truth_file = Path(tempfile.mkstemp(prefix="mpbench_truth_", suffix=".json")[1])
        truth_file.write_text(json.dumps(truths(n)))
        try:
            for batch in [int(x) for x in args.batches.split(",")]:
                for store in args.backends.split(","):
                    cases.append(run_case(store, n, batch, dsn, str(truth_file), probes=probes))
            if args.bulk_load and "postgres" in args.backends.split(","):
                cases.append(
                    run_case("postgres", n, 1000, dsn, str(truth_file), mode="bulk_load", probes=probes)
                )
        finally:
            truth_file.unlink()
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "versions": ", ".join(f"{k} {v}" for k, v in common.versions(dsn).items()),
        "command": "python benchmarks/bench_real_path.py " + " ".join(sys.argv[1:]),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"meta": meta, "cases": cases}, indent=1))
    report = render(cases, meta)
    print(report)
    if not args.no_write:
        chart(cases, HERE / "out" / "real_path.png")
        common.record_report(HERE / "RESULTS.md", "real_path", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
