"""Search that knows what is no longer true: a drawer's standing from the facts drawn from it, stale
drawers marked in hybrid search and, when asked, ranked after the current ones; ``as_of`` as the
palace believed it on a date."""

from __future__ import annotations

import uuid

import pytest

from mempalace_pg.atomic import open_drawers
from mempalace_pg.graph.kg import AgeKnowledgeGraph
from mempalace_pg.retrieval import PalaceSearch

DIM = 4


@pytest.fixture
def palace(pg_env):
    """Drawers and the facts drawn from them: a job that changed, a home that ended, a drawer with one
    current and one ended fact, one whose fact holds only from a later date, one no fact names."""
    key = f"stale-{uuid.uuid4().hex[:8]}"
    drawers, _ = open_drawers(palace_key=key)
    docs = {
        "job-2024": "Alice works at Acme as an engineer, joined in January 2024.",
        "job-2026": "Alice works at Initech now, since January 2026.",
        "home": "Bob lives in Lisbon, in a flat near the river.",
        "mixed": "Carol lives in Porto and plays the cello.",
        "plain": "Where does Alice work? Nobody wrote a fact from this note.",
    }
    # the query vector is nearest to the old job, then the new one
    vectors = {
        "job-2024": [1.0, 0.0, 0.0, 0.0],
        "job-2026": [0.9, 0.3, 0.0, 0.0],
        "home": [0.0, 1.0, 0.0, 0.0],
        "mixed": [0.0, 0.0, 1.0, 0.0],
        "plain": [0.0, 0.0, 0.0, 1.0],
    }
    drawers.add(
        ids=list(docs),
        documents=list(docs.values()),
        metadatas=[{"wing": "people", "room": "facts"}] * len(docs),
        embeddings=[vectors[i] for i in docs],
    )
    kg = AgeKnowledgeGraph(palace_key=key)
    kg.add_triple("Alice", "works_at", "Acme", valid_from="2024-01-01", source_drawer_id="job-2024")
    kg.add_triple("Alice", "works_at", "Initech", valid_from="2026-01-01", source_drawer_id="job-2026")
    kg.add_triple(
        "Bob", "lives_in", "Lisbon", valid_from="2023-05-01", valid_to="2025-06-30", source_drawer_id="home"
    )
    kg.add_triple("Carol", "lives_in", "Porto", valid_from="2024-02-01", source_drawer_id="mixed")
    kg.add_triple(
        "Carol", "plays", "cello", valid_from="2020-01-01", valid_to="2024-12-31", source_drawer_id="mixed"
    )
    kg.close()
    search = PalaceSearch(palace_key=key)
    yield search
    search.close()


def test_a_drawer_stands_as_its_facts_do(palace):
    now = palace.drawer_standing(["job-2024", "job-2026", "home", "mixed", "plain", "no-such-drawer"])
    assert set(now) == {"job-2024", "job-2026", "home", "mixed"}  # no fact names the other two
    assert now["job-2024"] == {
        "facts": 1,
        "current": 0,
        "ended": 0,
        "superseded": 1,
        "not_yet": 0,
        "stale": True,
        "replaced_by": ["job-2026"],
    }
    assert now["job-2026"]["stale"] is False and now["job-2026"]["current"] == 1
    assert now["home"]["stale"] is True and now["home"]["ended"] == 1 and now["home"]["replaced_by"] == []
    # one of two facts still holds: not stale
    assert now["mixed"]["stale"] is False and (now["mixed"]["current"], now["mixed"]["ended"]) == (1, 1)


def test_as_of_is_what_the_palace_believed_then(palace):
    then = palace.drawer_standing(["job-2024", "job-2026", "home", "mixed"], as_of="2025-03-01")
    # before Initech: the Acme drawer was current, the Initech one not yet anything
    assert then["job-2024"]["stale"] is False and then["job-2024"]["current"] == 1
    assert then["job-2026"]["stale"] is False and then["job-2026"]["not_yet"] == 1
    assert then["home"]["stale"] is False  # Bob still lived in Lisbon
    assert then["mixed"]["current"] == 1 and then["mixed"]["ended"] == 1
    # the last day of a validity holds (MemPalace's dates are whole days), the next does not
    assert palace.drawer_standing(["home"], as_of="2025-06-30")["home"]["stale"] is False
    assert palace.drawer_standing(["home"], as_of="2025-07-01")["home"]["stale"] is True


def test_hybrid_search_marks_stale_drawers_and_demotes_them_when_asked(palace):
    q = [1.0, 0.05, 0.0, 0.0]
    marked = palace.hybrid("where does Alice work", q, n_results=3)
    assert [r["id"] for r in marked][:2] == ["job-2024", "job-2026"]
    by_id = {r["id"]: r for r in marked}
    assert by_id["job-2024"]["stale"] is True and by_id["job-2024"]["standing"]["replaced_by"] == ["job-2026"]
    assert by_id["job-2026"]["stale"] is False
    assert all(r["standing"] is None for r in marked if r["id"] == "plain")

    demoted = palace.hybrid("where does Alice work", q, n_results=3, stale="demote")
    ids = [r["id"] for r in demoted]
    assert ids[0] == "job-2026" and len(ids) == 3
    flags = [r["stale"] for r in demoted]
    assert flags == sorted(flags)  # every current drawer before every stale one

    # in 2025 the Acme drawer was the answer, and nothing about it was stale
    then = palace.hybrid("where does Alice work", q, n_results=3, stale="demote", as_of="2025-03-01")
    assert then[0]["id"] == "job-2024" and then[0]["stale"] is False

    plain = palace.hybrid("where does Alice work", q, n_results=3, stale=None)
    assert [r["id"] for r in plain] == [r["id"] for r in marked] and "stale" not in plain[0]
    with pytest.raises(ValueError, match="stale must be one of"):
        palace.hybrid("where does Alice work", q, n_results=3, stale="hide")
