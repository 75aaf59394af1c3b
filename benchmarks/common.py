"""What the benchmarks share: the generated palace (vectors in clusters, drawer metadata as ``mempalace
mine`` writes it), opening each backend through MemPalace's API, timing, child processes, run metadata,
and RESULTS.md's sections (each benchmark's current result; the one it replaces moves to
``out/history/``)."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
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


def drawer_id(i: int) -> str:
    """The id of generated drawer ``i`` (as :func:`batch_data` names it)."""
    return f"drawer_{WINGS[i % len(WINGS)]}_{ROOMS[(i // len(WINGS)) % len(ROOMS)]}_{i:08d}"


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
        ids.append(drawer_id(i))
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


def scratch_vectors(conn, table: str, vectors: np.ndarray, column: str = "vector") -> None:
    """(Re)create ``table`` (i int PRIMARY KEY, embedding ``column``) holding ``vectors`` by binary COPY,
    row i the i-th vector (the connection has pgvector's types registered)."""
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (i int PRIMARY KEY, embedding {column})")
    with conn.cursor().copy(f"COPY {table} (i, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
        copy.set_types(["int4", "vector"])
        for i, v in enumerate(vectors):
            copy.write_row((i, v))


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
    if name == "sqlite_exact":
        from mempalace.backends.sqlite_exact import SQLiteExactBackend

        backend = SQLiteExactBackend()
        return backend, backend.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
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
            from mempalace_pg.engine.indexing import folder_application_name

            # a folder mid-build would deadlock the drop (its build waits for the drop's transaction)
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                (folder_application_name(f"bench_{tag}"),),
            )
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
        super().__init__(f"exit {returncode}" + (f": {stderr[-3000:]}" if stderr else ""))
        self.returncode, self.stderr = returncode, stderr


def run_code(code: str, *args: str, env: dict, timeout: Optional[float] = None) -> str:
    """What ``python -c CODE ARGS`` prints, run with the environment ``env`` (a palace's, whole) and this
    folder on its path; ChildFailed, with the end of its stderr, if it fails."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**env, "PYTHONPATH": str(HERE)},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode:
        raise ChildFailed(proc.returncode, proc.stderr)
    return proc.stdout


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
        # one dict, later keys winning: ``env`` may name MEMPALACE_PG_DSN too (a kept palace's)
        env={
            **os.environ,
            "MEMPALACE_PG_DSN": dsn,
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            **(env or {}),
        },
    )
    if proc.returncode != 0:
        raise ChildFailed(proc.returncode, proc.stderr or "")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def server_dump_tools(dsn: str) -> tuple[str, str]:
    """The server's own pg_dump / pg_restore (its major version), as the backup tests find them."""
    import psycopg

    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))  # the tests' wrappers that run a server root's own tools
    from server_tools import chroot_tool

    with psycopg.connect(dsn) as conn:
        major = conn.info.server_version // 10000
    base = Path(os.environ.get("MEMPALACE_PG_ROOT_BASE", "/var/tmp/mempalace-pg"))
    for stack in (os.environ.get("MEMPALACE_PG_TEST_STACK"), "trixie", "sid"):
        if stack and (base / stack / f"usr/lib/postgresql/{major}/bin/pg_dump").exists():
            return tuple(
                chroot_tool(str(base / stack), f"/usr/lib/postgresql/{major}/bin/{t}")
                for t in ("pg_dump", "pg_restore")
            )
    return "pg_dump", "pg_restore"


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


RESULTS_HEADER = (
    "# Benchmark results\n\nThe current result of each benchmark, produced by the script named with "
    "it, on the machine and versions stated with it, grouped by the question it answers.\n"
)

#: RESULTS.md's questions, in order: each a level-1 heading opening with the current answer, then the
#: sections of the benchmarks that answer it (level 2). A benchmark's first section goes into its group.
QUESTIONS = {
    "Search: how fast does a palace answer?": (
        "commands",
        "filtered",
        "real_path",
        "bench_backends",
        "bench_segments",
        "bench_index_params",
        "bench_pooler",
    ),
    "Writes: how fast does a palace fill, and when is a write searchable?": (
        "mine",
        "bench_write_cost",
        "bench_maintenance",
        "bench_ingest_cpu",
        "bench_write_parts",
        "bench_build_workers",
        "bench_migrate",
        "commands_bulk",
    ),
    "Big palaces: 300,000 to 5,000,000 drawers": (
        "bench_scale",
        "scale",
        "commands_upsert",
        "commands_in_place",
        "bench_filter_arms",
        "bench_index_forms",
        "bench_kept_search",
        "bench_restart",
        "bench_restore_parts",
    ),
    "The graph: facts, and the graph joined with the drawers": (
        "bench_retrieval_1m",
        "bench_retrieval",
        "bench_kg",
        "bench_kg_concurrency",
        "bench_kg_indexes",
        "bench_walk",
    ),
    "Ranking: are the right drawers found?": (
        "graph_recall",
        "longmemeval",
        "mcp_recall",
        "bench_lexical",
        "bench_bm25_index",
    ),
    "Reliability: a team, many writers, changes to the code": (
        "bench_folder_faults",
        "bench_long_queries",
        "bench_team",
        "bench_team_backlog_control",
        "before_after",
    ),
}


def question_of(name: str) -> str:
    """The RESULTS.md question benchmark ``name`` answers (the last one for a benchmark not listed)."""
    return next((q for q, names in QUESTIONS.items() if name in names), list(QUESTIONS)[-1])


def anchor_line(name: str) -> str:
    """The anchor a section carries under its heading, so pages can link to it whatever its title says."""
    return f'<a id="{name.replace("_", "-")}"></a>'


def libpq_vars(dsn: str) -> dict:
    """``dsn`` as libpq's variables (PGHOST, PGPASSWORD, ...), for PostgreSQL's own tools: its password
    never on a command line, which every user of the machine can read in the process list."""
    from mempalace_pg.tools.backup import LIBPQ_ENV, libpq_env

    return {k: v for k, v in libpq_env(dsn).items() if k in LIBPQ_ENV.values()}


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
    keep_run(HERE / "out" / f"{name}.json", name, {"meta": meta, "results": results}, report, write=write)


def keep_run(path: Path, name: str, document: dict, report: str, *, write: bool) -> None:
    """Write ``document`` (a run's figures) as JSON to ``path``, print ``report`` and, with ``write``,
    make it benchmark ``name``'s section of RESULTS.md (:func:`record_report`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1))
    if write:
        record_report(HERE / "RESULTS.md", name, report)
    print(report)


def record_report(out: Path, name: str, report: str) -> None:
    """Make ``report`` (a section starting with '## ') benchmark ``name``'s section of RESULTS.md: it replaces
    that benchmark's earlier section, which moves to ``out/history/<name>.md`` (newest first); a benchmark
    without a section yet gets one at the top of its question's group (:data:`QUESTIONS`). The section
    carries the benchmark's anchor (:func:`anchor_line`) under its heading."""
    marker = f"<!-- benchmark: {name} -->"
    text = out.read_text() if out.exists() else RESULTS_HEADER
    head, groups = split_results(text)
    earlier = [sec for _, sections in groups for sec in sections if marker in sec]
    if earlier:
        history = out.parent / "out" / "history" / f"{name}.md"
        history.parent.mkdir(parents=True, exist_ok=True)
        past = history.read_text() if history.exists() else f"# {name}: earlier results, newest first\n"
        past_head, _, past_rest = past.partition("\n## ")
        kept = "".join(earlier).replace(marker, "").replace(anchor_line(name) + "\n\n", "")
        history.write_text(
            past_head.rstrip("\n")
            + "\n\n"
            + kept.rstrip("\n")
            + "\n"
            + (f"\n## {past_rest}" if past_rest else "")
        )
    title, _, body = report.strip("\n").partition("\n")
    section = f"{title}\n\n{anchor_line(name)}\n\n{body.strip()}\n\n{marker}\n"
    if earlier:
        first = earlier[0]
        groups = [
            (intro, [section if s is first else s for s in sections if s is first or marker not in s])
            for intro, sections in groups
        ]
    else:
        question = question_of(name)
        at = next((i for i, (intro, _) in enumerate(groups) if intro.startswith(f"# {question}\n")), None)
        if at is None:
            groups.append((f"# {question}\n", []))
            at = len(groups) - 1
        groups[at][1].insert(0, section)
    out.write_text(join_results(head, groups))


def split_results(text: str) -> tuple[str, list]:
    """RESULTS.md as (its head, [(a question's heading and answer, [its sections])])."""
    parts = text.split("\n# ")
    head, groups = parts[0], []
    for part in parts[1:]:
        intro, *sections = ("# " + part).split("\n## ")
        groups.append((intro.rstrip("\n") + "\n", ["## " + s.rstrip("\n") + "\n" for s in sections]))
    return head, groups


def join_results(head: str, groups: list) -> str:
    """RESULTS.md from :func:`split_results`'s parts."""
    blocks = [head.rstrip("\n") + "\n"]
    for intro, sections in groups:
        blocks.append(intro.rstrip("\n") + "\n")
        blocks += sections
    return "\n".join(blocks)
