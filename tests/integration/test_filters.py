"""Every where / where_document operator, checked against MemPalace's own reference evaluator.

The differential test stores generated records once, then compares, for hundreds of generated
filters, the ids our SQL returns with the ids ``mempalace.backends.pgvector._matches_where``
(the evaluator shared by MemPalace's built-in backends) accepts.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mempalace.backends.base import UnsupportedFilterError
from mempalace.backends.pgvector import _matches_where, _matches_where_document  # noqa: PLC2701 - MemPalace's evaluator is the reference

FIELDS = ["wing", "room", "source_file", "filed_at", "n", "flag", "tag"]
STRINGS = [
    "",
    "a",
    "b",
    "ab",
    "project",
    "Project",
    "1",
    "0",
    "true",
    "é",
    "x y",
    "2026-01-01",
    "2026-02-01T10:00:00",
]
NUMBERS = [0, 1, 2, -1, 7, 10**12, 0.0, 1.0, 0.5, 1.5, -2.25, 100.0]
BOOLS = [True, False]
VALUES = STRINGS + NUMBERS + BOOLS
DOC_WORDS = ["alpha", "Beta", "gamma", "x", "ab", "é", "note"]


def _records(n=80, seed=7):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        meta = {}
        for field in FIELDS:
            if rng.random() < 0.7:
                meta[field] = rng.choice(VALUES)
        doc = " ".join(rng.choice(DOC_WORDS) for _ in range(rng.randint(0, 4)))
        out.append((f"r{i:03d}", doc, meta))
    return out


RECORDS = _records()


@pytest.fixture
def filled(make_collection):
    col = make_collection("filters")
    col.add(
        ids=[r[0] for r in RECORDS],
        documents=[r[1] for r in RECORDS],
        metadatas=[r[2] for r in RECORDS],
        embeddings=[[1.0, float(i)] for i in range(len(RECORDS))],
    )
    return col


def expected(where=None, where_document=None):
    return [
        rid
        for rid, doc, meta in RECORDS
        if _matches_where(meta, where) and _matches_where_document(doc, where_document)
    ]


def got(col, where=None, where_document=None):
    return col.get(where=where, where_document=where_document, include=[]).ids


values = st.sampled_from(VALUES)
fields = st.sampled_from(FIELDS)
leaf_op = st.one_of(
    st.tuples(st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$contains"]), values),
    st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(values, max_size=4)),
)
leaf = st.one_of(
    st.builds(lambda f, v: {f: v}, fields, values),
    st.builds(lambda f, ops: {f: dict(ops)}, fields, st.lists(leaf_op, min_size=1, max_size=2)),
)
where_strategy = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.builds(lambda cs: {"$and": cs}, st.lists(children, max_size=3)),
        st.builds(lambda cs: {"$or": cs}, st.lists(children, max_size=3)),
        st.builds(lambda a, b: {**a, **b}, children, children),
    ),
    max_leaves=6,
)
doc_leaf = st.builds(lambda w: {"$contains": w}, st.sampled_from(DOC_WORDS + ["alpha Beta", "", "ALPHA"]))
doc_strategy = st.recursive(
    doc_leaf,
    lambda children: st.one_of(
        st.builds(lambda cs: {"$and": cs}, st.lists(children, max_size=3)),
        st.builds(lambda cs: {"$or": cs}, st.lists(children, max_size=3)),
    ),
    max_leaves=4,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=where_strategy)
def test_where_matches_reference_evaluator(filled, where):
    assert got(filled, where) == expected(where)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.one_of(st.none(), where_strategy), where_document=doc_strategy)
def test_where_document_matches_reference_evaluator(filled, where, where_document):
    assert got(filled, where, where_document) == expected(where, where_document)


@pytest.mark.parametrize(
    "where",
    [
        {"wing": "project"},
        {"wing": {"$eq": "project"}},
        {"wing": {"$ne": "project"}},  # missing field matches $ne
        {"n": {"$in": [1, "a", None]}},
        {"n": {"$nin": [1, 2]}},  # missing field matches $nin
        {"n": 1},  # True == 1
        {"flag": {"$eq": 1}},
        {"flag": True},
        {"n": {"$gt": 0.5}},
        {"n": {"$gte": "a"}},  # str vs number: False, not an error
        {"tag": {"$lt": "b"}},
        {"filed_at": {"$lte": "2026-01-01"}},
        {"tag": {"$contains": "1"}},  # substring of str(actual)
        {"n": {"$contains": "0"}},  # 0 or "" -> "" contains nothing but ""
        {"flag": {"$contains": "1"}},  # True -> 1 -> "1"
        {"n": None},
        {"$and": []},
        {"$or": []},
        {"$or": [{"wing": "a"}, {"room": {"$in": ["b", "project"]}}]},
        {"wing": "a", "room": "b"},
        {"n": {"$gt": 0, "$lt": 10}},
    ],
)
def test_each_operator(filled, where):
    assert got(filled, where) == expected(where)


@pytest.mark.parametrize(
    "bad",
    [
        {"wing": {"$regex": "x"}},
        {"$nor": [{"wing": "a"}]},
        {"wing": {"$in": "not-a-list"}},
        {"$and": {"wing": "a"}},
    ],
)
def test_unknown_operator_raises(filled, bad):
    with pytest.raises(UnsupportedFilterError):
        filled.get(where=bad)
    with pytest.raises(UnsupportedFilterError):
        filled.query(query_embeddings=[[1, 0]], where=bad)
    with pytest.raises(UnsupportedFilterError):
        filled.delete(where=bad)
    assert filled.count() == len(RECORDS)  # nothing deleted


def test_unknown_document_operator_raises(filled):
    with pytest.raises(UnsupportedFilterError):
        filled.get(where_document={"$not_contains": "x"})


def test_filter_values_are_bound_not_spliced(filled):
    evil = "'; DROP TABLE records; --"
    assert got(filled, {"wing": evil}) == []
    assert got(filled, {evil: "x"}) == []
    assert got(filled, None, {"$contains": evil}) == []
    assert filled.count() == len(RECORDS)


def test_filtered_query_returns_n_results(filled):
    res = filled.query(query_embeddings=[[1, 0]], n_results=5, where={"wing": {"$ne": "zzz"}})
    assert len(res.ids[0]) == 5
    assert set(res.ids[0]) <= set(expected({"wing": {"$ne": "zzz"}}))
