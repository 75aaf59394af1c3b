"""Writers that meet on the same entities never deadlock (docs/architecture.md, "Lock order").

Sixteen processes write one palace at once through every path that creates or locks entities and
facts: the ``pg_file_memory`` tool, the graph's own one-statement writes (what MemPalace's ``kg_add``,
``kg_invalidate`` and supersede become), units of work adding facts one by one after their drawer,
and ``kg import`` batches. The n-th write of each draws its facts from the same five new entities, in
random orders, while two processes keep both cores busy. The run ends with every call answered, no
deadlock counted by the server (``pg_stat_database.deadlocks``: a retry that hid one would still
count), each entity stored once, no two open copies of a fact, and every acknowledged drawer and fact
stored.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from pathlib import Path

import psycopg

from palace_pair import Palace

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "filing_worker.py"
#: (kind, processes): 16 writers in all, 50 writes each.
WRITERS = [("file", 10), ("kg", 3), ("unit", 2), ("import", 1)]
WRITES = 50


def deadlocks(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return conn.execute(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]


def test_sixteen_writers_on_shared_entities_never_deadlock(tmp_path, embedding_url, pg_dsn):
    palace = Palace(tmp_path, "postgres", embedding_url)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "team.md").write_text("The team: who knows whom, who mentors whom.\n", encoding="utf-8")
    palace.init_and_mine(corpus)

    before = deadlocks(pg_dsn)
    hogs = []
    procs = []
    start = tmp_path / "start"
    start.mkdir()
    try:
        seed = 0
        for kind, n in WRITERS:
            for _ in range(n):
                seed += 1
                out = tmp_path / f"{kind}{seed}.json"
                args = [sys.executable, str(WORKER), kind, str(palace.path), str(seed), str(WRITES), str(out)]
                args.append(str(start))
                procs.append((out, subprocess.Popen(args, env=palace.env, stderr=subprocess.PIPE, text=True)))
        deadline = time.monotonic() + 300
        while len(list(start.glob("ready-*"))) < len(procs):
            assert time.monotonic() < deadline, "the writers did not start"
            assert all(proc.poll() is None for _, proc in procs), "a writer exited before the start"
            time.sleep(0.1)
        # the cores are kept busy while the writers write, not while they start (16 interpreters
        # importing MemPalace): what the hogs are for is the writes' interleaving
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
        (start / "go").write_text("go", encoding="utf-8")
        for _, proc in procs:
            proc.wait(timeout=900)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    results = []
    for out, proc in procs:
        assert out.exists(), f"a writer exited with no report: {proc.stderr.read()[-3000:]}"
        result = json.loads(out.read_text(encoding="utf-8"))
        assert "error" not in result, result.get("traceback")
        assert len(result["calls"]) == WRITES
        results.append(result)
    time.sleep(1.5)  # the server's statistics are flushed at most a second after a transaction ends
    assert deadlocks(pg_dsn) == before, "the server detected a deadlock"

    from mempalace_pg.atomic import open_drawers
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    kg = AgeKnowledgeGraph(palace_path=str(palace.path))
    drawers, _ = open_drawers(str(palace.path), create=False)
    by_kind = collections.defaultdict(list)
    for result in results:
        by_kind[result["kind"]].extend(result["calls"])

    # each entity once (the writers' only ones), no open fact twice
    from filing_worker import entities

    from mempalace_pg.graph.values import entity_id_of

    names = {entity_id_of(n) for step in range(WRITES) for n in entities(step)}
    assert kg.stats()["entities"] == len(names)
    open_keys = collections.Counter((f["subject"], f["predicate"], f["object"]) for f in kg.open_facts())
    assert open_keys and max(open_keys.values()) == 1, open_keys.most_common(3)

    # every acknowledged drawer and fact is stored
    filed = by_kind["file"]
    assert all(call["answer"]["success"] for call in filed)
    drawer_ids = [i for call in filed for i in call["answer"]["drawer_ids"]]
    drawer_ids += [call["drawer"] for call in by_kind["unit"]]
    assert len(set(drawer_ids)) == len(drawer_ids) == WRITES * 12
    assert len(drawers.get(ids=drawer_ids).ids) == len(drawer_ids)
    triple_ids = {f["triple_id"] for call in filed for f in call["answer"]["facts"]}
    triple_ids |= {t for call in by_kind["unit"] + by_kind["import"] for t in call["triple_ids"]}
    triple_ids |= {call["triple_id"] for call in by_kind["kg"] if "triple_id" in call}
    assert kg.held_ids("triples", sorted(triple_ids)) == len(triple_ids)
    # a filing answers with the facts it was asked to file, in their order
    for call in filed:
        asked = [(f["subject"], f["predicate"], f["object"]) for f in call["facts"]]
        assert [(f["subject"], f["predicate"], f["object"]) for f in call["answer"]["facts"]] == asked
