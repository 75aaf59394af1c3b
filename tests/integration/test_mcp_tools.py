"""The pg_* MCP tools, reached as an AI client reaches them.

The client is the official ``mcp`` SDK's ``ClientSession`` over ``stdio_client``: it starts
``mempalace-pg mcp --palace P`` as a client's configuration does. The palace is mined by the real
``mempalace`` CLI, and its facts are added through MemPalace's own MCP tool ``mempalace_kg_add`` (on
MemPalace's own server, over the same SDK client), each naming the drawer it was drawn from. Every
answer is checked against :class:`~mempalace_pg.retrieval.PalaceSearch` called directly.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
import pytest

from mcp_client import mempalace_server, pg_server, stdio_session, text_of
from palace_pair import Palace

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "corpus"

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
    palace.init_and_mine(corpus)
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
    named = "What did ALICE's garden get this spring?"

    async def session():
        async with stdio_session(pg_server(mined.path), mined.env) as pg:
            tools = await pg.tools()
            assert PG_TOOLS | {"pg_file_memory"} <= set(tools)
            assert tools["pg_search_around_entity"].annotations.read_only_hint is True
            assert tools["pg_file_memory"].annotations.read_only_hint is False
            assert tools["pg_search_around_entity"].input_schema["required"] == ["entity", "query"]
            # answers come as structured content, and the same JSON as text for clients without it
            raw = await pg.result("pg_hybrid_search", query="basil", limit=2)
            assert raw.structured_content["results"] and json.loads(text_of(raw)) == raw.structured_content
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
                # the entity's name is taken out of the query that ranks, unless asked to keep it
                "named": await pg.call("pg_search_around_entity", entity="Alice", query=named, hops=2),
                "named_kept": await pg.call(
                    "pg_search_around_entity", entity="Alice", query=named, hops=2, keep_entity_in_query=True
                ),
                "facts": await pg.call("pg_entity_facts", entity="Homelab NAS", query=question),
                "facts_in": await pg.call("pg_entity_facts", entity="Homelab NAS", direction="incoming"),
                "entities": await pg.call("pg_entities_for_query", query="basil in the garden", limit=5),
                "hybrid": await pg.call("pg_hybrid_search", query="pg_dump restore", limit=3),
                "hybrid_even": await pg.call(
                    "pg_hybrid_search", query="pg_dump restore", limit=3, text_weight=1
                ),
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
    assert got["named"] == search.around_entity("Alice", embed("What did garden get this spring?"), hops=2)
    assert got["named_kept"] == search.around_entity("Alice", embed(named), hops=2)
    assert [h["similarity"] for h in got["named"]["hits"]] != [
        h["similarity"] for h in got["named_kept"]["hits"]
    ]
    assert got["facts"] == search.facts_with_evidence("Homelab NAS", q, limit=50)
    assert got["facts"]["facts"][0]["source_drawer_id"] == mined.drawer["power.md"]
    assert all(f["evidence"] == "present" and f["document"] for f in got["facts"]["facts"])
    assert got["facts_in"] == search.facts_with_evidence("Homelab NAS", direction="incoming", limit=50)
    assert [f["subject"] for f in got["facts_in"]["facts"]] == ["Alice"]
    assert got["entities"] == {
        "entities": search.entities_for_query(
            embed("basil in the garden"), n_results=5, query_text="basil in the garden"
        )
    }
    assert {"Herb Garden", "Basil"} <= {e["name"] for e in got["entities"]["entities"]}
    # the entity the question names comes first
    assert got["entities"]["entities"][0]["name"] == "Basil" and got["entities"]["entities"][0]["named"]
    assert got["hybrid"] == {
        "results": search.hybrid("pg_dump restore", embed("pg_dump restore"), n_results=3)
    }
    assert got["hybrid"]["results"][0]["id"] == mined.drawer["backups.md"]
    assert got["hybrid_even"] == {
        "results": search.hybrid("pg_dump restore", embed("pg_dump restore"), n_results=3, text_weight=1.0)
    }
    assert [r["score"] for r in got["hybrid_even"]["results"]] != [
        r["score"] for r in got["hybrid"]["results"]
    ]
    assert got["hybrid_wing"]["results"] and all(
        r["metadata"]["wing"] == "corpus" and r["metadata"]["room"] == "kitchen"
        for r in got["hybrid_wing"]["results"]
    )
    search.close()


def test_bad_arguments_come_back_as_tool_errors(mined):
    """Each bad argument is an MCP tool error naming the argument, never a traceback."""

    async def session():
        async with stdio_session(pg_server(mined.path), mined.env) as pg:
            around = "pg_search_around_entity"
            return {
                "hops": await pg.error(around, entity="Alice", query="x", hops=9),
                "mode": await pg.error(around, entity="Alice", query="x", mode="sideways"),
                "as_of": await pg.error(around, entity="Alice", query="x", as_of="2026-13-45"),
                "entity": await pg.error(around, entity="  ", query="x"),
                "query": await pg.error(around, entity="Alice", query=""),
                "keep": await pg.error(around, entity="Alice", query="x", keep_entity_in_query="perhaps"),
                "text_weight": await pg.error("pg_hybrid_search", query="x", text_weight=3),
                "wing": await pg.error("pg_hybrid_search", query="x", wing="../etc"),
                "limit": await pg.error("pg_hybrid_search", query="x", limit="many"),
                "direction": await pg.error("pg_entity_facts", entity="Alice", direction="up"),
                "missing": await pg.error("pg_entity_facts"),
                "content": await pg.error("pg_file_memory", wing="w", room="r", content=" "),
                "fact_shape": await pg.error(
                    "pg_file_memory", wing="w", room="r", content="c", facts=[{"subject": "A", "object": "B"}]
                ),
                "fact_field": await pg.error(
                    "pg_file_memory",
                    wing="w",
                    room="r",
                    content="c",
                    facts=[{"subject": "A", "predicate": "p", "object": "B", "since": "2020"}],
                ),
                "fact_date": await pg.error(
                    "pg_file_memory",
                    wing="w",
                    room="r",
                    content="c",
                    facts=[{"subject": "A", "predicate": "p", "object": "B", "valid_from": "May 2020"}],
                ),
                # still answering after all of that
                "after": await pg.call("pg_hybrid_search", query="basil", limit=1),
            }

    async def no_embedder():
        # an openai-compat endpoint that is down: the tool says so, and files nothing
        env = {**mined.env, "MEMPALACE_EMBEDDING_API_URL": "http://127.0.0.1:9"}
        async with stdio_session(pg_server(mined.path), env) as pg:
            return (
                await pg.error("pg_hybrid_search", query="basil"),
                await pg.error("pg_file_memory", wing="w", room="r", content="never filed"),
            )

    query_failed, filing_failed = anyio.run(no_embedder)
    assert "could not embed the query with MemPalace's configured embedder" in query_failed, query_failed
    assert "could not embed the memory" in filing_failed and "nothing was written" in filing_failed
    got = anyio.run(session)
    after = got.pop("after")
    assert len(after["results"]) == 1
    for message in got.values():
        assert "Traceback" not in message and 'File "' not in message, message
    expected = {
        "hops": "hops",
        "mode": "mode",
        "as_of": "as_of",
        "entity": "entity must be a non-empty string",
        "query": "query must be a non-empty string",
        "keep": "keep_entity_in_query",
        "text_weight": "text_weight must be a number from 0 to 1",
        "wing": "wing contains invalid path characters",
        "limit": "limit",
        "direction": "direction",
        "missing": "entity",
        "content": "content must be a non-empty string",
        "fact_shape": "predicate\n  Field required",
        "fact_field": "since\n  Extra inputs are not permitted",
        "fact_date": "facts[0].valid_from",
    }
    for argument, needle in expected.items():
        assert needle in got[argument], (argument, got[argument])


def test_huge_queries_over_mcp(mined):
    """A query of 100,000 or 1,000,000 characters (a pasted log) in every tool that takes query text,
    ours and MemPalace's ``mempalace_search``, over a real client: each answers, well within the
    statement timeout, with results; none is a tool error."""
    import random
    import time

    rng = random.Random(49)
    corpus_words = " ".join(p.read_text(encoding="utf-8") for p in sorted(CORPUS.rglob("*.md"))).split()

    def pasted(chars: int) -> str:
        return " ".join(rng.choice(corpus_words) for _ in range(chars // 5))[:chars]

    async def session():
        answers = []
        async with (
            stdio_session(pg_server(mined.path), mined.env) as pg,
            stdio_session(mempalace_server(mined.path), mined.env) as mp,
        ):
            for chars in (100_000, 1_000_000):
                q = pasted(chars)
                calls = [
                    (pg, "pg_hybrid_search", {"query": q}),
                    (pg, "pg_search_around_entity", {"entity": "Homelab NAS", "query": q}),
                    (pg, "pg_entities_for_query", {"query": q}),
                    (pg, "pg_entity_facts", {"entity": "Alice", "query": q}),
                    (mp, "mempalace_search", {"query": q}),
                ]
                for client, tool, args in calls:
                    t0 = time.monotonic()
                    answer = await client.call(tool, **args)  # a tool error fails the test here
                    answers.append((chars, tool, answer, time.monotonic() - t0))
        return answers

    for chars, tool, answer, seconds in anyio.run(session):
        assert seconds < 20, f"{tool} took {seconds:.1f} s on a {chars}-character query"
        assert isinstance(answer, dict) and answer.get("error") is None, (tool, str(answer)[:300])
        found = answer.get("results") or answer.get("entities") or answer.get("facts")
        assert found, f"{tool} found nothing for a {chars}-character query of the corpus's words"


def _stored(palace_path: Path, drawer_ids: list, entity: str) -> tuple[list, list]:
    """(the drawer ids of ``drawer_ids`` the palace holds, the facts about ``entity``), read afresh."""
    from mempalace_pg.atomic import open_drawers

    drawers, kg = open_drawers(str(palace_path), create=False)
    try:
        return drawers.get(ids=list(drawer_ids), include=[]).ids, kg.query_entity(entity)
    finally:
        kg.close()


MEMORY = {
    "wing": "team",
    "room": "decisions",
    "content": "Carol chose Tallinn for the 2027 offsite; Dave books the venue by March.",
    "facts": [
        {"subject": "Carol", "predicate": "chose", "object": "Tallinn offsite", "valid_from": "2026-11-30"},
        # a closed fact: MemPalace's add_triple only merges open ones, so a re-filing must not copy it
        {
            "subject": "Dave",
            "predicate": "books",
            "object": "Offsite venue",
            "valid_from": "2026-12-01",
            "valid_to": "2027-03-31",
        },
    ],
}


def test_file_memory_is_one_transaction(mined, pg_dsn, pg_schema):
    """A drawer and its facts are filed together or not at all: a fact that fails after the drawer
    and an earlier fact were written, and a connection lost in the middle, both leave nothing."""
    import psycopg

    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.graph.values import entity_id_of

    bad_second = {
        **MEMORY,
        "facts": [
            MEMORY["facts"][0],
            {**MEMORY["facts"][1], "valid_from": "2026-05-01", "valid_to": "2026-01-01"},
        ],
    }
    kg = AgeKnowledgeGraph(palace_path=str(mined.path))
    palace_pk = kg.palace_pk()
    kg.close()

    async def session():
        async with stdio_session(pg_server(mined.path), mined.env) as pg:
            # 1. the second fact's interval is inverted: add_triple refuses it inside the transaction
            failed = await pg.error("pg_file_memory", **bad_second)
            after_failure = _stored(mined.path, [_drawer_id(MEMORY)], "Carol")

            # 2. the connection dies while the unit waits on the second fact's lock, and again in the
            # filing's one retry: nothing is left, and the answer says so
            holder = psycopg.connect(pg_dsn)
            lock_dave = (palace_pk, entity_id_of("Dave"), "books", entity_id_of("Offsite venue"))
            holder.execute(f'SELECT "{pg_schema}".kg_lock_fact(%s, %s, %s, %s)', lock_dave)
            wrote = []
            async with anyio.create_task_group() as tg:
                outcome = {}

                async def file_it():
                    outcome["message"] = await pg.error("pg_file_memory", **MEMORY)

                tg.start_soon(file_it)
                for _ in range(2):
                    wrote.append(await _terminate_the_waiting_writer(pg_dsn))
            after_kill = _stored(mined.path, [_drawer_id(MEMORY)], "Carol")

            # 3. once more, the first attempt killed: the retry waits for the lock, which is then
            # released, and files the memory whole
            async with anyio.create_task_group() as tg:
                outcome_retry = {}

                async def file_again():
                    outcome_retry["answer"] = await pg.call("pg_file_memory", **MEMORY)

                tg.start_soon(file_again)
                await _terminate_the_waiting_writer(pg_dsn)
                await _backend_waiting_on_advisory_lock(pg_dsn)  # the retry, on a fresh connection
                holder.rollback()
            holder.close()
            first = outcome_retry["answer"]

            # 4. filing it again stores nothing twice
            again = await pg.call("pg_file_memory", **MEMORY)
            # 5. content above MemPalace's chunk_size becomes several drawers; facts point at the first
            long = {
                "wing": "team",
                "room": "long",
                "content": "Offsite planning notes. " * 120,
                "facts": [{"subject": "Offsite planning", "predicate": "owned_by", "object": "Carol"}],
            }
            chunked = await pg.call("pg_file_memory", **long)
            chunked_again = await pg.call("pg_file_memory", **long)
            # 6. another memory stating an open fact already known: not stored twice, keeps its evidence
            other = await pg.call(
                "pg_file_memory",
                wing="team",
                room="other",
                content="Carol picked Tallinn.",
                facts=[MEMORY["facts"][0]],
            )
            facts = await pg.call("pg_entity_facts", entity="Carol")
            dave = await pg.call("pg_entity_facts", entity="Dave")
            return (
                failed,
                after_failure,
                wrote,
                outcome["message"],
                after_kill,
                first,
                again,
                facts,
                dave,
                chunked,
                chunked_again,
                other,
            )

    got = anyio.run(session)
    (
        failed,
        after_failure,
        wrote,
        killed,
        after_kill,
        first,
        again,
        facts,
        dave,
        chunked,
        chunked_again,
        other,
    ) = got
    assert other["drawer"] == "filed" and other["facts"][0]["triple_id"] == first["facts"][0]["triple_id"]
    assert (other["facts"][0]["new"], other["facts"][0]["source_drawer_id"]) == (False, first["drawer_id"])
    assert chunked["chunks"] > 1 and chunked["drawer_ids"][0] == f"{chunked['drawer_id']}_chunk_000000"
    assert [(f["source_drawer_id"], f["new"]) for f in chunked["facts"]] == [(chunked["drawer_ids"][0], True)]
    assert chunked_again["drawer"] == "already_exists" and not any(f["new"] for f in chunked_again["facts"])
    stored, _ = _stored(mined.path, chunked["drawer_ids"], "Carol")
    assert sorted(stored) == sorted(chunked["drawer_ids"])
    assert wrote == [True, True]
    assert "facts[1]" in failed and "nothing was filed" in failed, failed
    assert after_failure == ([], [])
    assert "failed twice" in killed and "was not filed" in killed and "Traceback" not in killed, killed
    assert after_kill == ([], [])
    assert first["drawer"] == "filed" and first["drawer_id"] == _drawer_id(MEMORY) and first["chunks"] == 1
    assert [(f["predicate"], f["new"], f["source_drawer_id"]) for f in first["facts"]] == [
        ("chose", True, first["drawer_id"]),
        ("books", True, first["drawer_id"]),
    ]
    assert again["drawer"] == "already_exists"
    assert [f["triple_id"] for f in again["facts"]] == [f["triple_id"] for f in first["facts"]]
    assert [f["new"] for f in again["facts"]] == [False, False]
    drawers, carol = _stored(mined.path, [first["drawer_id"]], "Carol")
    assert drawers == [first["drawer_id"]] and len(carol) == 1
    assert len(dave["facts"]) == 1 and dave["facts"][0]["valid_to"] == "2027-03-31"
    assert facts["facts"][0]["source_drawer_id"] == first["drawer_id"]
    assert facts["facts"][0]["document"] == MEMORY["content"] and facts["facts"][0]["evidence"] == "present"


async def _terminate_the_waiting_writer(dsn: str) -> bool:
    """Terminate the server's backend that waits on a fact's lock; whether it had written (an xid)."""
    import psycopg

    pid = await _backend_waiting_on_advisory_lock(dsn)
    with psycopg.connect(dsn, autocommit=True) as admin:
        wrote = admin.execute(
            "SELECT backend_xid IS NOT NULL FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()[0]
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # wait until it is gone, so the next wait finds the retry's backend, not this one
        with anyio.fail_after(30):
            while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                await anyio.sleep(0.02)
    return bool(wrote)


def _drawer_id(memory: dict) -> str:
    from mempalace.ids import make_drawer_id_from_content

    return make_drawer_id_from_content(memory["wing"], memory["room"], memory["content"])


async def _backend_waiting_on_advisory_lock(dsn: str, timeout: float = 60) -> int:
    import psycopg

    with anyio.fail_after(timeout):
        while True:
            with psycopg.connect(dsn, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                    "WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = 'mempalace-pg'"
                ).fetchone()
            if row:
                return row[0]
            await anyio.sleep(0.05)


def test_file_memory_concurrent_callers(mined, pg_dsn, pg_schema):
    """Six clients (six server processes) file at once: four memories, each in its own wing, that
    create the same two new entities in opposite orders, and one memory twice. Every call succeeds;
    each drawer, entity and fact is stored once, each fact pointing at its memory."""
    memories = []
    for i, who in enumerate(("Frank", "Grace", "Heidi", "Ivan")):
        if i % 2 == 0:  # the team first, then Erin
            facts = [(who, "member_of", "Platform team"), (who, "works_with", "Erin")]
        else:  # Erin first, then the team
            facts = [("Erin", "mentors", who), ("Platform team", "includes", who)]
        memories.append(
            {
                "wing": f"team_{who.lower()}",
                "room": "people",
                "content": f"{who} joined the platform team this year; Erin is part of the story.",
                "facts": [{"subject": a, "predicate": p, "object": b} for a, p, b in facts],
            }
        )
    memories += [MEMORY, MEMORY]

    async def session():
        answers = [None] * len(memories)

        async def one(i):
            async with stdio_session(pg_server(mined.path), mined.env) as pg:
                answers[i] = await pg.call("pg_file_memory", **memories[i])

        async with anyio.create_task_group() as tg:
            for i in range(len(memories)):
                tg.start_soon(one, i)
        async with stdio_session(pg_server(mined.path), mined.env) as pg:
            team = await pg.call("pg_entity_facts", entity="Platform team")
            erin = await pg.call("pg_entity_facts", entity="Erin")
        return answers, team, erin

    answers, team, erin = anyio.run(session)
    assert all(a["success"] for a in answers)
    assert sorted(a["drawer"] for a in answers[-2:]) == ["already_exists", "filed"]
    assert answers[-1]["drawer_id"] == answers[-2]["drawer_id"]
    ids = [a["drawer_id"] for a in answers]
    stored, carol = _stored(mined.path, ids, "Carol")
    assert sorted(stored) == sorted(set(ids)) and len(set(ids)) == 5
    assert len(carol) == 1
    drawer_of = {m["content"]: a["drawer_id"] for m, a in zip(memories, answers)}
    expected = {
        (f["subject"], f["predicate"], f["object"], drawer_of[m["content"]])
        for m in memories[:4]
        for f in m["facts"]
    }
    got = [
        (f["subject"], f["predicate"], f["object"], f["source_drawer_id"])
        for f in team["facts"] + erin["facts"]
    ]
    assert sorted(got) == sorted(expected)  # 8 facts, each once, each from its memory
    import psycopg

    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    kg = AgeKnowledgeGraph(palace_path=str(mined.path))
    with psycopg.connect(pg_dsn) as conn:
        names = [
            r[0]
            for r in conn.execute(
                f'SELECT name FROM "{pg_schema}".kg_entities WHERE palace_pk = %s AND entity_id IN '
                "('erin', 'platform_team') ORDER BY name",
                (kg.palace_pk(),),
            )
        ]
    kg.close()
    assert sorted(names) == ["Erin", "Platform team"]


def _serve(palace, env: dict, *extra) -> tuple:
    """``mempalace serve`` (MemPalace's HTTP team server) on a free loopback port, with a token;
    (process, url, token) once it answers its health check."""
    import secrets
    import socket
    import subprocess
    import time
    import urllib.request

    from palace_pair import MEMPALACE

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    proc = subprocess.Popen(
        [
            MEMPALACE,
            "serve",
            "--palace",
            str(palace),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--token",
            token,
        ]
        + list(extra),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).read()
            return proc, f"http://127.0.0.1:{port}/mcp", token
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise AssertionError(f"mempalace serve did not start: {proc.stderr.read()[-3000:]}") from None
            time.sleep(0.2)


async def _refusal(call) -> str:
    """The message of a call the server refuses at the protocol level (a JSON-RPC error)."""
    from mcp import MCPError

    try:
        await call
    except MCPError as exc:
        return str(exc)
    raise AssertionError("the call was not refused")


def test_tools_over_mempalace_serve(mined):
    """With MEMPALACE_PG_MCP_TOOLS=1 MemPalace's own HTTP team server carries the pg_* tools (token and
    all); its --read-only mode leaves pg_file_memory out; without the variable nothing changes."""
    from mcp_client import http_session

    question = "what keeps the NAS running when the power goes out"
    on = {**mined.env, "MEMPALACE_PG_MCP_TOOLS": "1"}
    memory = {**MEMORY, "content": "Over HTTP: Carol moved the offsite to May.", "room": "http"}

    async def over(calls, env, *extra):
        proc, url, token = _serve(mined.path, env, *extra)
        try:
            async with http_session(url, token) as client:
                return await calls(client)
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    async def team(client):
        return (
            await client.tool_names(),
            await client.call(
                "pg_search_around_entity", entity="Homelab NAS", query=question, hops=2, limit=3
            ),
            await client.call("pg_file_memory", **memory),
            await client.call("pg_search_around_entity", entity="Alice", query="x", as_of="2026-13-45"),
            await client.call("pg_search_around_entity", entity="Alice"),
            # MemPalace's own add_drawer and pg_file_memory make the same drawer of the same content
            await client.call(
                "mempalace_add_drawer", wing="corpus", room="http", content="Same words, two tools."
            ),
            await client.call("pg_file_memory", wing="corpus", room="http", content="Same words, two tools."),
        )

    async def read_only(client):
        return (
            await client.tool_names(),
            await client.call("pg_hybrid_search", query="pg_dump restore", limit=1),
            await _refusal(client.result("pg_file_memory", **memory)),
        )

    async def plain(client):
        return await client.tool_names()

    async def stdio_answer():
        async with stdio_session(pg_server(mined.path), mined.env) as pg:
            return await pg.call(
                "pg_search_around_entity", entity="Homelab NAS", query=question, hops=2, limit=3
            )

    names, around, filed, bad_date, no_query, by_mempalace, by_pg = anyio.run(over, team, on)
    assert no_query == {"success": False, "error": "missing required argument(s) query"}
    assert by_mempalace["success"] is True and by_pg["drawer"] == "already_exists"
    assert by_pg["drawer_id"] == by_mempalace["drawer_id"]
    from mempalace_pg.atomic import open_drawers

    drawers, kg = open_drawers(str(mined.path), create=False)
    metas = drawers.get(ids=[by_mempalace["drawer_id"], filed["drawer_id"]], include=["metadatas"]).metadatas
    kg.close()
    assert set(metas[0]) == set(metas[1])  # the same metadata fields as mempalace_add_drawer writes
    assert PG_TOOLS | {"pg_file_memory", "mempalace_search", "mempalace_kg_add"} <= set(names)
    assert around == anyio.run(stdio_answer)
    assert filed["success"] is True and filed["drawer"] == "filed"
    assert bad_date["success"] is False and "as_of" in bad_date["error"]
    stored, _ = _stored(mined.path, [filed["drawer_id"]], "Carol")
    assert stored == [filed["drawer_id"]]

    names, hybrid, refused = anyio.run(over, read_only, on, "--read-only")
    assert PG_TOOLS <= set(names) and "pg_file_memory" not in names and "mempalace_add_drawer" not in names
    assert len(hybrid["results"]) == 1
    assert "read-only mode" in refused  # MemPalace's own refusal, as for mempalace_add_drawer

    assert not {n for n in anyio.run(over, plain, mined.env) if n.startswith("pg_")}


def _documented_servers() -> dict:
    """The ``mcpServers`` table of docs/mcp.md's client configuration, as a user copies it."""
    text = (ROOT / "docs" / "mcp.md").read_text()
    section = text[text.index("### Client configuration") :]
    start = section.index("```json\n") + len("```json\n")
    return json.loads(section[start : section.index("```", start)])["mcpServers"]


def test_a_client_configured_from_the_docs(mined, pg_dsn):
    """Both servers of docs/mcp.md's snippet, started as a client starts them (the palace path and the
    DSN put in for the placeholders), together give MemPalace's tools and ours, and both answer."""
    from mcp_client import BIN

    servers = _documented_servers()
    assert set(servers) == {"mempalace", "mempalace-pg"}
    placeholder = "/home/you/.config/mempalace/palace-pg"

    async def session():
        names, answers = set(), {}
        for name, entry in servers.items():
            command = shutil.which(entry["command"], path=str(BIN))
            assert command, f"{entry['command']} is not installed next to this Python"
            args = [str(mined.path) if a == placeholder else a for a in entry["args"]]
            assert str(mined.path) in args and set(entry["env"]) == {"MEMPALACE_PG_DSN"}
            env = {**mined.env, **entry["env"], "MEMPALACE_PG_DSN": pg_dsn}
            async with stdio_session([command, *args], env) as client:
                names |= set(await client.tool_names())
                if name == "mempalace-pg":
                    answers[name] = await client.call(
                        "pg_search_around_entity", entity="Homelab NAS", query="power cut", hops=2
                    )
                else:
                    answers[name] = await client.call("mempalace_kg_query", entity="Homelab NAS")
        return names, answers

    names, answers = anyio.run(session)
    assert PG_TOOLS | {"pg_file_memory", "mempalace_search", "mempalace_kg_add", "mempalace_status"} <= names
    assert answers["mempalace-pg"]["hits"] and answers["mempalace-pg"]["entity_found"] is True
    assert answers["mempalace"]["count"] == 4  # the NAS's three facts and Alice's


def test_pg_tools_in_mempalace_on_a_palace_that_is_not_postgres(tmp_path, embedding_url):
    """With the variable set, MemPalace's server on a palace of another backend keeps working, and the
    pg_* tools say what they need."""
    palace = Palace(tmp_path, "chroma", embedding_url)
    palace.path.mkdir(parents=True)
    env = {**palace.env, "MEMPALACE_PG_MCP_TOOLS": "1"}

    async def session():
        async with stdio_session(mempalace_server(palace.path), env) as mp:
            return await mp.tool_names(), await mp.call("pg_hybrid_search", query="basil")

    names, answer = anyio.run(session)
    assert "mempalace_search" in names and "pg_hybrid_search" in names
    assert answer["success"] is False and "is not on the postgres backend" in answer["error"], answer
