"""The MemPalace backend contract (RFC 001, mempalace.backends.base) against a real PostgreSQL."""

from __future__ import annotations

import math
import os

import pytest
from mempalace.backends import (
    BackendClosedError,
    BackendMismatchError,
    CollectionNotInitializedError,
    DimensionMismatchError,
    GetResult,
    PalaceNotFoundError,
    PalaceRef,
    QueryResult,
)
from mempalace.backends.base import EmbedderIdentity, UnsupportedMaintenanceKindError

from mempalace_pg.engine import indexing
from mempalace_pg.marker import MARKER_FILENAME
from mempalace_pg.store import bulk
from mempalace_pg.store.backend import PostgresBackend

from _backend_conformance import assert_partition_isolation  # noqa: PLC2701 - MemPalace's file, kept under its name


def seed(col):
    col.add(
        ids=["a", "b", "c"],
        documents=["alpha backend note", "rareterm pgvector backend note", "frontend design note"],
        metadatas=[
            {"wing": "project", "room": "backend", "rank": 1, "filed_at": "2026-01-01T10:00:00"},
            {"wing": "project", "room": "backend", "rank": 3, "filed_at": "2026-03-01T10:00:00"},
            {"wing": "project", "room": "frontend", "rank": 2, "filed_at": "2026-02-01T10:00:00"},
        ],
        embeddings=[[1, 0], [0.9, 0.1], [0, 1]],
    )


def test_add_query_get_count(make_collection):
    col = make_collection()
    seed(col)
    assert col.count() == 3
    res = col.query(
        query_embeddings=[[1, 0]],
        n_results=3,
        where={"wing": "project"},
        include=["documents", "metadatas", "distances", "embeddings"],
    )
    assert isinstance(res, QueryResult)
    assert res.ids == [["a", "b", "c"]]
    assert res.embeddings[0][0] == pytest.approx([1.0, 0.0])
    assert res.distances[0][0] == pytest.approx(0.0, abs=1e-6)
    assert res.metadatas[0][2]["room"] == "frontend"
    got = col.get(ids=["c", "a", "zz"])
    assert isinstance(got, GetResult)
    assert got.ids == ["a", "c"]  # in filing order, as Chroma returns them
    assert got.documents == ["alpha backend note", "frontend design note"]
    assert got.embeddings is None
    assert col.get(ids=["a"], include=[]).documents == []
    assert col.get(ids=["a"], include=["embeddings"]).embeddings[0] == pytest.approx([1.0, 0.0])


def test_cosine_distances_ground_truth(make_collection):
    col = make_collection()
    col.add(
        ids=["same", "close", "orthogonal", "opposite"],
        documents=["d1", "d2", "d3", "d4"],
        metadatas=[{}, {}, {}, {}],
        embeddings=[[1, 0], [0.9, 0.1], [0, 1], [-1, 0]],
    )
    res = col.query(query_embeddings=[[1, 0]], n_results=4, include=["distances"])
    assert res.ids[0] == ["same", "close", "orthogonal", "opposite"]
    assert res.distances[0][0] == pytest.approx(0.0, abs=1e-6)
    assert res.distances[0][2] == pytest.approx(1.0, abs=1e-6)
    assert res.distances[0][3] == pytest.approx(2.0, abs=1e-6)
    assert res.documents == [[]] and res.metadatas == [[]]


def test_multiple_queries_keep_outer_shape(make_collection):
    col = make_collection()
    seed(col)
    res = col.query(query_embeddings=[[1, 0], [0, 1]], n_results=1)
    assert res.ids == [["a"], ["c"]]
    empty = make_collection("other").query(query_embeddings=[[1, 0], [0, 1]], n_results=3)
    assert empty.ids == [[], []]


def test_add_rejects_existing_ids_and_writes_nothing(make_collection):
    col = make_collection()
    seed(col)
    with pytest.raises(ValueError, match="already exist"):
        col.add(ids=["new1", "a"], documents=["x", "y"], metadatas=[{}, {}], embeddings=[[1, 0], [0, 1]])
    assert col.get(ids=["new1"]).ids == []
    assert col.count() == 3


def test_upsert_replaces_metadata(make_collection):
    col = make_collection()
    seed(col)
    col.upsert(ids=["a"], documents=["alpha v2"], metadatas=[{"wing": "other"}], embeddings=[[0, 1]])
    got = col.get(ids=["a"], include=["documents", "metadatas", "embeddings"])
    assert got.documents == ["alpha v2"]
    assert got.metadatas == [{"wing": "other"}]
    assert got.embeddings[0] == pytest.approx([0.0, 1.0])


def test_update_merges_metadata_atomically(make_collection):
    col = make_collection()
    seed(col)
    col.update(ids=["a", "missing"], metadatas=[{"room": "moved", "extra": True}, {"x": 1}])
    got = col.get(ids=["a", "missing"])
    assert got.ids == ["a"]
    assert got.metadatas[0] == {
        "wing": "project",
        "room": "moved",
        "rank": 1,
        "filed_at": "2026-01-01T10:00:00",
        "extra": True,
    }
    assert got.documents == ["alpha backend note"]
    col.update(ids=["b"], documents=["changed"])
    assert col.get(ids=["b"]).documents == ["changed"]
    assert col.get(ids=["b"]).metadatas[0]["rank"] == 3
    col.update(ids=["c"], embeddings=[[1, 0]])
    assert col.query(query_embeddings=[[1, 0]], n_results=1, where={"room": "frontend"}).distances[0][
        0
    ] == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError):
        col.update(ids=["a"])
    # the new room is what filters see
    assert col.get(where={"room": "moved"}).ids == ["a"]


def test_delete_by_ids_and_where(make_collection):
    col = make_collection()
    seed(col)
    col.delete(ids=["a"])
    assert col.count() == 2
    col.delete(where={"room": "frontend"})
    assert col.get().ids == ["b"]
    col.delete(ids=["b"], where={"room": "nope"})  # intersection: nothing
    assert col.count() == 1
    col.delete()  # neither ids nor where: deletes nothing
    assert col.count() == 1


def test_get_paging_and_filters(make_collection):
    col = make_collection()
    n = 25
    col.add(
        ids=[f"id{i:02d}" for i in range(n)],
        documents=[f"doc {i}" for i in range(n)],
        metadatas=[{"wing": "w", "i": i} for i in range(n)],
        embeddings=[[1, i] for i in range(n)],
    )
    pages = []
    for offset in range(0, n, 10):
        pages.extend(col.get(where={"wing": "w"}, limit=10, offset=offset, include=["metadatas"]).ids)
    assert pages == [f"id{i:02d}" for i in range(n)]
    assert col.get(where={"i": {"$gte": 20}}, include=[]).ids == [f"id{i}" for i in range(20, 25)]
    assert col.get(where_document={"$contains": "doc 1"}, include=[]).ids == ["id01"] + [
        f"id{i}" for i in range(10, 20)
    ]
    rows = col.get_all_rows(where={"i": {"$lt": 3}}, include=["documents", "metadatas"])
    assert rows.ids == ["id00", "id01", "id02"] and rows.documents[2] == "doc 2"
    assert len(col.get_all_metadata()) == n
    assert col.get_all_metadata(where={"i": 7}) == [{"wing": "w", "i": 7}]


def test_get_recent_orders_like_recency_sort_key(make_collection):
    from mempalace.backends.base import recency_sort_key

    col = make_collection()
    metas = [
        {"filed_at": "2026-05-01T00:00:00"},
        {"filed_at": "2026-01-01T00:00:00+00:00"},
        {},
        {"filed_at": ""},
        {"filed_at": "2026-12-31T23:59:59"},
        {"filed_at": 5},
        {"filed_at": "2025-07-01"},
    ]
    ids = [f"r{i}" for i in range(len(metas))]
    col.add(ids=ids, documents=["d"] * len(ids), metadatas=metas, embeddings=[[1, 0]] * len(ids))
    got = col.get_recent(limit=4)
    expected = sorted(range(len(metas)), key=lambda i: recency_sort_key(metas[i]), reverse=True)[:4]
    assert got.ids == [ids[i] for i in expected]
    assert got.documents == ["d"] * 4
    # "" < "2026" in Python too, and an empty timestamp sorts after real ones
    assert col.get_recent(limit=5, where={"filed_at": {"$lt": "2026"}}, include=["metadatas"]).ids == [
        "r6",
        "r3",
    ]
    assert col.get_recent(limit=0).ids == []


def test_facet_counts(make_collection):
    col = make_collection()
    seed(col)
    col.add(ids=["d"], documents=["x"], metadatas=[{"room": 7}], embeddings=[[1, 1]])
    assert col.facet_counts("room") == {"backend": 2, "frontend": 1, "7": 1}
    assert col.facet_counts("wing") == {"project": 3}
    assert col.facet_counts("room", where={"wing": "project"}, limit=1) == {"backend": 2}
    assert col.facet_counts("rank") == {"1": 1, "2": 1, "3": 1}


def test_lexical_search_in_sql(make_collection):
    col = make_collection()
    seed(col)
    hits = col.lexical_search(query="rareterm backend", n_results=2, where={"wing": "project"}).hits
    assert [h.id for h in hits] == ["b", "a"]
    assert hits[0].score > hits[1].score > 0
    assert hits[0].metadata["rank"] == 3
    assert col.lexical_search(query="nothing-matches-this", n_results=5).hits == []
    assert col.lexical_search(query="x", n_results=5).hits == []  # no 2+ character word
    assert [h.id for h in col.lexical_search(query="NOTE", n_results=5, where={"room": "frontend"}).hits] == [
        "c"
    ]


def test_embedder_identity_in_database(make_collection, backend, tmp_path):
    col = make_collection()
    assert col.get_stored_embedder_identity() is None
    col.set_embedder_identity(EmbedderIdentity(model_name="minilm", dimension=384))
    other_backend = PostgresBackend()
    try:
        ref = PalaceRef(id=str(tmp_path / "palace"), local_path=str(tmp_path / "palace"))
        again = other_backend.get_collection(palace=ref, collection_name="mempalace_drawers")
        assert again.get_stored_embedder_identity() == EmbedderIdentity("minilm", 384)
    finally:
        other_backend.close()


def test_dimension_fixed_by_first_write(make_collection):
    col = make_collection()
    col.upsert(ids=["a"], documents=["one"], metadatas=[{}], embeddings=[[1, 0]])
    with pytest.raises(DimensionMismatchError):
        col.upsert(ids=["b"], documents=["two"], metadatas=[{}], embeddings=[[1, 0, 0]])
    with pytest.raises(DimensionMismatchError):
        col.query(query_embeddings=[[1, 0, 0]])
    assert col.count() == 1


def test_marker_and_detect(make_collection, tmp_path, backend):
    path = tmp_path / "palace"
    assert not PostgresBackend.detect(str(path))
    col = make_collection()
    assert PostgresBackend.detect(str(path))
    marker = (path / MARKER_FILENAME).read_text()
    assert "password" not in marker and os.environ["MEMPALACE_PG_DSN"].split("@")[0] not in marker
    seed(col)
    # a different schema is a different target: refused
    with pytest.raises(BackendMismatchError, match="schema"):
        make_collection(options={"schema": "some_other_schema"})
    # a collection never created in an existing palace
    with pytest.raises(CollectionNotInitializedError):
        make_collection(collection="mempalace_closets", create=False)
    # a directory that is no palace
    with pytest.raises(PalaceNotFoundError):
        make_collection(name="nowhere", create=False)


def test_palace_without_local_path(backend):
    ref = PalaceRef(id="remote-palace-key", local_path=None)
    col = backend.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
    col.add(ids=["x"], documents=["remote"], metadatas=[{}], embeddings=[[1, 0]])
    again = backend.get_collection(palace=ref, collection_name="mempalace_drawers")
    assert again.get(ids=["x"]).documents == ["remote"]


def test_cross_palace_isolation(make_collection, backend):
    assert_partition_isolation(
        backend, make_collection("alpha"), make_collection("beta"), embedding=[1.0, 0.0]
    )


def test_cross_namespace_isolation(backend, tmp_path):
    path = tmp_path / "shared"
    cols = [
        backend.get_collection(
            palace=PalaceRef(id=str(path), local_path=None, namespace=ns),
            collection_name="mempalace_drawers",
            create=True,
        )
        for ns in ("tenant-a", "tenant-b")
    ]
    assert_partition_isolation(backend, cols[0], cols[1], embedding=[1.0, 0.0])


def test_closed_backend_and_collection(make_collection, backend):
    col = make_collection()
    seed(col)
    backend.close()
    with pytest.raises(BackendClosedError):
        col.count()
    with pytest.raises(BackendClosedError):
        make_collection()


def test_close_palace_evicts_handles(make_collection, backend, tmp_path):
    col = make_collection()
    seed(col)
    backend.close_palace(PalaceRef(id=str(tmp_path / "palace"), local_path=str(tmp_path / "palace")))
    with pytest.raises(BackendClosedError):
        col.count()
    assert make_collection(create=False).count() == 3


def test_maintenance(make_collection):
    col = make_collection()
    seed(col)
    col.partition.index.settle()  # the folder the writes started builds the first segment
    state = col.maintenance_state()
    assert state["rows"] == 3 and state["dimension"] == 2 and state["vector_index"]
    assert state["vector_index_valid"] is True and state["fresh_rows"] == 0
    assert col.run_maintenance("analyze").status == "ran"
    assert col.run_maintenance("reindex").status == "ran"
    with pytest.raises(UnsupportedMaintenanceKindError):
        col.run_maintenance("compact")


def test_read_only_collection_refuses_writes(make_collection):
    seed(make_collection())
    ro = make_collection(create=False, options={"read_only": True})
    assert ro.count() == 3
    with pytest.raises(PermissionError):
        ro.upsert(ids=["z"], documents=["z"], metadatas=[{}], embeddings=[[1, 0]])


def test_capabilities_reach_mempalace_through_backend_attribute(make_collection):
    col = make_collection()
    assert col._backend.capabilities is PostgresBackend.capabilities
    assert col.distance_metric == "cosine"
    assert not math.isnan(col.estimated_count())


def gin_pending_limits(col) -> list:
    """The pending-list limits of a collection's GIN indexes, as stored in their reloptions."""
    return col.partition.db.run(
        lambda conn: [
            r[0]
            for r in conn.execute(
                "SELECT o FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_am a ON a.oid = c.relam, unnest(c.reloptions) o "
                "WHERE i.indrelid = %s::regclass AND a.amname = 'gin' "
                "AND o LIKE 'gin_pending_list_limit=%%' ORDER BY c.relname",
                (col.partition.relname,),
            ).fetchall()
        ]
    )


def test_bulk_load_then_index_and_query(make_collection):
    import numpy as np

    col = make_collection()
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(3000, 8)).astype("float32")
    with col.bulk_load() as load:
        for start in range(0, 3000, 1000):
            sl = slice(start, start + 1000)
            load(
                ids=[f"b{i}" for i in range(start, start + 1000)],
                documents=[f"doc {i}" for i in range(start, start + 1000)],
                metadatas=[{"wing": f"w{i % 3}"} for i in range(start, start + 1000)],
                embeddings=vectors[sl].tolist(),
            )
        load.flush()
        # mid-load: no vector index, yet queries answer exactly
        assert col.maintenance_state()["vector_index"] is None
        assert col.query(query_embeddings=[vectors[5].tolist()], n_results=1).ids == [["b5"]]
        # the GIN indexes buffer the load in their pending lists, and still answer from them
        assert gin_pending_limits(col) == [f"gin_pending_list_limit={bulk.BULK_GIN_PENDING_KB}"] * 2
        assert [h.id for h in col.lexical_search(query="doc 2345", n_results=3).hits][:1] == ["b2345"]
    state = col.maintenance_state()
    assert gin_pending_limits(col) == ["gin_pending_list_limit=512"] * 2  # the schema's limit, put back
    assert [h.id for h in col.lexical_search(query="doc 2345", n_results=3).hits][:1] == ["b2345"]
    assert state["rows"] == 3000 and state["vector_index"] and state["vector_index_valid"]
    assert col.query(query_embeddings=[vectors[2999].tolist()], n_results=1, where={"wing": "w2"}).ids == [
        ["b2999"]
    ]
    with pytest.raises(ValueError):
        with col.bulk_load() as load:
            load(ids=["b1"], documents=["dupe"], metadatas=[{}], embeddings=[vectors[0].tolist()])
    assert col.count() == 3000 and col.maintenance_state()["vector_index_valid"]


@pytest.mark.parametrize("own_rows", [0, 10_000])
def test_wing_room_query_arms_agree_with_exact_answer(make_collection, monkeypatch, own_rows):
    """A wing/room filter is answered by the HNSW arm (many matching records) or from its own rows
    (few: their sign bits first, then the exact distance), chosen inside the statement from
    facet_counts; both give the exact top k here."""
    import numpy as np

    from mempalace_pg.engine import nearest

    monkeypatch.setattr(nearest, "OWN_ROWS_PER_SEGMENT", own_rows)
    col = make_collection()
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(600, 16)).astype("float32")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    metas = [{"wing": f"w{i % 3}", "room": f"r{i % 2}"} for i in range(600)]
    with col.bulk_load() as load:
        load(
            ids=[f"d{i}" for i in range(600)],
            documents=[f"doc {i}" for i in range(600)],
            metadatas=metas,
            embeddings=vectors.tolist(),
        )
    assert col.maintenance_state()["vector_index_valid"]
    for where, keep in (
        ({"wing": "w1"}, lambda m: m["wing"] == "w1"),
        ({"$and": [{"wing": "w2"}, {"room": "r0"}]}, lambda m: m["wing"] == "w2" and m["room"] == "r0"),
        ({"wing": "absent"}, lambda m: False),
    ):
        mask = np.array([keep(m) for m in metas])
        for q in vectors[:5]:
            got = col.query(query_embeddings=[q.tolist()], n_results=10, where=where, include=["distances"])
            order = np.argsort(1 - vectors[mask] @ q, kind="stable")[:10]
            expected = [f"d{i}" for i in np.flatnonzero(mask)[order]]
            assert got.ids[0] == expected
            assert got.distances[0] == pytest.approx(
                [float(1 - vectors[int(e[1:])] @ q) for e in expected], abs=1e-5
            )


def test_reindex_recreates_a_missing_index(make_collection, pg_dsn):
    import psycopg

    col = make_collection()
    seed(col)
    name = col.partition.index.settle() and col.maintenance_state()["vector_index"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP INDEX "{col.partition.db.schema}"."{name}"')
    assert col.maintenance_state()["vector_index_valid"] is None  # listed, but its index is gone
    assert col.run_maintenance("reindex").status == "ran"
    state = col.maintenance_state()
    assert state["vector_index"] not in (None, name) and state["vector_index_valid"]
    assert len(state["vector_index_segments"]) == 1


def test_counts_follow_every_write(make_collection):
    """count() and facet_counts() come from trigger-maintained counters: check them against a scan."""
    col = make_collection()
    seed(col)
    col.upsert(
        ids=["a", "x"],
        documents=["a2", "x"],
        metadatas=[{"wing": "other", "room": "r"}, {"room": 5}],
        embeddings=[[1, 0], [0, 1]],
    )
    col.update(ids=["b"], metadatas=[{"room": "frontend"}])
    col.delete(ids=["c"])
    col.delete(where={"wing": "nope"})

    def scan(field, where=None):
        counts = {}
        for meta in col.get(where=where, include=["metadatas"]).metadatas:
            if meta.get(field) is not None:
                key = str(meta[field]) if not isinstance(meta[field], bool) else str(meta[field]).lower()
                counts[key] = counts.get(key, 0) + 1
        return counts

    assert col.count() == len(col.get(include=[]).ids) == 3
    assert col.facet_counts("wing") == scan("wing") == {"other": 1, "project": 1}
    assert col.facet_counts("room") == scan("room") == {"r": 1, "5": 1, "frontend": 1}
    assert (
        col.facet_counts("room", where={"wing": "project"})
        == scan("room", {"wing": "project"})
        == {"frontend": 1}
    )
    assert col.facet_counts("room", where={"wing": {"$eq": "other"}}) == {"r": 1}


def test_written_rows_are_found_at_once_then_folded_into_segments(make_collection, monkeypatch):
    """Writes touch no HNSW index; queries see the tail at once; the folder process the writes start
    makes segments of it (a separate process: it outlives this one's writes); rows written again leave
    their segment; one query over segments and tail gives the exact answer."""
    import numpy as np

    monkeypatch.setattr(indexing, "SPAWN_CHECK_S", 0.0)
    col = make_collection()
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(120, 16)).astype("float32")
    ids = [f"v{i:03d}" for i in range(120)]

    def exact(q, k, allowed):
        sims = (vectors[allowed] @ q) / (np.linalg.norm(vectors[allowed], axis=1) * np.linalg.norm(q))
        return [ids[allowed[i]] for i in np.argsort(-sims)[:k]]

    q = rng.normal(size=16).astype("float32")
    for start in range(0, 30, 10):
        col.add(
            ids=ids[start : start + 10],
            documents=["d"] * 10,
            metadatas=[{"wing": "w"}] * 10,
            embeddings=vectors[start : start + 10].tolist(),
        )
    # straight after the writes, the rows are searched exactly (the folder waits for writes to pause)
    assert col.query(query_embeddings=[q.tolist()], n_results=5).ids[0] == exact(q, 5, list(range(30)))
    first = col.partition.index.settle(timeout=60)
    assert len(first.segments) == 1 and col.partition.index.fresh_count() == 0
    for start in range(30, 120, 10):
        col.add(
            ids=ids[start : start + 10],
            documents=["d"] * 10,
            metadatas=[{"wing": "w"}] * 10,
            embeddings=vectors[start : start + 10].tolist(),
        )
    assert col.partition.index.settle(timeout=60).top >= first.top
    state = col.maintenance_state()
    assert state["fresh_rows"] == 0 and state["rows"] == 120 and state["vector_index_valid"]
    folder = col.partition.db.run(
        lambda conn: conn.execute(
            f'SELECT pid, activity, last_error FROM "{col.partition.db.schema}".vector_folders '
            "WHERE collection_pk = %s",
            (col.partition.pk,),
        ).fetchone()
    )
    assert folder[0] != os.getpid() and folder[2] is None
    # rows written again leave their segment for the tail; the query spans both
    col.update(ids=ids[:60], metadatas=[{"touched": True}] * 60)
    assert col.partition.index.layout(fresh=True, start_folder=True).has_tail
    res = col.query(query_embeddings=[q.tolist()], n_results=8, include=["distances"])
    assert res.ids[0] == exact(q, 8, list(range(120)))
    assert res.distances[0] == sorted(res.distances[0])
    col.partition.index.settle(timeout=60)
    res = col.query(query_embeddings=[q.tolist()], n_results=8, where={"touched": True})
    assert res.ids[0] == exact(q, 8, list(range(60)))


def test_lexical_search_weights_rare_words(make_collection):
    """Like BM25: a rare word outranks a common word that occurs many times."""
    col = make_collection()
    docs = [("common%d" % i, "palace palace palace memory palace notes") for i in range(30)]
    docs.append(("rare", "a note that mentions zyzzyvaquartz once, and the palace"))
    col.add(
        ids=[d[0] for d in docs],
        documents=[d[1] for d in docs],
        metadatas=[{"wing": "w"}] * len(docs),
        embeddings=[[1.0, float(i)] for i in range(len(docs))],
    )
    hits = col.lexical_search(query="zyzzyvaquartz palace", n_results=5).hits
    assert hits[0].id == "rare"
    assert len(hits) == 5 and all(h.score > 0 for h in hits)
    assert [h.id for h in col.lexical_search(query="palace", n_results=3, where={"wing": "nope"}).hits] == []


def test_lexical_search_agrees_with_bm25_on_words_hundreds_of_documents_hold(make_collection):
    """Ranked like MemPalace's own BM25 (its built-in pgvector backend's scorer, over every document) when the
    query's words each occur in a few hundred documents: their documents are all scored, not sampled.
    (With a cap of 100 documents per word, the top 10 shared about a quarter of BM25's on such queries.)"""
    import numpy as np
    from mempalace.backends.pgvector import _bm25_scores  # noqa: PLC2701 - MemPalace's BM25 is the reference

    rng = np.random.default_rng(3)
    vocab = [f"t{i}" for i in range(3000)]
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.07
    weights /= weights.sum()
    docs = [
        " ".join(vocab[k] for k in rng.choice(len(vocab), size=int(n), p=weights))
        for n in rng.integers(20, 80, 3000)
    ]
    col = make_collection()
    col.add(
        ids=[f"d{i}" for i in range(len(docs))],
        documents=docs,
        metadatas=[{"wing": "w"}] * len(docs),
        embeddings=[[1.0, float(i)] for i in range(len(docs))],
    )
    df = {}
    for doc in docs:
        for word in set(doc.split()):
            df[word] = df.get(word, 0) + 1
    middling = sorted(w for w, n in df.items() if 120 <= n <= 450)
    assert len(middling) >= 20
    overlaps = []
    for _ in range(15):
        query = " ".join(rng.choice(middling, size=2, replace=False))
        scores = np.asarray(_bm25_scores(query, docs))
        tenth = np.sort(scores)[-10]
        got = [h.id for h in col.lexical_search(query=query, n_results=10).hits]
        assert len(got) == 10
        # a hit counts when BM25 puts it in its top 10 (ties at the tenth score included)
        overlaps.append(sum(scores[int(g[1:])] >= tenth - 1e-9 for g in got) / 10)
    assert np.mean(overlaps) >= 0.8, overlaps


def test_selective_wing_room_filter_is_answered_exactly(make_collection):
    import numpy as np

    col = make_collection()
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(400, 12)).astype("float32")
    metas = [{"wing": f"w{i % 4}", "room": f"r{i % 10}"} for i in range(400)]
    col.add(
        ids=[f"x{i:03d}" for i in range(400)],
        documents=["d"] * 400,
        metadatas=metas,
        embeddings=vectors.tolist(),
    )
    q = rng.normal(size=12).astype("float32")
    for where in (
        {"wing": "w1"},
        {"$and": [{"wing": "w2"}, {"room": "r2"}]},
        {"room": {"$eq": "r7"}},
        {"$and": [{"wing": "w1"}, {"room": "r2"}]},
    ):
        from mempalace.backends.pgvector import _matches_where  # noqa: PLC2701 - MemPalace's evaluator is the reference

        allowed = [i for i in range(400) if _matches_where(metas[i], where)]
        sims = vectors[allowed] @ q / np.linalg.norm(vectors[allowed], axis=1)
        expected = [f"x{allowed[i]:03d}" for i in np.argsort(-sims)[:7]]
        assert col.query(query_embeddings=[q.tolist()], n_results=7, where=where).ids[0] == expected


def test_vectors_wider_than_hnsw_limit_are_searched_exactly(make_collection):
    col = make_collection()
    wide = [[0.0] * 4100 for _ in range(3)]
    for i, v in enumerate(wide):
        v[i] = 1.0
    col.add(ids=["a", "b", "c"], documents=["a", "b", "c"], metadatas=[{}] * 3, embeddings=wide)
    assert col.maintenance_state()["vector_index"] is None
    assert col.query(query_embeddings=[wide[1]], n_results=1).ids == [["b"]]


def test_health(make_collection, backend, tmp_path):
    col = make_collection()
    assert col.health().ok
    assert backend.health().ok
    ref = PalaceRef(id=str(tmp_path / "palace"), local_path=str(tmp_path / "palace"))
    assert backend.health(ref).ok
    assert not backend.health(PalaceRef(id="x", local_path=str(tmp_path / "nothing"))).ok
    col.close()
    assert not col.health().ok
