"""MemPalace's own commands on a postgres palace read its PostgreSQL stores, never a stray SQLite file.

The parity test compares these commands with Chroma; here the postgres-only cases: a
``knowledge_graph.sqlite3`` left in a postgres palace (from an earlier SQLite-graph life, or copied in)
is never read by ``audit`` or ``kg normalize``. That the hooks are in place in a fresh interpreter before
MemPalace binds anything (``mempalace_pg_hooks.pth``) needs no database: tests/unit/test_hooks.py.
"""

from __future__ import annotations

import os

from palace_pair import Palace


def test_a_stray_sqlite_graph_in_a_postgres_palace_is_never_read(tmp_path, embedding_url, pg_env):
    p = Palace(tmp_path, "postgres", embedding_url)
    corpus = tmp_path / "notes"
    corpus.mkdir()
    (corpus / "home.md").write_text("# Home server\n\nThe NAS keeps the nightly dumps.\n", encoding="utf-8")
    assert p.cli("--backend", "postgres", "mine", str(corpus))["rc"] == 0
    with p.mcp() as mcp:
        assert mcp.call("mempalace_kg_add", subject="NAS", predicate="stores_dumps_of", object="Home Server")[
            "success"
        ]
    # a SQLite graph with other facts, where MemPalace would look for one
    from mempalace_pg.graph.routing import sqlite_class

    stray = sqlite_class()(str(p.path / "knowledge_graph.sqlite3"))
    for i in range(5):
        stray.add_triple(f"Stray {i}", f"sqlite_only_{i}", "Nowhere")
    stray.close()

    audit = p.cli("audit")
    assert audit["rc"] == 0 and "1 facts" in audit["out"], audit["out"]
    plan = p.cli(
        "kg",
        "normalize",
        "--llm-provider",
        "openai-compat",
        "--llm-endpoint",
        embedding_url,
        "--llm-model",
        "rules",
    )
    assert plan["rc"] == 0, plan["out"]
    assert "1 open facts use a predicate outside" in plan["out"] and "NAS | stores_dumps_of" in plan["out"]
    assert "sqlite_only" not in plan["out"]
    applied = p.cli("kg", "normalize", "--yes")
    assert "Rewrote 1 fact(s)" in applied["out"], applied["out"]
    with p.mcp() as mcp:
        facts = mcp.call("mempalace_kg_query", entity="NAS")["facts"]
        assert {(f["predicate"], f["object"], f["current"]) for f in facts} == {
            ("stores_dumps_of", "Home Server", False),
            ("works_on", "stores dumps of Home Server", True),
        }, facts
    # the stray file is untouched
    stray = sqlite_class()(str(p.path / "knowledge_graph.sqlite3"))
    assert stray.stats()["triples"] == 5
    stray.close()


def test_a_reader_that_goes_away_gets_no_traceback(pg_env):
    """`mempalace-pg ... | head` : when stdout's reader has gone, the command stops quietly."""
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes its first line
    proc = subprocess.run(
        [sys.executable, "-m", "mempalace_pg.cli", "db", "current"],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert proc.stderr == ""
