"""Benchmark: a big palace on the real write path, 100k to 1M drawers (issue 26, item 4).

    python benchmarks/bench_scale.py --sizes 100000,300000,1000000 --others-at 300000   # writes RESULTS.md
    python benchmarks/bench_scale.py --sizes 5000 --others-at 5000 --probes 2,5 --sustain 10 --no-write

For each size, in one run on one machine:

1. a *writer* process upserts the drawers of :class:`skewed_palace.SkewedPalace` (one wing with half the
   drawers, rooms of 50 beside rooms of thousands, files of ~7 chunks) through MemPalace's backend API,
   in batches of 1,000 as ``mempalace mine`` writes big files and ``migrate`` writes, pausing GAP_S
   after every RUN_ROWS rows as separate ``mine`` runs do, and exits (its rate and peak RSS);
2. *search* processes start 10 s, 60 s and 10 min after the writer exited (``--probes``; at sizes
   below ``--short-below`` and for the other stores, ``--short-probes``: 10 s, 60 s, 2 min), open the
   palace anew and run k=10 queries unfiltered, in the wing of their nearest drawer, and in its wing and
   room (p50/p95 ms, recall@10 against exact cosine, within a time budget), and record the vector
   index: segments, rows waiting, index and table size, the server's memory;
3. at the largest size, a writer upserts new drawers for ``--sustain`` seconds while a search process
   queries: search under sustained writes, and the ingest rate into the full palace.

``postgres`` (this package) runs at every size. MemPalace's ``chroma`` and built-in ``pgvector`` run at
the sizes given by ``--others-at`` (they do no work after the writer exits, so their probes differ by
noise only). ``--batch 50`` writes in batches of 50 instead. A run that would take over 30 minutes (a 1M
palace written at the folder's pace, then probed 10 minutes later) is split in two; the palace, its
folder and the clock go on between them::

    python benchmarks/bench_scale.py --sizes 1000000 --others-at "" --sustain 0 --probes 10,60,600 \
        --leave /var/tmp/scale-1m.json --no-write          # write, probe at +10 s and +60 s, hand over
    python benchmarks/bench_scale.py --resume /var/tmp/scale-1m.json --sizes 100000 --others-at "" \
        --sustain 0                                          # the +10 min probe, then the 100k palace

Figures go to ``out/scale_<when>.json``, the chart to ``out/scale_curve.png`` (matplotlib,
``pip install -e .[bench]``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import bench_filtered as bf
import common
import numpy as np
from skewed_palace import SkewedPalace

HERE = Path(__file__).resolve().parent

FILTERS = ("unfiltered", "wing", "wing_room")
QUERIES = 60
#: A probe spends at most this long on each filter (a slow layout still ends before the next probe).
PROBE_BUDGET_S = 20.0
#: The writer pauses GAP_S after every RUN_ROWS rows, as separate `mine` runs leave gaps.
RUN_ROWS = 100_000
GAP_S = 5.0
#: Each postgres probe runs its this many slowest queries of each filter again under EXPLAIN ANALYZE.
SLOWEST = 2


# ----------------------------------------------------------------------------- children
def child_write(
    store: str,
    n: int,
    dsn: str,
    workdir: str,
    tag: str,
    start: int,
    batch: int,
    seconds: float,
    queries_file: str = "",
):
    """Upsert drawers start..n (or, with ``seconds``, new ones from ``start`` for that long) and exit;
    with ``queries_file``, first search the palace at once from this process, as an MCP server that
    files and then searches does."""
    palace = SkewedPalace(n)
    backend, col = common.open_collection(store, str(Path(workdir) / "palace"), dsn, tag)
    t0 = time.perf_counter()
    written, gaps, at = 0, 0.0, start
    while True:
        if seconds:
            if time.perf_counter() - t0 >= seconds:
                break
            if at >= n:
                at = start  # wrap: later batches update drawers written earlier in this run
        elif at >= n:
            break
        ids, docs, metas, vecs = palace.batch(at, batch)
        if seconds:
            # new drawers beside the palace's own, pointing away from them so that the queries' true
            # nearest drawers stay those of the palace
            ids, vecs = [f"{i}_s" for i in ids], -vecs
        col.upsert(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
        written += len(ids)
        at += len(ids)
        if not seconds and written % RUN_ROWS < batch and at < n:
            time.sleep(GAP_S)
            gaps += GAP_S
    took = time.perf_counter() - t0 - gaps
    out = {"rows": written, "seconds": took, "rows_per_s": written / took}
    if queries_file:
        # the layout the first queries meet, then the queries (and, for postgres, the slowest's plans)
        out["in_writer"] = layout_now(col) if store == "postgres" else {}
        out["in_writer"]["query"] = run_queries(
            col,
            json.loads(Path(queries_file).read_text()),
            PROBE_BUDGET_S,
            slowest=SLOWEST if store == "postgres" else 0,
        )
    backend.close()
    out["peak_rss_mb"] = common.peak_rss_mb()
    return out


def layout_now(col) -> dict:

    current = col.partition.index.layout(fresh=True, start_folder=True)
    return {"segments": len(current.segments), "waiting": col.partition.index.fresh_count()}


def run_queries(col, queries: list, budget: float, stats=None, slowest: int = 0) -> dict:
    """k=10 queries of each filter (within ``budget`` seconds each): p50/p95, recall@10 against exact
    cosine; ``stats()``, when given, returns the index blocks counted so far (:func:`index_blocks`);
    the plans of the ``slowest`` queries of each filter (postgres)."""
    out = {}
    for label in FILTERS:
        times, recalls, returned = [], [], []
        blocks = stats() if stats else None
        started = time.perf_counter()
        for q in queries:
            where, truth, _ = q["filters"][label]
            t0 = time.perf_counter()
            got = col.query(query_embeddings=[q["vector"]], n_results=10, where=where).ids[0]
            times.append((time.perf_counter() - t0) * 1000)
            recalls.append(len(set(got) & set(truth)) / 10)
            returned.append(len(got))
            if time.perf_counter() - started > budget and len(times) >= 5:
                break
        out[label] = {
            **common.summary(times),
            "recall_at_10": float(np.mean(recalls)),
            "rows_returned": float(np.mean(returned)),
        }
        if blocks is not None:
            # index blocks the queries found in shared buffers and read from outside them, per query
            # (a session reports its counts once idle for PGSTAT_IDLE_INTERVAL, 10 s: taken after that)
            time.sleep(11.0)
            out[label].update(blocks_between(blocks, stats(), len(times)))
        if slowest:
            # the slowest queries again, under EXPLAIN (ANALYZE, BUFFERS): where their time goes
            worst = sorted(range(len(times)), key=lambda i: -times[i])[:slowest]
            out[label]["slowest"] = [
                {
                    "ms": times[i],
                    **plan_summary(
                        col.explain_query(
                            query_embedding=queries[i]["vector"],
                            n_results=10,
                            where=queries[i]["filters"][label][0],
                        )
                    ),
                }
                for i in worst
            ]
    return out


def plan_summary(plan: dict) -> dict:
    """The statement's time and its arms (one CTE per index segment, ``tail``, ``exact``), slowest first:
    time, rows, shared blocks hit and read, and the scan each ran."""
    arms = []

    def scans(node) -> list[str]:
        here = (
            [f"{node['Node Type']} {node.get('Index Name', '')}".strip()]
            if "Scan" in node["Node Type"]
            else []
        )
        return here + [x for child in node.get("Plans", []) for x in scans(child)]

    def walk(node) -> None:
        name = node.get("Subplan Name", "")
        if name.startswith("CTE "):
            arms.append(
                {
                    "arm": name[4:],
                    "ms": node["Actual Total Time"],
                    "rows": node["Actual Rows"],
                    "hit": node.get("Shared Hit Blocks", 0),
                    "read": node.get("Shared Read Blocks", 0),
                    "scan": ", ".join(scans(node)),
                }
            )
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["Plan"])
    return {
        "explained_ms": plan["Execution Time"],
        "planning_ms": plan["Planning Time"],
        "arms": sorted(arms, key=lambda a: -a["ms"]),
    }


def child_search(
    store: str, dsn: str, workdir: str, tag: str, queries_file: str, budget: float, stats: bool = False
) -> dict:
    queries = json.loads(Path(queries_file).read_text())
    backend, col = common.open_collection(store, str(Path(workdir) / "palace"), dsn, tag)
    out: dict = layout_now(col) if store == "postgres" else {}
    ours = store == "postgres" and stats
    out["query"] = run_queries(
        col,
        queries,
        budget,
        stats=(lambda: index_blocks(dsn, tag)) if ours else None,
        slowest=SLOWEST if store == "postgres" else 0,
    )
    out["peak_rss_mb"] = common.peak_rss_mb()
    backend.close()
    return out


# ----------------------------------------------------------------------------- the server's side
def index_blocks(dsn: str, tag: str) -> dict:
    """Blocks hit and read of each of the palace's indexes, as pg_statio counts them so far, and what
    else the server was doing on the palace then (autovacuum, the folder, its ANALYZE): the reads
    counted in a probe's window may be theirs, not the queries'."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT indexrelname, idx_blks_hit, idx_blks_read FROM pg_statio_user_indexes "
            "WHERE schemaname = %s",
            (f"bench_{tag}",),
        ).fetchall()
        others = conn.execute(
            "SELECT backend_type, left(query, 60) FROM pg_stat_activity WHERE state = 'active' "
            "AND pid <> pg_backend_pid() AND position(%s in query) > 0",
            (f"bench_{tag}",),
        ).fetchall()
        vacuums = conn.execute(
            "SELECT COALESCE(sum(autovacuum_count + vacuum_count), 0), COALESCE(sum(autoanalyze_count), 0) "
            "FROM pg_stat_user_tables WHERE schemaname = %s",
            (f"bench_{tag}",),
        ).fetchone()
    return {
        "indexes": {name: (int(hit or 0), int(read or 0)) for name, hit, read in rows},
        "others": [" ".join(str(x) for x in row) for row in others],
        "vacuums": int(vacuums[0]),
        "analyzes": int(vacuums[1]),
    }


def blocks_between(before: dict, after: dict, queries: int) -> dict:
    """Index blocks hit and read a query between two :func:`index_blocks`, the indexes read most, and
    what else ran meanwhile."""
    delta = {
        name: (hit - before["indexes"].get(name, (0, 0))[0], read - before["indexes"].get(name, (0, 0))[1])
        for name, (hit, read) in after["indexes"].items()
    }
    most = sorted(delta.items(), key=lambda kv: -kv[1][1])[:3]
    return {
        "index_hits": sum(h for h, _ in delta.values()) / queries,
        "index_reads": sum(r for _, r in delta.values()) / queries,
        "reads_by_index": {name: read for name, (_, read) in most if read},
        "others_active": sorted(set(before["others"]) | set(after["others"])),
        "vacuums_meanwhile": after["vacuums"] - before["vacuums"],
        "analyzes_meanwhile": after["analyzes"] - before["analyzes"],
    }


def server_state(dsn: str, store: str, tag: str) -> dict:
    """Sizes of the palace's tables and vector indexes, the postgres folder's state, and the server's
    memory (the proportional set size of every postgres process this machine can see)."""
    import psycopg

    state: dict = {"server_pss_mb": server_pss_mb()}
    schema = f"bench_{tag}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        if store == "postgres":
            segs, rows, index, build = conn.execute(
                f"SELECT count(*), COALESCE(sum(rows), 0), COALESCE(sum(pg_relation_size(to_regclass("
                f"quote_ident(%s) || '.' || quote_ident(index_name)))), 0), COALESCE(sum(build_seconds), 0) "
                f"FROM {schema}.vector_segments",
                (schema,),
            ).fetchone()
            table = conn.execute(
                "SELECT COALESCE(sum(pg_table_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname LIKE 'records_c%%' "
                "AND c.relkind = 'r'",
                (schema,),
            ).fetchone()[0]
            folder = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                (f"mempalace-pg folder {schema}",),
            ).fetchone()[0]
            state.update(
                segments=segs,
                rows_in_segments=int(rows),
                index_mb=float(index) / 1e6,
                table_mb=float(table) / 1e6,
                build_seconds_of_segments=float(build),
                folder_running=bool(folder),
            )
        elif store == "pgvector":
            state["table_mb"] = sum(size for _, size in pgvector_tables(conn, tag)) / 1e6
    return state


def pgvector_tables(conn, tag: str) -> list[tuple[str, int]]:
    """(table, bytes with its indexes) of the built-in pgvector palace: MemPalace names its table after the
    namespace (``mempalace_bench_<tag>_...``)."""
    return [
        (name, int(size))
        for name, size in conn.execute(
            "SELECT c.oid::regclass::text, pg_total_relation_size(c.oid) FROM pg_class c "
            "WHERE c.relkind = 'r' AND c.relname LIKE %s",
            (f"mempalace_bench_{tag}_%",),
        )
    ]


def shared_buffers(dsn: str) -> str:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SHOW shared_buffers").fetchone()[0]


def server_pss_mb() -> float:
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "postgres":
                continue
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def chroma_size_mb(workdir: str) -> float:
    root = Path(workdir) / "palace"
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e6 if root.exists() else 0.0


def folder_done(dsn: str, tag: str) -> bool:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return not conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (f"mempalace-pg folder bench_{tag}",),
        ).fetchone()[0]


def stop_folder(dsn: str, tag: str) -> None:
    """End the palace's folder (a build under way would deadlock with dropping its schema)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (f"mempalace-pg folder bench_{tag}",),
        )
    time.sleep(1.0)


# ----------------------------------------------------------------------------- parent
def run_case(
    store: str, n: int, dsn: str, queries_file: str, args, probes: list, sustain: float, leave_to=None
) -> dict:
    """Write a palace of ``n`` drawers, probe it after the writer exited and, with ``sustain``, search it
    under writes; dropped afterwards, unless ``leave_to`` (a path) hands it, probes up to
    ``args.leave_after`` done, to a later ``--resume`` (see :func:`leave`)."""
    tag = f"scl_{store}_{uuid.uuid4().hex[:6]}"
    workdir = tempfile.mkdtemp(prefix="mpbench_scl_")
    script = str(Path(__file__).resolve())
    case: dict = {"store": store, "n": n, "batch": args.batch, "probes": []}
    handed = False
    try:
        case["write"] = common.child_json(
            script,
            [
                "write",
                store,
                n,
                dsn,
                workdir,
                tag,
                0,
                args.batch,
                0,
                queries_file if n <= args.in_writer_to else "",
            ],
            dsn,
        )
        exited = time.time()
        print(f"  {store} {n:,}: written at {case['write']['rows_per_s']:.0f} rows/s", flush=True)
        if leave_to is not None:
            now = [p for p in probes if p <= args.leave_after]
            follow(case, store, n, dsn, workdir, tag, queries_file, exited, now, 0.0, args.batch)
            leave(leave_to, case, tag, workdir, queries_file, exited, probes[len(now) :], sustain)
            handed = True
            return case
        follow(case, store, n, dsn, workdir, tag, queries_file, exited, probes, sustain, args.batch)
    finally:
        if not handed:
            drop_case(store, dsn, tag, workdir)
    return case


def follow(case, store, n, dsn, workdir, tag, queries_file, exited, probes, sustain, batch) -> None:
    """The probes at ``probes`` seconds after ``exited`` (wall clock, so that a resumed run goes on with
    the same clock), the time until the folder ended (``quiet_s``), then ``sustain`` seconds of writes
    searched meanwhile."""
    script = str(Path(__file__).resolve())
    for i, at in enumerate(probes):
        while time.time() - exited < at:
            if store == "postgres" and "quiet_s" not in case and folder_done(dsn, tag):
                case["quiet_s"] = time.time() - exited
            time.sleep(min(2.0, max(0.0, at - (time.time() - exited))))
        last = ["stats"] if i == len(probes) - 1 else []
        got = common.child_json(
            script, ["search", store, n, dsn, workdir, tag, queries_file, PROBE_BUDGET_S, *last], dsn
        )
        got.update(after_s=at, ended_s=time.time() - exited, **server_state(dsn, store, tag))
        if store == "chroma":
            got["table_mb"] = chroma_size_mb(workdir)
        case["probes"].append(got)
        print(f"  {store} {n:,} +{at:.0f}s: {brief(got)}", flush=True)
    if store == "postgres" and "quiet_s" not in case and folder_done(dsn, tag):
        case["quiet_s"] = time.time() - exited
    if sustain:
        case["sustained"] = sustained(store, n, dsn, workdir, tag, queries_file, sustain, batch)
        print(f"  {store} {n:,} under writes: {brief(case['sustained']['search'])}", flush=True)


def leave(path: Path, case, tag, workdir, queries_file, exited, probes, sustain) -> None:
    """Hand a palace still settling to a later run: a 1M palace written at the folder's pace takes over
    20 minutes, so its write and its probe 10 minutes later do not fit one run of under 30. The palace,
    its folder and the clock (the writer's exit, wall clock) go on between the runs; ``--resume`` takes
    the rest of the probes from here."""
    kept = path.with_suffix(".queries.json")
    shutil.copyfile(queries_file, kept)
    state = {
        "argv": " ".join(sys.argv[1:]),  # the command, as run_meta records it
        "case": case,
        "tag": tag,
        "workdir": workdir,
        "queries_file": str(kept),
        "exited": exited,
        "probes": probes,
        "sustain": sustain,
        "left_at": time.time(),
    }
    path.write_text(json.dumps(state, indent=1))
    print(f"  left to --resume {path}: probes {probes} to come, folder running", flush=True)


def resume(state: dict, dsn: str, batch: int) -> dict:
    """The rest of a case :func:`leave` wrote ``state`` of; the palace is dropped afterwards."""
    case, tag, workdir = state["case"], state["tag"], state["workdir"]
    case["resumed_after_s"] = time.time() - state["left_at"]
    try:
        follow(
            case,
            case["store"],
            case["n"],
            dsn,
            workdir,
            tag,
            state["queries_file"],
            state["exited"],
            state["probes"],
            state["sustain"],
            batch,
        )
    finally:
        drop_case(case["store"], dsn, tag, workdir)
    return case


def drop_case(store: str, dsn: str, tag: str, workdir: str) -> None:
    stop_folder(dsn, tag)
    if store == "pgvector":
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            for table, _ in pgvector_tables(conn, tag):
                conn.execute(f"DROP TABLE IF EXISTS {table}")  # a regclass name, quoted as needed
    else:
        common.cleanup(store, dsn, tag, None)
    shutil.rmtree(workdir, ignore_errors=True)


def sustained(store: str, n: int, dsn: str, workdir: str, tag: str, queries_file: str, seconds: float, batch):
    """A writer upserts new drawers for ``seconds`` while, from a third of the way in, a search process
    queries the palace."""
    script = str(Path(__file__).resolve())
    env = dict(os.environ, MEMPALACE_PG_DSN=dsn)
    writer = subprocess.Popen(
        [
            sys.executable,
            script,
            "--child",
            "write",
            store,
            str(n),
            dsn,
            workdir,
            tag,
            "0",
            str(batch),
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        env=env,
    )
    time.sleep(seconds / 3)
    search = common.child_json(
        script, ["search", store, n, dsn, workdir, tag, queries_file, seconds / 6], dsn
    )
    search.update(server_state(dsn, store, tag))
    out, _ = writer.communicate(timeout=seconds * 4 + 600)
    return {"seconds": seconds, "write": json.loads(out.decode().strip().splitlines()[-1]), "search": search}


def brief(probe: dict) -> str:
    q = probe["query"]
    extra = f", {probe['segments']} segments, {probe['waiting']} waiting" if "segments" in probe else ""
    return (
        ", ".join(
            f"{k} {v['p50']:.1f}/{v['p95']:.1f} ms r{v['recall_at_10']:.3f}"
            + (f" idx hit/read {v['index_hits']:.0f}/{v['index_reads']:.0f}" if "index_hits" in v else "")
            + (f" read {v['reads_by_index']} beside {v['others_active']}" if v.get("reads_by_index") else "")
            for k, v in q.items()
        )
        + extra
    )


# ----------------------------------------------------------------------------- report
def cell(q: dict) -> str:
    return f"{q['p50']:.1f} / {q['p95']:.1f} ({q['recall_at_10']:.2f})"


def blocks(probe: dict) -> str:
    q = probe["query"]["unfiltered"]
    return f"{q['index_hits']:.0f} / {q['index_reads']:.0f}" if "index_hits" in q else "-"


def render(cases: list[dict], meta: dict) -> str:
    lines = [
        "## A big palace on the real write path: 100k to 1M drawers",
        "",
        f"`python benchmarks/bench_scale.py {meta['argv']}` ({meta['when']}, {meta['machine']}, "
        f"{meta['versions']}, shared_buffers {meta.get('shared_buffers', '?')}). "
        "The palace of `benchmarks/skewed_palace.py` (one wing holds half the drawers, "
        f"rooms of 50 beside rooms of thousands) upserted in batches of {meta['batch']:,} by a process that "
        f"exits, pausing {GAP_S:.0f} s after every {RUN_ROWS:,} rows; new processes search it after the "
        "writer exited (k=10, p50 / p95 ms, recall@10 against exact cosine; queries filtered to the wing, "
        "or wing and room, of their nearest drawer). *Server PSS*: the proportional memory of every "
        "postgres process at the probe.",
        "",
        "| palace | store | after | segments (waiting) | unfiltered | wing | wing + room | server PSS MB "
        "| index blocks a query, hit / read outside shared buffers (unfiltered) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        if "in_writer" in c["write"]:
            w = c["write"]["in_writer"]
            seg = f"{w['segments']} ({w['waiting']:,})" if "segments" in w else "-"
            cells = " | ".join(cell(w["query"][f]) for f in FILTERS)
            lines.append(f"| {c['n']:,} | {c['store']} | 0 s, in the writer | {seg} | {cells} | - | - |")
        for p in c["probes"]:
            seg = f"{p['segments']} ({p['waiting']:,})" if "segments" in p else "-"
            cells = " | ".join(cell(p["query"][f]) for f in FILTERS)
            lines.append(
                f"| {c['n']:,} | {c['store']} | +{p['after_s']:.0f} s | {seg} | {cells} "
                f"| {p['server_pss_mb']:.0f} | {blocks(p)} |"
            )
        if "sustained" in c:
            s = c["sustained"]["search"]
            seg = f"{s['segments']} ({s['waiting']:,})" if "segments" in s else "-"
            cells = " | ".join(cell(s["query"][f]) for f in FILTERS)
            lines.append(
                f"| {c['n']:,} | {c['store']} | writing | {seg} | {cells} | {s['server_pss_mb']:.0f} "
                f"| {blocks(s)} |"
            )
    lines += [
        "",
        "| palace | store | written, rows/s | writer peak RSS MB | quiet after, s | index MB | table MB "
        "| build s of the segments | rows/s while searched |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        last = c["probes"][-1]
        quiet = "-" if c["store"] != "postgres" else "> last probe"
        quiet = f"{c['quiet_s']:.0f}" if "quiet_s" in c else quiet
        index = f"{last['index_mb']:.0f}" if "index_mb" in last else "-"
        table = f"{last['table_mb']:.0f}" if "table_mb" in last else "-"
        build = f"{last['build_seconds_of_segments']:.0f}" if "build_seconds_of_segments" in last else "-"
        during = f"{c['sustained']['write']['rows_per_s']:.0f}" if "sustained" in c else "-"
        lines.append(
            f"| {c['n']:,} | {c['store']} | {c['write']['rows_per_s']:.0f} | {c['write']['peak_rss_mb']:.0f} "
            f"| {quiet} | {index} | {table} | {build} | {during} |"
        )
    lines += reads_table(cases)
    base = next((c for c in cases if c["store"] == "postgres" and c["n"] == min(x["n"] for x in cases)), None)
    if base is not None:
        lines += [
            "",
            f"postgres at its last probe against the {base['n']:,} palace (p50 ratio / p95 ratio; "
            "the issue's "
            "targets: within 2x / 3x):",
            "",
            "| palace | unfiltered | wing | wing + room |",
            "|---|---|---|---|",
        ]
        b = base["probes"][-1]["query"]
        for c in cases:
            if c["store"] != "postgres" or c is base:
                continue
            q = c["probes"][-1]["query"]
            lines.append(
                f"| {c['n']:,} | "
                + " | ".join(
                    f"{q[f]['p50'] / b[f]['p50']:.1f}x / {q[f]['p95'] / b[f]['p95']:.1f}x" for f in FILTERS
                )
                + " |"
            )
    lines += plans(cases)
    lines += ["", "![cost against palace size](out/scale_curve.png)", ""]
    return "\n".join(lines)


def plans(cases: list[dict]) -> list[str]:
    """Where the slowest queries of each postgres probe spent their time (EXPLAIN ANALYZE of them run
    again): the statement, and its slowest arms with the blocks they found in shared buffers and read."""
    lines = [
        "",
        f"The {SLOWEST} slowest postgres queries of each probe, run again under EXPLAIN (ANALYZE, BUFFERS): "
        "timed ms (explained ms), then the two slowest arms of the statement (a CTE per index segment, "
        "`tail` for the rows no segment holds yet, `exact` for a small filter's scan): ms, rows, "
        "shared blocks hit / read, the scans.",
        "",
        "| palace | after | filter | slowest queries |",
        "|---|---|---|---|",
    ]
    for c in cases:
        if c["store"] != "postgres":
            continue
        probes = [("0 s, in the writer", c["write"]["in_writer"])] if "in_writer" in c["write"] else []
        probes += [(f"+{p['after_s']:.0f} s", p) for p in c["probes"]]
        if "sustained" in c:
            probes.append(("writing", c["sustained"]["search"]))
        for when, p in probes:
            for f in FILTERS:
                slow = p["query"][f].get("slowest", [])
                text = "; ".join(
                    f"{q['ms']:.1f} ({q['explained_ms']:.1f}): "
                    + ", ".join(
                        f"{a['arm']} {a['ms']:.1f} ms {a['rows']} rows {a['hit']}/{a['read']} [{a['scan']}]"
                        for a in q["arms"][:2]
                    )
                    for q in slow
                )
                if text:
                    lines.append(f"| {c['n']:,} | {when} | {f} | {text} |")
    return lines


def reads_table(cases: list[dict]) -> list[str]:
    """Where the index blocks a probe's window read from outside shared buffers went, and what else ran on
    the palace meanwhile (pg_statio counts every backend's reads, not only the queries')."""
    rows = []
    for c in cases:
        for p in c["probes"]:
            for f in FILTERS:
                q = p["query"][f]
                if q.get("reads_by_index"):
                    most = ", ".join(f"{name} {read:,}" for name, read in q["reads_by_index"].items())
                    beside = "; ".join(q["others_active"]) or "nothing"
                    rows.append(
                        f"| {c['n']:,} | +{p['after_s']:.0f} s | {f} | {q['index_reads']:.0f} | {most} "
                        f"| {beside} |"
                    )
    if not rows:
        return []
    return [
        "",
        "Index blocks read from outside shared buffers in a probe's window (a query's share; the indexes "
        "read most, blocks in all), and what else was active on the palace then:",
        "",
        "| palace | after | filter | read a query | read most | active beside the queries |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def chart(cases: list[dict], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no chart (pip install -e .[bench])", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, label in zip(axes, FILTERS):
        for store, style in (("postgres", "o-"), ("chroma", "s--"), ("pgvector", "^:")):
            pts = sorted(
                (c["n"], c["probes"][-1]["query"][label]["p50"]) for c in cases if c["store"] == store
            )
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=store)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{label}: k=10 p50 ms, last probe")
        ax.set_xlabel("drawers")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("ms")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        role, store, n, dsn, workdir, tag, *rest = sys.argv[2:]
        if role == "write":
            got = child_write(
                store, int(n), dsn, workdir, tag, int(rest[0]), int(rest[1]), float(rest[2]), *rest[3:]
            )
        else:
            got = child_search(store, dsn, workdir, tag, rest[0], float(rest[1]), rest[2:] == ["stats"])
        print(json.dumps(got))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,300000,1000000")
    ap.add_argument("--others-at", default="300000", help="sizes at which chroma and pgvector run too")
    ap.add_argument("--others", default="chroma,pgvector")
    ap.add_argument("--probes", default="10,60,600", help="seconds after the writer exited")
    ap.add_argument(
        "--short-probes",
        default="10,60,120",
        help="the probes of chroma and pgvector (no work after their writer exits) and of sizes below "
        "--short-below",
    )
    ap.add_argument("--short-below", type=int, default=300_000)
    ap.add_argument("--sustain", type=float, default=120.0, help="seconds of writes at the largest size")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument(
        "--in-writer-to",
        type=int,
        default=100_000,
        help="at sizes up to this, the writer searches the palace itself right after its last write",
    )
    ap.add_argument(
        "--leave",
        default="",
        help="hand the largest postgres palace, still settling, to a later --resume through this file",
    )
    ap.add_argument("--leave-after", type=float, default=60.0, help="the probes done before --leave")
    ap.add_argument("--resume", default="", help="first finish the case a --leave run handed over")
    ap.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = ap.parse_args()
    long_probes = [float(p) for p in args.probes.split(",")]
    short_probes = [float(p) for p in args.short_probes.split(",")]
    dsn = os.environ.get("MEMPALACE_PG_DSN") or common.provisioned_dsn()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    others_at = {int(s) for s in args.others_at.split(",") if s}
    tmp = tempfile.mkdtemp(prefix="mpbench_scl_q_")
    cases: list[dict] = []
    stamp = time.strftime("%Y%m%d_%H%M", time.gmtime())
    meta = common.run_meta(
        dsn, argv=" ".join(sys.argv[1:]), batch=args.batch, shared_buffers=shared_buffers(dsn)
    )
    # a trial run (--no-write) keeps its figures out of the repository
    out = (Path(tempfile.gettempdir()) if args.no_write else HERE / "out") / f"scale_{stamp}.json"
    try:
        if args.resume:
            state = json.loads(Path(args.resume).read_text())
            meta["argv"] = f"{state['argv']} | {meta['argv']}"
            cases.append(resume(state, dsn, args.batch))
            out.write_text(json.dumps({"meta": meta, "cases": cases}, indent=1))
        for n in sizes:
            queries = bf.truth_file(n, tmp, QUERIES)
            stores = ["postgres"] + ([s for s in args.others.split(",") if s] if n in others_at else [])
            for store in stores:
                sustain = args.sustain if (n == max(sizes) and store == "postgres") else 0.0
                probes = long_probes if store == "postgres" and n >= args.short_below else short_probes
                hand = args.leave and store == "postgres" and n == max(sizes)
                leave_to = Path(args.leave) if hand else None
                cases.append(run_case(store, n, dsn, queries, args, probes, sustain, leave_to))
                out.write_text(json.dumps({"meta": meta, "cases": cases}, indent=1))  # a partial run is kept
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.leave:
        print(f"figures so far: {out}; the report comes with --resume {args.leave}")
        return 0
    if not args.no_write:
        chart(cases, HERE / "out" / "scale_curve.png")
    report = render(cases, meta)
    if not args.no_write:
        common.record_report(HERE / "RESULTS.md", "bench_scale", report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
