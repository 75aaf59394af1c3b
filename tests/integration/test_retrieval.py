"""Graph + vector retrieval (mempalace_pg.retrieval), each checked against the same answer computed
the slow way: MemPalace's own SQLite knowledge graph walked from Python, vectors ranked with numpy,
the backend's separate lexical search, fused in Python."""

from __future__ import annotations

import math
import random
import uuid

import numpy as np
import pytest

from mempalace_pg.atomic import open_drawers
from mempalace_pg.graph.kg import AgeKnowledgeGraph
from mempalace_pg.retrieval import RRF_K, PalaceSearch

DIM = 16
N_DRAWERS = 300
N_ENTITIES = 40
N_FACTS = 160
WINGS = ("w0", "w1", "w2")
WORDS = "basil garden lisbon tea postgres vector graph memory palace review meeting decision".split()
DATES = [f"2025-{m:02d}-01" for m in range(1, 13)]
AS_OFS = [None, "2025-01-01", "2025-03-01", "2025-06-15", "2025-09-01T12:00:00Z", "2026-01-01"]


def entity_id(name: str) -> str:
    return name.lower().replace(" ", "_").replace("'", "")


@pytest.fixture(scope="module")
def world(tmp_path_factory, pg_dsn, pg_schema):
    """One palace with drawers and facts in PostgreSQL, the same facts in MemPalace's SQLite graph,
    and the data in Python."""
    import os

    from mempalace_pg.graph.routing import sqlite_class

    os.environ["MEMPALACE_PG_DSN"] = pg_dsn
    os.environ["MEMPALACE_PG_SCHEMA"] = pg_schema
    rng = np.random.default_rng(2026)
    r = random.Random(2026)
    vecs = rng.normal(size=(N_DRAWERS, DIM)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = [f"drawer-{i:03d}" for i in range(N_DRAWERS)]
    docs = [" ".join(r.choice(WORDS) for _ in range(6)) + f" note {i}" for i in range(N_DRAWERS)]
    metas = [{"wing": WINGS[i % 3], "room": f"r{i % 5}"} for i in range(N_DRAWERS)]
    palace = f"retrieval-{uuid.uuid4().hex[:8]}"
    drawers, _ = open_drawers(palace_key=palace)
    drawers.add(ids=ids, documents=docs, metadatas=metas, embeddings=vecs.tolist())
    names = [f"Entity {i}" for i in range(N_ENTITIES - 2)] + ["O'Brien", "Zoë Ünicode"]
    kg = AgeKnowledgeGraph(palace_key=palace)
    ref = sqlite_class()(str(tmp_path_factory.mktemp("ref") / "knowledge_graph.sqlite3"))
    facts = []
    for k in range(N_FACTS):
        # a sparse random graph with a few hubs
        s = r.choice(names[:5]) if r.random() < 0.2 else r.choice(names)
        o = r.choice(names)
        start = r.choice([None] + DATES)
        end = (
            None
            if r.random() < 0.6
            else r.choice([d for d in DATES if start is None or d >= start] or [None])
        )
        drawer = None if r.random() < 0.15 else ids[r.randrange(N_DRAWERS)]
        pred = f"rel_{k}"  # one predicate per fact: no open-triple dedup, and a handle on each fact
        for g in (kg, ref):
            g.add_triple(s, pred, o, valid_from=start, valid_to=end, source_drawer_id=drawer)
        facts.append({"subject": s, "predicate": pred, "object": o, "drawer": drawer})
    yield {
        "palace": palace,
        "vecs": vecs,
        "ids": ids,
        "docs": docs,
        "metas": metas,
        "names": names,
        "facts": facts,
        "ref": ref,
        "drawers": drawers,
        "search": PalaceSearch(palace_key=palace),
        "by_pred": {f["predicate"]: f for f in facts},
    }
    ref.close()


# -- the slow way ------------------------------------------------------------------------------------
def distances(world, q):
    return 1.0 - world["vecs"] @ q


def valid_predicates(world, as_of):
    """Predicates (one per fact) valid at as_of, by MemPalace's SQLite graph."""
    out = set()
    for f in world["facts"]:
        if world["ref"].query_relationship(f["predicate"], as_of=as_of):
            out.add(f["predicate"])
    return out


def slow_neighbourhood(world, entity, hops, as_of):
    """BFS over MemPalace's query_entity (both directions, valid at as_of): {name: depth}, and the
    predicates of the facts touching an entity closer than ``hops``."""
    ref = world["ref"]
    if not any(entity_id(n) == entity_id(entity) for n in world["names"]):
        return {}, set()
    depth = {entity: 0}
    frontier = [entity]
    crossed = set()
    for d in range(1, hops + 1):
        nxt = []
        for name in frontier:
            for row in ref.query_entity(name, as_of=as_of, direction="both"):
                crossed.add(row["predicate"])
                other = row["object"] if row["direction"] == "outgoing" else row["subject"]
                if entity_id(other) not in {entity_id(x) for x in depth}:
                    depth[other] = d
                    nxt.append(other)
        frontier = nxt
    return depth, crossed


def slow_around(world, entity, q, hops, as_of, n, mode="restrict", boost=0.1, wing=None):
    _, crossed = slow_neighbourhood(world, entity, hops, as_of)
    evidence = {world["by_pred"][p]["drawer"] for p in crossed} - {None}
    dist = distances(world, q)
    rows = []
    for i, did in enumerate(world["ids"]):
        if wing and world["metas"][i]["wing"] != wing:
            continue
        if mode == "restrict" and did not in evidence:
            continue
        rows.append((-(1 - dist[i] + (boost if mode == "boost" and did in evidence else 0)), did))
    return [did for _, did in sorted(rows)[:n]], evidence


# -- the tests -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("hops", [1, 2, 3])
def test_around_entity_restrict_matches_the_slow_way(world, hops):
    r = random.Random(hops)
    nonempty = 0
    for trial in range(8):
        entity = r.choice(world["names"])
        as_of = AS_OFS[trial % len(AS_OFS)]
        q = world["vecs"][r.randrange(N_DRAWERS)] + 0.3 * np.random.default_rng(trial).normal(
            size=DIM
        ).astype("float32")
        q /= np.linalg.norm(q)
        expected, evidence = slow_around(world, entity, q, hops, as_of, 10)
        got = world["search"].around_entity(entity, q.tolist(), hops=hops, as_of=as_of, n_results=10)
        depth, crossed = slow_neighbourhood(world, entity, hops, as_of)
        assert got["entity_found"] and got["entities"] == len(depth)
        assert got["facts"] == len(crossed) and got["evidence_drawers"] == len(evidence)
        assert [h["id"] for h in got["hits"]] == expected, (entity, hops, as_of)
        nonempty += bool(expected)
        for hit in got["hits"]:
            assert hit["distance"] == pytest.approx(
                float(distances(world, q)[world["ids"].index(hit["id"])]), abs=1e-5
            )
            # each hit lists the neighbourhood's facts drawn from it
            assert {f["predicate"] for f in hit["facts"]} == {
                p for p in crossed if world["by_pred"][p]["drawer"] == hit["id"]
            }
    assert nonempty >= 4  # the generated graph exercises real answers, not just empty ones


def test_around_entity_boost_and_wing_match_the_slow_way(world):
    r = random.Random(7)
    for _ in range(10):
        entity, hops, as_of = r.choice(world["names"][:8]), r.choice([1, 2]), r.choice(AS_OFS)
        q = world["vecs"][r.randrange(N_DRAWERS)]
        wing = r.choice([None, "w1"])
        expected, _ = slow_around(world, entity, q, hops, as_of, 8, mode="boost", boost=0.15, wing=wing)
        got = world["search"].around_entity(
            entity, q.tolist(), hops=hops, as_of=as_of, n_results=8, mode="boost", boost=0.15, wing=wing
        )
        assert [h["id"] for h in got["hits"]] == expected
        expected, _ = slow_around(world, entity, q, hops, as_of, 8, wing=wing)
        got = world["search"].around_entity(
            entity, q.tolist(), hops=hops, as_of=as_of, n_results=8, wing=wing
        )
        assert [h["id"] for h in got["hits"]] == expected


def slow_fuse(world, entity, q, hops, as_of, n, wing=None):
    """around_entity's fuse mode the slow way: the 4n nearest sources and the 4n nearest of all, ranked
    by RRF of their similarity rank among all of them and, for sources, among the sources."""
    _, crossed = slow_neighbourhood(world, entity, hops, as_of)
    evidence = {world["by_pred"][p]["drawer"] for p in crossed} - {None}
    dist = distances(world, q)
    rows = [(float(dist[i]), did) for i, did in enumerate(world["ids"])]
    rows = [r for r, m in zip(rows, world["metas"]) if not wing or m["wing"] == wing]
    near = sorted(rows)[: 4 * n]
    near_evidence = sorted(r for r in rows if r[1] in evidence)[: 4 * n]
    candidates = sorted(set(near) | set(near_evidence))
    sources = [r for r in candidates if r[1] in evidence]
    score = {
        did: 1 / (RRF_K + i + 1) + (1 / (RRF_K + sources.index((d, did)) + 1) if did in evidence else 0)
        for i, (d, did) in enumerate(candidates)
    }
    return sorted(score, key=lambda did: (-score[did], did))[:n]


def test_around_entity_fuse_matches_the_slow_way(world):
    r = random.Random(11)
    for _ in range(10):
        entity, hops, as_of = r.choice(world["names"][:8]), r.choice([1, 2]), r.choice(AS_OFS)
        q = world["vecs"][r.randrange(N_DRAWERS)]
        wing = r.choice([None, "w1"])
        got = world["search"].around_entity(
            entity, q.tolist(), hops=hops, as_of=as_of, n_results=6, mode="fuse", wing=wing
        )
        assert [h["id"] for h in got["hits"]] == slow_fuse(world, entity, q, hops, as_of, 6, wing=wing)


def test_around_entity_by_the_index_arm_too(world, monkeypatch):
    """Large evidence sets go through the HNSW index (iterative scan) instead of an exact scan."""
    from mempalace_pg.engine import nearest

    monkeypatch.setattr(nearest, "EXACT_SCAN_MAX", 0)
    q = world["vecs"][5]
    expected, evidence = slow_around(world, world["names"][0], q, 3, None, 10)
    assert len(evidence) > 10
    got = world["search"].around_entity(world["names"][0], q.tolist(), hops=3, n_results=10)
    assert [h["id"] for h in got["hits"]] == expected


def test_facts_with_evidence_match_mempalace_query_entity(world):
    r = random.Random(11)
    seen = 0
    for trial in range(12):
        entity = r.choice(world["names"])
        as_of = AS_OFS[trial % len(AS_OFS)]
        q = world["vecs"][r.randrange(N_DRAWERS)]
        got = world["search"].facts_with_evidence(entity, q.tolist(), as_of=as_of)
        ref_rows = world["ref"].query_entity(entity, as_of=as_of, direction="both")
        key = ("direction", "subject", "predicate", "object", "valid_from", "valid_to", "current")
        assert sorted(tuple(f[k] for k in key) for f in got["facts"]) == sorted(
            tuple(f[k] for k in key) for f in ref_rows
        )
        dist = distances(world, q)
        sims = []
        for f in got["facts"]:
            drawer = world["by_pred"][f["predicate"]]["drawer"]
            assert f["source_drawer_id"] == drawer
            if drawer is None:
                assert f["similarity"] is None and f["evidence"] is None
            else:
                i = world["ids"].index(drawer)
                assert f["evidence"] == "present" and f["document"] == world["docs"][i]
                assert f["similarity"] == pytest.approx(1 - float(dist[i]), abs=1e-5)
            sims.append(f["similarity"])
        ranked = [s for s in sims if s is not None]
        assert ranked == sorted(ranked, reverse=True)  # best-supported first ...
        assert sims[len(ranked) :] == [None] * (len(sims) - len(ranked))  # ... facts without a drawer last
        seen += len(ranked)
    assert seen >= 10


def test_a_fact_from_an_entity_to_itself_is_listed_in_one_order(world):
    """Such a fact is in both directions with the same rank; without a tie-break two calls could list
    the pair either way round (seen once in CI, as two unequal answers for one question)."""
    loops = [f for f in world["facts"] if f["subject"] == f["object"]]
    assert loops, "the world has no fact from an entity to itself"
    entity = loops[0]["subject"]
    answers = [world["search"].facts_with_evidence(entity) for _ in range(5)]
    assert all(a == answers[0] for a in answers)
    pair = [f["direction"] for f in answers[0]["facts"] if f["predicate"] == loops[0]["predicate"]]
    assert pair == ["incoming", "outgoing"]


def test_entities_for_query_match_the_slow_way(world):
    r = random.Random(5)
    for trial in range(8):
        q = world["vecs"][r.randrange(N_DRAWERS)]
        as_of = AS_OFS[trial % len(AS_OFS)]
        k = r.choice([10, 30, 60])
        dist = distances(world, q)
        near = [world["ids"][i] for i in np.argsort(dist, kind="stable")[:k]]
        valid = valid_predicates(world, as_of)
        scores: dict = {}
        for f in world["facts"]:
            if f["drawer"] in near and f["predicate"] in valid:
                sim = 1 - float(dist[world["ids"].index(f["drawer"])])
                for name in {f["subject"], f["object"]}:
                    s = scores.setdefault(entity_id(name), {"score": -9, "drawers": set(), "facts": 0})
                    s["score"] = max(s["score"], sim)
                    s["drawers"].add(f["drawer"])
                    s["facts"] += 1
        expected = sorted(scores.items(), key=lambda kv: (-kv[1]["score"], -len(kv[1]["drawers"]), kv[0]))[
            :10
        ]
        got = world["search"].entities_for_query(q.tolist(), n_results=10, drawers=k, as_of=as_of)
        assert [g["entity_id"] for g in got] == [e for e, _ in expected]
        assert got or k == 10
        for g, (_, e) in zip(got, expected):
            assert g["score"] == pytest.approx(e["score"], abs=1e-5)
            assert (g["drawers"], g["facts"]) == (len(e["drawers"]), e["facts"])


def test_entities_the_query_names_come_first(world):
    """Named entities (a run of the query's words that is an entity's name) first, each once, whether
    or not a near drawer links to it; the others in the order of the slow way above."""
    q = world["vecs"][7]
    plain = world["search"].entities_for_query(q.tolist(), n_results=100, drawers=30)  # all linked
    assert plain and not any(g["named"] for g in plain)
    text = "What did O'Brien's team decide with entity 12, and Zoë Ünicode?"
    got = world["search"].entities_for_query(q.tolist(), n_results=10, drawers=30, query_text=text)
    named = [g["entity_id"] for g in got if g["named"]]
    assert sorted(named) == ["entity_12", "obrien", "zoë_ünicode"]
    assert [g["entity_id"] for g in got[: len(named)]] == named  # all of them first
    assert [g["entity_id"] for g in got if not g["named"]] == [
        g["entity_id"] for g in plain if g["entity_id"] not in named
    ][: 10 - len(named)]
    linked = {g["entity_id"]: g for g in plain}
    for g in got[: len(named)]:
        if g["entity_id"] in linked:  # linked to a near drawer: its figures as before
            assert (g["score"], g["drawers"]) == (
                linked[g["entity_id"]]["score"],
                linked[g["entity_id"]]["drawers"],
            )
        else:
            assert g["score"] is None and g["drawers"] == 0


@pytest.mark.parametrize("text_weight", [1.0, 0.4])
def test_hybrid_matches_rrf_of_vector_and_lexical_rankings(world, text_weight):
    r = random.Random(3)
    drawers = world["drawers"]
    for _ in range(8):
        q = world["vecs"][r.randrange(N_DRAWERS)]
        text = " ".join(r.sample(WORDS, 2))
        wing = r.choice([None, "w2"])
        where = {"wing": wing} if wing else None
        depth = 50
        dist = distances(world, q)
        order = [i for i in np.argsort(dist, kind="stable") if not wing or world["metas"][i]["wing"] == wing][
            :depth
        ]
        vec_rank = {world["ids"][i]: rank for rank, i in enumerate(order, 1)}
        lex = drawers.lexical_search(query=text, n_results=depth, where=where).hits
        lex_rank = {h.id: rank for rank, h in enumerate(lex, 1)}
        assert lex_rank and set(lex_rank) != set(vec_rank)  # both rankings contribute
        fused = {}
        for ranks, weight in ((vec_rank, 1.0), (lex_rank, text_weight)):
            for did, rank in ranks.items():
                fused[did] = fused.get(did, 0.0) + weight / (RRF_K + rank)
        expected = sorted(fused.items(), key=lambda kv: (-kv[1], vec_rank.get(kv[0], math.inf), kv[0]))[:10]
        got = world["search"].hybrid(text, q.tolist(), n_results=10, wing=wing, text_weight=text_weight)
        assert [g["id"] for g in got] == [e for e, _ in expected]
        for g, (_, score) in zip(got, expected):
            assert g["score"] == pytest.approx(score, rel=1e-9)
            assert g["vector_rank"] == vec_rank.get(g["id"]) and g["text_rank"] == lex_rank.get(g["id"])
            if wing:
                assert g["metadata"]["wing"] == wing


def test_hybrid_refuses_a_text_weight_outside_0_to_1(world):
    q = world["vecs"][0].tolist()
    for bad in (-0.1, 1.5, float("nan"), "heavy", None):
        with pytest.raises(ValueError, match="text_weight must be a number from 0 to 1"):
            world["search"].hybrid("garden", q, text_weight=bad)


def test_hybrid_breaks_an_exact_tie_by_the_vector_rank(pg_env):
    """One drawer first by vector and second by text, the other the reverse: at equal weights both
    score 1/61 + 1/62. The nearer vector wins, whichever id sorts first."""
    palace = f"tie-{uuid.uuid4().hex[:8]}"
    drawers, _ = open_drawers(palace_key=palace)
    drawers.add(
        ids=["a-short", "z-wordy"],
        # the same words once each: BM25 puts the shorter document first by text
        documents=[
            "basil sown in May",
            "basil sown in May, with many more words about the garden and the weather",
        ],
        embeddings=[[0.6, 0.8], [1.0, 0.0]],
    )
    search = PalaceSearch(palace_key=palace)
    got = search.hybrid("basil sown", [1.0, 0.0], n_results=2, text_weight=1.0)
    assert [(g["id"], g["vector_rank"], g["text_rank"]) for g in got] == [
        ("z-wordy", 1, 2),
        ("a-short", 2, 1),
    ]
    assert got[0]["score"] == got[1]["score"]
    search.close()


def test_as_of_boundaries_are_half_open_like_mempalace(pg_env, sqlite_kg):
    palace = f"asof-{uuid.uuid4().hex[:8]}"
    drawers, kg = open_drawers(palace_key=palace)
    drawers.add(ids=["d1", "d2"], documents=["a", "b"], embeddings=[[1, 0], [0, 1]])
    for g in (kg, sqlite_kg):
        g.add_triple("A", "knew", "B", valid_from="2025-01-01", valid_to="2025-06-01", source_drawer_id="d1")
        g.add_triple("A", "knows", "C", valid_from="2025-06-01T12:00:00Z", source_drawer_id="d2")
    search = PalaceSearch(palace_key=palace)
    for as_of in (
        "2024-12-31",
        "2025-01-01",
        "2025-05-31T23:59:59Z",
        "2025-06-01",
        "2025-06-01T12:00:00Z",
        "2025-06-01T23:59:59Z",
        "2025-06-02",
    ):
        got = search.facts_with_evidence("A", as_of=as_of)["facts"]
        ref = sqlite_kg.query_entity("A", as_of=as_of, direction="both")
        assert sorted(f["object"] for f in got) == sorted(f["object"] for f in ref), as_of
        around = search.around_entity("A", [1, 0], hops=1, as_of=as_of)
        assert sorted(h["id"] for h in around["hits"]) == sorted(
            {"B": "d1", "C": "d2"}[f["object"]] for f in ref
        ), as_of


def test_empty_graph_and_unknown_entity_give_clear_empty_answers(pg_env):
    palace = f"empty-{uuid.uuid4().hex[:8]}"
    search = PalaceSearch(palace_key=palace)
    # no drawers and no graph yet
    assert search.around_entity("Nobody", [1, 0])["entity_found"] is False
    assert search.facts_with_evidence("Nobody") == {"entity_found": False, "facts": []}
    assert search.entities_for_query([1, 0]) == [] and search.hybrid("x", [1, 0]) == []
    drawers, kg = open_drawers(palace_key=palace)
    drawers.add(ids=["d1"], documents=["hello world"], embeddings=[[1, 0]])
    search = PalaceSearch(palace_key=palace)
    assert search.around_entity("Nobody", [1, 0], mode="boost") == {
        "entity_found": False,
        "entities": 0,
        "facts": 0,
        "evidence_drawers": 0,
        "hits": [],
    }
    assert search.entities_for_query([1, 0]) == []  # drawers, but no facts link them
    assert [h["id"] for h in search.hybrid("hello", [1, 0])] == ["d1"]
    kg.add_entity("Loner")
    lonely = search.around_entity("Loner", [1, 0], hops=3)
    assert lonely["entity_found"] and lonely["entities"] == 1 and lonely["hits"] == []


def test_bad_input(world):
    search = world["search"]
    from mempalace.backends import DimensionMismatchError

    with pytest.raises(ValueError, match="hops"):
        search.around_entity("Entity 1", world["vecs"][0].tolist(), hops=0)
    with pytest.raises(ValueError, match="hops"):
        search.around_entity("Entity 1", world["vecs"][0].tolist(), hops=7)
    with pytest.raises(DimensionMismatchError):
        search.around_entity("Entity 1", [1.0, 0.0])
    with pytest.raises(ValueError):
        search.around_entity("Entity 1", [float("nan")] * DIM)
    with pytest.raises(ValueError):
        search.facts_with_evidence("Entity 1", as_of="yesterday-ish")
    # NUL is stripped from names as from everything written: the same entity
    assert search.facts_with_evidence("Entity\x00 1") == search.facts_with_evidence("Entity 1")
    with pytest.raises(ValueError):
        search.around_entity("Entity 1", world["vecs"][0].tolist(), mode="sideways")
    # metacharacters are data, never SQL or Cypher
    for name in ("x'); DROP TABLE records; --", "$$ MATCH (n) DETACH DELETE n $$", "%s %(palace)s"):
        assert search.facts_with_evidence(name)["entity_found"] is False
        assert search.hybrid(name, world["vecs"][0].tolist(), n_results=3)
    assert world["drawers"].count() == N_DRAWERS


def test_kg_neighbourhood_sql_function_matches_the_slow_way(world, pg_dsn, pg_schema):
    """The SQL function psql users call walks like the retrieval statements and like MemPalace's graph."""
    import psycopg

    palace_pk = world["search"].kg.palace_pk()
    r = random.Random(9)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f"SET search_path = {pg_schema}, public, ag_catalog")
        for trial in range(12):
            entity, hops, as_of = r.choice(world["names"]), r.choice([1, 2, 3]), AS_OFS[trial % len(AS_OFS)]
            rows = conn.execute(
                "SELECT kg_text(e.properties, 'name'), n.depth "
                "FROM kg_neighbourhood(%s, %s, %s, kg_start_key(%s)) n "
                f'JOIN "{pg_schema}_kg"."Entity" e ON e.id = n.vertex',
                (palace_pk, entity_id(entity), hops, as_of),
            ).fetchall()
            depth, _ = slow_neighbourhood(world, entity, hops, as_of)
            assert {entity_id(n): d for n, d in rows} == {entity_id(n): d for n, d in depth.items()}
