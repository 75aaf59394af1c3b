"""Units of work: drawers and facts of one palace in one transaction (mempalace_pg.atomic), and the
rule for facts whose source drawer is deleted."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import psycopg
import pytest

from mempalace_pg import unit_of_work
from mempalace_pg.atomic import open_drawers
from mempalace_pg.graph.kg import AgeKnowledgeGraph
from mempalace_pg.retrieval import PalaceSearch


def vectors(n, dim=8, seed=0):
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype("float32")
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).tolist()


@pytest.fixture
def palace(pg_env):
    return f"uow-{uuid.uuid4().hex[:8]}"


def facts_of(palace, name):
    return AgeKnowledgeGraph(palace_key=palace).query_entity(name, direction="both")


def test_commit_makes_drawers_and_facts_visible_together(palace):
    v = vectors(2)
    with unit_of_work(palace_key=palace) as uow:
        uow.add_drawers(
            ids=["d1", "d2"],
            documents=["Alice moved to Lisbon", "Bob likes tea"],
            metadatas=[{"wing": "people"}, {"wing": "people"}],
            embeddings=v,
        )
        tid = uow.add_triple("Alice", "lives_in", "Lisbon", valid_from="2026-05-01", source_drawer_id="d1")
        # the unit's own graph sees its uncommitted writes ...
        assert [f["object"] for f in uow.kg.query_entity("Alice")] == ["Lisbon"]
        # ... another connection does not, before commit
        assert facts_of(palace, "Alice") == []
        assert open_drawers(palace_key=palace)[0].get(ids=["d1"]).ids == []
    assert tid.startswith("t_alice_lives_in_lisbon_")
    assert [(f["subject"], f["object"]) for f in facts_of(palace, "Alice")] == [("Alice", "Lisbon")]
    drawers, _ = open_drawers(palace_key=palace)
    assert sorted(drawers.get(ids=["d1", "d2"]).ids) == ["d1", "d2"]
    # the drawer is findable by vector right away, and the fact carries its evidence
    assert drawers.query(query_embeddings=[v[0]], n_results=1).ids == [["d1"]]
    facts = PalaceSearch(palace_key=palace).facts_with_evidence("Alice")["facts"]
    assert [(f["source_drawer_id"], f["evidence"], f["document"]) for f in facts] == [
        ("d1", "present", "Alice moved to Lisbon")
    ]


def test_error_anywhere_rolls_back_drawers_and_facts(palace):
    with unit_of_work(palace_key=palace) as uow:  # something committed before
        uow.add_drawers(ids=["keep"], documents=["kept"], embeddings=vectors(1))
    with pytest.raises(RuntimeError, match="boom"):
        with unit_of_work(palace_key=palace) as uow:
            uow.add_drawers(ids=["d1"], documents=["Eve owns a dog"], embeddings=vectors(1, seed=1))
            uow.add_triple("Eve", "owns", "Dog", source_drawer_id="d1")
            uow.add_entity("Rex", "dog")
            uow.delete_drawers(["keep"])
            raise RuntimeError("boom")
    drawers, kg = open_drawers(palace_key=palace)
    assert drawers.get(ids=["d1", "keep"]).ids == ["keep"]
    assert kg.query_entity("Eve") == [] and kg.stats()["entities"] == 0 and kg.stats()["triples"] == 0


def test_failed_statement_rolls_back_the_whole_unit(palace):
    with pytest.raises(ValueError, match="already exist"):
        with unit_of_work(palace_key=palace) as uow:
            uow.add_drawers(ids=["a"], documents=["a"], embeddings=vectors(1))
            uow.add_triple("A", "is", "first", source_drawer_id="a")
            uow.add_drawers(ids=["a"], documents=["again"], embeddings=vectors(1))  # duplicate id
    drawers, kg = open_drawers(palace_key=palace)
    assert drawers.count() == 0 and kg.stats()["triples"] == 0


def test_duplicate_drawer_can_be_caught_and_the_unit_goes_on(palace):
    with unit_of_work(palace_key=palace) as uow:
        uow.add_drawers(ids=["a"], documents=["a"], embeddings=vectors(1))
        with pytest.raises(ValueError):
            uow.add_drawers(ids=["a", "b"], documents=["x", "y"], embeddings=vectors(2))
        uow.add_drawers(ids=["a"], documents=["replaced"], embeddings=vectors(1), replace=True)
        uow.add_triple("A", "is", "first", source_drawer_id="a")
    drawers, kg = open_drawers(palace_key=palace)
    got = drawers.get(ids=["a", "b"])
    assert got.ids == ["a"] and got.documents == ["replaced"]
    assert kg.stats()["triples"] == 1


def test_source_drawer_must_exist_in_the_palace(palace, make_collection):
    other = f"{palace}-other"
    with unit_of_work(palace_key=other) as uow:
        uow.add_drawers(ids=["elsewhere"], documents=["x"], embeddings=vectors(1))
    with unit_of_work(palace_key=palace) as uow:
        uow.add_drawers(ids=["here"], documents=["x"], embeddings=vectors(1))
        with pytest.raises(ValueError, match="not a drawer of this palace"):
            uow.add_triple("A", "b", "C", source_drawer_id="elsewhere")  # another palace's drawer
        with pytest.raises(ValueError, match="not a drawer of this palace"):
            uow.supersede("A", "b", "C", "D", source_drawer_id="nowhere")
        uow.add_triple("A", "b", "C", source_drawer_id="here")
    with unit_of_work(palace_key=palace) as uow:  # a drawer stored earlier counts too
        uow.add_triple("A", "b", "E", source_drawer_id="here")
    assert sorted(f["object"] for f in facts_of(palace, "A")) == ["C", "E"]


def test_bad_input_writes_nothing(palace):
    with pytest.raises(ValueError):
        with unit_of_work(palace_key=palace) as uow:
            uow.add_drawers(ids=["a"], documents=["ok"], embeddings=vectors(1))
            uow.add_drawers(
                ids=["b"], documents=["ok"], metadatas=[{"score": float("nan")}], embeddings=vectors(1)
            )
    with pytest.raises(ValueError):
        with unit_of_work(palace_key=palace) as uow:
            uow.add_drawers(ids=["c"], documents=["nan"], embeddings=[[float("nan")] * 8])
    with pytest.raises(ValueError):
        with unit_of_work(palace_key=palace) as uow:
            uow.add_drawers(ids=["d"], documents=["ok"], embeddings=vectors(1))
            uow.add_triple("X", "y", "Z", valid_from="not a date")
    drawers, kg = open_drawers(palace_key=palace)
    assert drawers.count() == 0 and kg.stats()["triples"] == 0


def test_concurrent_units_on_the_same_palace(palace):
    """Several threads, each a unit of work with its own drawers, its own fact and one fact shared by
    all: every unit commits, and the shared fact is stored once."""
    with unit_of_work(palace_key=palace) as uow:
        uow.add_drawers(ids=["seed"], documents=["seed"], embeddings=vectors(1))
    errors = []
    start = threading.Barrier(6)

    def worker(i):
        try:
            start.wait()
            with unit_of_work(palace_key=palace) as uow:
                uow.add_drawers(
                    ids=[f"w{i}_{j}" for j in range(20)],
                    documents=[f"doc {i} {j}" for j in range(20)],
                    embeddings=vectors(20, seed=i),
                )
                uow.add_triple("Team", "uses", "Postgres", source_drawer_id=f"w{i}_0")
                uow.add_triple(f"Worker {i}", "wrote", "drawers", source_drawer_id=f"w{i}_1")
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    drawers, kg = open_drawers(palace_key=palace)
    assert drawers.count() == 1 + 6 * 20
    assert len([f for f in kg.query_entity("Team") if f["current"]]) == 1
    assert kg.stats()["triples"] == 7


def test_units_lock_their_entities_or_the_whole_graph(palace):
    """A unit that names its entities locks only those: a unit on other entities commits meanwhile, one
    on the same entities (or one that names none, and so takes the palace's whole graph) waits for it.
    A fact naming an entity the unit did not name is refused, and nothing of the unit is kept."""
    started = threading.Event()
    release = threading.Event()

    def holder():
        with unit_of_work(palace_key=palace, entities=["Alice", "Lisbon"]) as uow:
            uow.add_triple("Alice", "lives_in", "Lisbon")
            started.set()
            release.wait(30)

    def timed_unit(**kwargs):
        """Run a unit adding one fact in a thread; return a function that says whether it committed."""
        done = threading.Event()

        def run():
            with unit_of_work(palace_key=palace, **kwargs) as uow:
                names = kwargs.get("entities") or ["Bob", "Porto"]
                uow.add_triple(names[0], "visits", names[1])
            done.set()

        threading.Thread(target=run, daemon=True).start()
        return done

    hold = threading.Thread(target=holder)
    hold.start()
    assert started.wait(30)
    try:
        assert timed_unit(entities=["Bob", "Porto"]).wait(10)  # other entities: side by side
        same = timed_unit(entities=["Lisbon", "Alice"])  # the same ones, in the other order: waits
        whole = timed_unit()  # the whole graph: waits
        assert not same.wait(1.0) and not whole.is_set()
    finally:
        release.set()
        hold.join()
    assert same.wait(10) and whole.wait(10)

    with pytest.raises(ValueError, match="'Carol' is not among the entities this unit of work locked"):
        with unit_of_work(palace_key=palace, entities=["Alice"]) as uow:
            uow.add_drawers(ids=["c1"], documents=["Carol"], embeddings=vectors(1))
            uow.add_triple("Alice", "knows", "Carol")
    drawers, kg = open_drawers(palace_key=palace)
    assert drawers.get(ids=["c1"]).ids == [] and kg.query_entity("Carol", direction="both") == []
    assert sorted((f["subject"], f["object"]) for f in kg.open_facts()) == [
        ("Alice", "Lisbon"),
        ("Bob", "Porto"),
        ("Lisbon", "Alice"),
    ]


def test_deleting_a_drawer_stamps_its_facts(palace):
    with unit_of_work(palace_key=palace) as uow:
        uow.add_drawers(
            ids=["d1", "d2", "d3"],
            documents=["one", "two", "three"],
            metadatas=[{"wing": "a"}, {"wing": "a"}, {"wing": "b"}],
            embeddings=vectors(3),
        )
        uow.add_triple("A", "from", "one", source_drawer_id="d1")
        uow.add_triple("A", "from", "two", source_drawer_id="d2")
        uow.add_triple("A", "from", "three", source_drawer_id="d3")
        uow.add_triple("A", "has", "no source")
    drawers, _ = open_drawers(palace_key=palace)
    drawers.delete(ids=["d1"])  # by id, through the backend (as MemPalace deletes)
    drawers.delete(where={"wing": "b"})  # by filter
    search = PalaceSearch(palace_key=palace)
    evidence = {f["object"]: f["evidence"] for f in search.facts_with_evidence("A")["facts"]}
    assert evidence == {"one": "deleted", "two": "present", "three": "deleted", "no source": None}
    # the facts themselves are kept
    assert len(facts_of(palace, "A")) == 4
    # a drawer filed again under the same id (a re-mined file) is found again, and says so
    drawers.add(ids=["d1"], documents=["one, re-mined"], embeddings=vectors(1))
    evidence = {f["object"]: (f["evidence"], f["document"]) for f in search.facts_with_evidence("A")["facts"]}
    assert evidence["one"] == ("refiled", "one, re-mined")


def test_deleting_closets_does_not_touch_facts(palace, backend):
    from mempalace.backends import PalaceRef

    with unit_of_work(palace_key=palace) as uow:
        uow.add_drawers(ids=["same-id"], documents=["drawer"], embeddings=vectors(1))
        uow.add_triple("A", "from", "drawer", source_drawer_id="same-id")
    closets = backend.get_collection(
        palace=PalaceRef(id=palace, local_path=None), collection_name="mempalace_closets", create=True
    )
    closets.add(ids=["same-id"], documents=["closet"], embeddings=vectors(1))
    closets.delete(ids=["same-id"])
    [fact] = PalaceSearch(palace_key=palace).facts_with_evidence("A")["facts"]
    assert fact["evidence"] == "present" and fact["source_drawer_deleted_at"] is None


def test_unit_of_work_uses_one_connection_and_one_transaction(palace, pg_dsn):
    with unit_of_work(palace_key=palace) as uow:
        uow.add_drawers(ids=["d"], documents=["x"], embeddings=vectors(1))
        uow.add_triple("A", "b", "C", source_drawer_id="d")
        xid = uow.connection.execute("SELECT txid_current_if_assigned()").fetchone()[0]
        assert xid is not None  # the drawer write and the graph write share this transaction
        assert uow.kg._bound is uow.connection
        with psycopg.connect(pg_dsn) as other:
            assert (
                other.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_xid = %s::text::xid", (str(xid),)
                ).fetchone()[0]
                == 1
            )


def test_a_held_transaction_takes_in_the_public_apis_writes(palace):
    """Database.held(): the collection's and the graph's own methods, called as MemPalace calls them,
    run in one transaction (seeing each other's writes) and commit or roll back together; another
    thread meanwhile sees none of it."""
    drawers, kg = open_drawers(palace_key=palace)
    db = drawers.database()
    assert kg.database().pool is db.pool

    def outside():
        seen = {}
        worker = threading.Thread(target=lambda: seen.update(n=drawers.count()))
        worker.start()
        worker.join()
        return seen["n"]

    with pytest.raises(RuntimeError, match="stop here"):
        with db.held():
            drawers.upsert(
                ids=["h1"], documents=["Held drawer"], metadatas=[{"wing": "w"}], embeddings=vectors(1)
            )
            kg.add_triple("Held", "is_in", "Transaction", source_drawer_id="h1")
            assert drawers.count() == 1 and kg.query_entity("Held")  # its own writes are seen inside
            assert outside() == 0  # and by nobody else
            with pytest.raises(ValueError):  # a statement error a caller handles leaves the rest usable
                drawers.add(ids=["h1"], documents=["again"], metadatas=[{}], embeddings=vectors(1))
            raise RuntimeError("stop here")
    assert drawers.count() == 0 and facts_of(palace, "Held") == []

    with db.held():
        drawers.upsert(
            ids=["h2"], documents=["Kept drawer"], metadatas=[{"wing": "w"}], embeddings=vectors(1)
        )
        kg.add_triple("Kept", "is_in", "Transaction", source_drawer_id="h2")
    assert drawers.count() == 1 and outside() == 1
    assert [f["object"] for f in facts_of(palace, "Kept")] == ["Transaction"]
