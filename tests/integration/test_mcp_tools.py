"""The pg_* MCP tools, reached as an AI client reaches them.

The client is the official ``mcp`` SDK's ``ClientSession`` over ``stdio_client``: it starts
``mempalace-pg mcp --palace P`` as a client's configuration does. The palace is mined by the real
``mempalace`` CLI, and its facts are added through MemPalace's own MCP tool ``mempalace_kg_add`` (on
MemPalace's own server, over the same SDK client), each naming the drawer it was drawn from. Every
answer is checked against :class:`~mempalace_pg.retrieval.PalaceSearch` called directly.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import pytest

from mcp_client import mempalace_server, pg_server, stdio_session
from palace_pair import Palace

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"

#: (subject, predicate, object, valid_from, source file): facts a person would draw from the corpus.
FACTS = [
    ("Homelab NAS", "runs", "ZFS", "2023-02-01", "network.md"),
    ("Homelab NAS", "backs_up_to", "Offsite B2 bucket", "2025-09-01", "backups.md"),
    ("Homelab NAS", "powered_by", "UPS", None, "power.md"),
    ("Alice", "maintains", "Homelab NAS", "2024-01-01", "network.md"),
    ("Alice", "tends", "Herb Garden", "2026-03-01", "garden.md"),
    ("Herb Garden", "grows", "Basil", None, "garden.md"),
    ("Bob", "bakes", "Sourdough", None, "sourdough.md"),
    ("Alice", "decided", "Ingest design", "2026-06-02", "decisions.md"),
]

PG_TOOLS = {"pg_search_around_entity", "pg_entity_facts", "pg_entities_for_query", "pg_hybrid_search"}


@pytest.fixture
def mined(embedding_url, tmp_path, pg_env):
    """A palace mined by the real CLI, with FACTS added through MemPalace's ``mempalace_kg_add``."""
    palace = Palace(tmp_path, "postgres", embedding_url)
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    for args in (
        ("init", "--backend", "postgres", "--yes", "--no-llm", str(corpus)),
        ("--backend", "postgres", "mine", str(corpus)),
    ):
        done = palace.cli(*args)
        assert done["rc"] == 0, done["out"]
    palace.drawer = _drawer_of_file(palace.path)

    async def add_facts():
        async with stdio_session(mempalace_server(palace.path), palace.env) as mp:
            for subject, predicate, obj, since, source in FACTS:
                added = await mp.call(
                    "mempalace_kg_add",
                    subject=subject,
                    predicate=predicate,
                    object=obj,
                    **({"valid_from": since} if since else {}),
                    source_drawer_id=palace.drawer[source],
                )
                assert added.get("success") is True, added

    anyio.run(add_facts)
    return palace


def _drawer_of_file(palace_path: Path) -> dict:
    """source file name -> the id of its first drawer."""
    from mempalace_pg.atomic import open_drawers

    drawers, kg = open_drawers(str(palace_path), create=False)
    rows = drawers.get(include=["metadatas"])
    first = {}
    for drawer_id, meta in sorted(zip(rows.ids, rows.metadatas), key=lambda r: (r[1]["chunk_index"], r[0])):
        first.setdefault(Path(meta["source_file"]).name, drawer_id)
    kg.close()
    return first


def _direct(palace_path: Path, env: dict):
    """PalaceSearch on the same palace, with the query embedded by the same configured embedder."""
    import os

    from mempalace_pg.retrieval import PalaceSearch, embed_query

    for key in ("MEMPALACE_EMBEDDING_MODEL", "MEMPALACE_EMBEDDING_API_URL", "MEMPALACE_EMBEDDING_API_MODEL"):
        os.environ[key] = env[key]
    return PalaceSearch(palace_path=str(palace_path)), embed_query


def test_client_lists_and_uses_each_tool(mined, monkeypatch):
    for key in ("MEMPALACE_CONFIG_DIR", "HOME"):
        monkeypatch.setenv(key, mined.env[key])
    search, embed = _direct(mined.path, mined.env)
    question = "what keeps the NAS running when the power goes out"

    async def session():
        async with stdio_session(pg_server(mined.path), mined.env) as pg:
            tools = await pg.tools()
            assert PG_TOOLS | {"pg_file_memory"} <= set(tools)
            assert tools["pg_search_around_entity"].annotations.read_only_hint is True
            assert tools["pg_file_memory"].annotations.read_only_hint is False
            assert tools["pg_search_around_entity"].input_schema["required"] == ["entity", "query"]
            return {
                "around": await pg.call(
                    "pg_search_around_entity", entity="Homelab NAS", query=question, hops=2, limit=3
                ),
                "boost": await pg.call(
                    "pg_search_around_entity", entity="alice", query=question, mode="boost", limit=4
                ),
                "as_of": await pg.call(
                    "pg_search_around_entity", entity="Alice", query="basil", as_of="2025-06-01"
                ),
                "unknown": await pg.call("pg_search_around_entity", entity="Nobody", query=question),
                "facts": await pg.call("pg_entity_facts", entity="Homelab NAS", query=question),
                "facts_in": await pg.call("pg_entity_facts", entity="Homelab NAS", direction="incoming"),
                "entities": await pg.call("pg_entities_for_query", query="basil in the garden", limit=5),
                "hybrid": await pg.call("pg_hybrid_search", query="pg_dump restore", limit=3),
                "hybrid_wing": await pg.call(
                    "pg_hybrid_search", query="basil", wing="corpus", room="kitchen"
                ),
            }

    got = anyio.run(session)
    q = embed(question)
    assert got["around"] == search.around_entity("Homelab NAS", q, hops=2, n_results=3)
    # the NAS and, within 2 hops, ZFS, the bucket, the UPS, Alice, and what Alice tends and decided
    assert got["around"]["entity_found"] is True and got["around"]["entities"] == 7
    assert got["around"]["hits"][0]["id"] == mined.drawer["power.md"]
    assert got["boost"] == search.around_entity("alice", q, mode="boost", n_results=4)
    assert got["as_of"] == search.around_entity("Alice", embed("basil"), as_of="2025-06-01")
    assert mined.drawer["garden.md"] not in [h["id"] for h in got["as_of"]["hits"]]  # tended from 2026
    assert got["unknown"]["entity_found"] is False and got["unknown"]["hits"] == []
    assert got["facts"] == search.facts_with_evidence("Homelab NAS", q, limit=50)
    assert got["facts"]["facts"][0]["source_drawer_id"] == mined.drawer["power.md"]
    assert all(f["evidence"] == "present" and f["document"] for f in got["facts"]["facts"])
    assert got["facts_in"] == search.facts_with_evidence("Homelab NAS", direction="incoming", limit=50)
    assert [f["subject"] for f in got["facts_in"]["facts"]] == ["Alice"]
    assert got["entities"] == {
        "entities": search.entities_for_query(embed("basil in the garden"), n_results=5)
    }
    assert {"Herb Garden", "Basil"} <= {e["name"] for e in got["entities"]["entities"]}
    assert got["hybrid"] == {
        "results": search.hybrid("pg_dump restore", embed("pg_dump restore"), n_results=3)
    }
    assert got["hybrid"]["results"][0]["id"] == mined.drawer["backups.md"]
    assert got["hybrid_wing"]["results"] and all(
        r["metadata"]["wing"] == "corpus" and r["metadata"]["room"] == "kitchen"
        for r in got["hybrid_wing"]["results"]
    )
    search.close()
