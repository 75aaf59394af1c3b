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
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DIM = 384
CLUSTERS = 50
WINGS = [f"wing_{i}" for i in range(8)]
ROOMS = [f"room_{i}" for i in range(10)]
CHUNKS_PER_FILE = 10
BATCH = 1000
PLANTED = "zyzzyvaquartz"
PLANTED_AT = 1234  # the one drawer whose text holds PLANTED
VOCAB = [
    f"w{i}" for i in range(4000)
] + "the palace memory postgres garden basil decision meeting code review".split()


# ----------------------------------------------------------------------------- data
def cluster_centers() -> np.ndarray:
    """The centres of the clusters the generated vectors are drawn around (the same on every run)."""
    return np.random.default_rng(12345).normal(size=(CLUSTERS, DIM)).astype(np.float32)


def batch_data(start: int, n: int, centers: np.ndarray):
    """Deterministic drawers start..start+n (any batch can be regenerated on its own)."""
    rng = np.random.default_rng(1_000_003 + start)
    cl = rng.integers(0, CLUSTERS, n)
    vecs = centers[cl] + 0.6 * rng.normal(size=(n, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    base = datetime(2025, 1, 1)
    ids, docs, metas = [], [], []
    words = rng.integers(0, len(VOCAB), (n, 60))
    for j in range(n):
        i = start + j
        wing = WINGS[i % len(WINGS)]
        room = ROOMS[(i // len(WINGS)) % len(ROOMS)]
        file_no = i // CHUNKS_PER_FILE
        ids.append(f"drawer_{wing}_{room}_{i:08d}")
        text = " ".join(VOCAB[k] for k in words[j])
        if i == PLANTED_AT:
            text += f" {PLANTED}"
        docs.append(text)
        metas.append(
            {
                "wing": wing,
                "room": room,
                "source_file": f"/home/user/projects/{wing}/file_{file_no}.md",
                "chunk_index": i % CHUNKS_PER_FILE,
                "added_by": "miner",
                "normalize_version": 2,
                "filed_at": (base + timedelta(minutes=i)).isoformat(),
                "source_mtime": 1735689600.0 + i,
            }
        )
    return ids, docs, metas, vecs


def query_vectors(k: int, seed: int, centers: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = centers[rng.integers(0, CLUSTERS, k)] + 0.6 * rng.normal(size=(k, DIM)).astype(np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


# ----------------------------------------------------------------------------- backends
def open_collection(name: str, palace: str, dsn: str, tag: str):
    from mempalace.backends import PalaceRef

    ref = PalaceRef(id=palace, local_path=palace)
    if name == "postgres":
        from mempalace_pg.store.backend import PostgresBackend

        os.environ["MEMPALACE_PG_DSN"] = dsn
        os.environ["MEMPALACE_PG_SCHEMA"] = f"bench_{tag}"
        backend = PostgresBackend()
        return backend, backend.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
    if name in ("pgvector", "pgvector_hnsw"):
        from mempalace.backends.pgvector import PgVectorBackend

        backend = PgVectorBackend()
        col = backend.get_collection(
            palace=ref,
            collection_name="mempalace_drawers",
            create=True,
            options={"dsn": dsn, "namespace": f"bench_{tag}"},
        )
        return backend, col
    if name == "chroma":
        from mempalace.backends.chroma import ChromaBackend

        backend = ChromaBackend()
        return backend, backend.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
    raise SystemExit(f"unknown backend {name}")


def settle(dsn: str, tables: list) -> float:
    """VACUUM (ANALYZE) tables a load has just filled, as autovacuum would do within a minute anyway, so no
    backend is measured while autovacuum scans its table. Returns the seconds it took (not ingest time).
    ``tables`` are (schema or None, table) pairs."""
    import psycopg
    from psycopg import sql

    t0 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema, table in tables:
            name = sql.Identifier(schema, table) if schema else sql.Identifier(table)
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(name))
    return time.perf_counter() - t0


def cleanup(name: str, dsn: str, tag: str, col) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        if name == "postgres":
            conn.execute(f"DROP SCHEMA IF EXISTS bench_{tag} CASCADE")
            # the palace's AGE graph lives in its own schema, registered in ag_catalog: drop it through AGE
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
                (f"bench_{tag}_kg",),
            )
        elif name.startswith("pgvector"):
            conn.execute(f'DROP TABLE IF EXISTS "{col._table}"')


def load_drawers(col, name: str, n: int, centers) -> float:
    """Drawers 0..n into ``col``: ``postgres`` through its bulk path, other backends by upserts of BATCH;
    the seconds it took."""
    t0 = time.perf_counter()
    if name == "postgres":
        with col.bulk_load() as load:
            for start in range(0, n, BATCH):
                ids, docs, metas, vecs = batch_data(start, min(BATCH, n - start), centers)
                load(ids=ids, documents=docs, metadatas=metas, embeddings=vecs)
    else:
        for start in range(0, n, BATCH):
            ids, docs, metas, vecs = batch_data(start, min(BATCH, n - start), centers)
            col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    return time.perf_counter() - t0


# ----------------------------------------------------------------------------- timing
def timed(fn, *, reps: int, budget_s: float = 20.0, min_reps: int = 5):
    """Call fn(i) up to ``reps`` times (fewer if it runs past ``budget_s``); return ms timings, last
    result."""
    times, result = [], None
    start = time.perf_counter()
    for i in range(reps):
        t0 = time.perf_counter()
        result = fn(i)
        times.append((time.perf_counter() - t0) * 1000)
        if i + 1 >= min_reps and time.perf_counter() - start > budget_s:
            break
    return times, result


def summary(times: list[float]) -> dict:
    arr = np.asarray(times)
    return {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)), "n": len(times)}


def peak_rss_mb() -> float:
    """This process's peak resident memory since it started (VmHWM: getrusage's maxrss survives exec, so a
    child would report its parent's peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return rss_mb()


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ----------------------------------------------------------------------------- child: one backend, one size
def run_child(name: str, n: int, dsn: str) -> dict:  # noqa: C901 - one linear script of timed steps
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
        t0 = time.perf_counter()
        if name == "postgres":
            with col.bulk_load() as load:
                for start in range(0, n, BATCH):
                    ids, docs, metas, vecs = batch_data(start, min(BATCH, n - start), centers)
                    load(ids=ids, documents=docs, metadatas=metas, embeddings=vecs)
        else:
            for start in range(0, n, BATCH):
                ids, docs, metas, vecs = batch_data(start, min(BATCH, n - start), centers)
                col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
        load_s = time.perf_counter() - t0
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
            from mempalace_pg.store import indexing

            t0 = time.perf_counter()
            fresh_before = col.partition.fresh_count()
            indexing.settle(col.partition, timeout=600)
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


# ----------------------------------------------------------------------------- parent: orchestrate + report
def provisioned_dsn() -> str:
    dsn = os.environ.get("MEMPALACE_PG_DSN") or os.environ.get("MEMPALACE_PG_TEST_DSN")
    if dsn:
        return dsn
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "provision-postgres.sh")], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip().splitlines()[-1]


class ChildFailed(RuntimeError):
    """A benchmark child process exited with an error; ``stderr`` holds its output when captured."""

    def __init__(self, returncode: int, stderr: str):
        super().__init__(f"exit {returncode}")
        self.returncode, self.stderr = returncode, stderr


def child_json(
    script: str, child_args: list, dsn: str, *, capture_stderr: bool = False, env: Optional[dict] = None
) -> dict:
    """Run ``script --child <child_args>`` in a fresh Python process against ``dsn`` and return the JSON
    object it prints last. One BLAS thread: numpy's idle worker threads would otherwise spin on the
    second core while the store under test works. Its stderr streams through unless ``capture_stderr``;
    ``env`` adds to (or overrides) the environment it inherits."""
    proc = subprocess.run(
        [sys.executable, script, "--child", *map(str, child_args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if capture_stderr else None,
        text=True,
        env=dict(
            os.environ,
            MEMPALACE_PG_DSN=dsn,
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
            MKL_NUM_THREADS="1",
            **(env or {}),
        ),
    )
    if proc.returncode != 0:
        raise ChildFailed(proc.returncode, proc.stderr or "")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def versions(dsn: str) -> dict:
    import psycopg

    with psycopg.connect(dsn) as conn:
        server = conn.execute("SHOW server_version").fetchone()[0]
        ext = dict(
            conn.execute(
                "SELECT name, default_version FROM pg_available_extensions WHERE name IN ('vector', 'age')"
            ).fetchall()
        )
    from importlib.metadata import version

    return {
        "postgresql": server,
        "pgvector": ext.get("vector"),
        "age": ext.get("age"),
        "mempalace": version("mempalace"),
        "mempalace_pg": version("mempalace-pg"),
        "chromadb": version("chromadb"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
    }


def ratio(slow: float, fast: float) -> str:
    return f"{slow / fast:,.1f}x" if fast > 0 else "n/a"


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


RESULTS_HEADER = (
    "# Benchmark results\n\nThe current result of each benchmark, produced by the script named with "
    "it, on the machine and versions stated with it.\n"
)


def run_meta(dsn: str, **fields) -> dict:
    """What a report states about its run: when (UTC), the machine, the versions, and ``fields``."""
    return {
        "when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        **fields,
        "machine": f"{os.cpu_count()} cores",
        "versions": ", ".join(f"{k} {v}" for k, v in versions(dsn).items()),
    }


def save_run(name: str, meta: dict, results: dict, report: str, *, write: bool) -> None:
    """Keep a run's figures as out/<name>.json and, with ``write``, make ``report`` benchmark ``name``'s
    section of RESULTS.md (:func:`record_report`); print the report."""
    out = HERE / "out" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    if write:
        record_report(HERE / "RESULTS.md", name, report)
    print(report)


def record_report(out: Path, name: str, report: str) -> None:
    """Make ``report`` (a section starting with '## ') benchmark ``name``'s section of RESULTS.md: it replaces
    that benchmark's earlier section, which moves to ``out/history/<name>.md`` (newest first); a benchmark
    without a section yet gets one at the top."""
    marker = f"<!-- benchmark: {name} -->"
    text = out.read_text() if out.exists() else RESULTS_HEADER
    head, *sections = text.split("\n## ")
    sections = ["## " + s.rstrip("\n") + "\n" for s in sections]
    earlier = [s for s in sections if marker in s]
    if earlier:
        history = out.parent / "out" / "history" / f"{name}.md"
        history.parent.mkdir(parents=True, exist_ok=True)
        past = history.read_text() if history.exists() else f"# {name}: earlier results, newest first\n"
        past_head, _, past_rest = past.partition("\n## ")
        history.write_text(
            past_head.rstrip("\n")
            + "\n\n"
            + "".join(earlier).replace(marker, "").rstrip("\n")
            + "\n"
            + (f"\n## {past_rest}" if past_rest else "")
        )
    section = report.rstrip("\n") + f"\n\n{marker}\n"
    if earlier:
        first = sections.index(earlier[0])
        sections = [
            section if i == first else s for i, s in enumerate(sections) if i == first or marker not in s
        ]
    else:
        sections.insert(0, section)
    out.write_text(head.rstrip("\n") + "\n\n" + "\n".join(sections))


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
