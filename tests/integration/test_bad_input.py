"""Bad input gets a clear error and loses nothing, on the real server.

The checks that need no database (settings, row counts, an unreachable server) are in tests/unit/."""

from __future__ import annotations

import math

import psycopg
import pytest
from mempalace.backends import DimensionMismatchError

from mempalace_pg.errors import ExtensionMissingError


def _one(col, **overrides):
    kwargs = dict(
        ids=["ok", "bad"],
        documents=["fine", "fine too"],
        metadatas=[{}, {}],
        embeddings=[[1.0, 0.0], [0.0, 1.0]],
    )
    kwargs.update(overrides)
    return kwargs


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"embeddings": [[1.0, 0.0], [math.nan, 1.0]]}, "NaN or infinity"),
        ({"embeddings": [[1.0, 0.0], [math.inf, 1.0]]}, "NaN or infinity"),
        ({"metadatas": [{}, {"score": math.nan}]}, "record 'bad': metadata.score is nan"),
        (
            {"metadatas": [{}, {"when": object()}]},
            "record 'bad': metadata.when is of type object, which has no JSON form",
        ),
        ({"metadatas": [{}, {("tuple", "key"): 1}]}, "record 'bad': metadata key"),
        ({"metadatas": [{}, "not a dict"]}, "record 'bad': metadata is of type str; pass a dict"),
        ({"documents": ["fine", None]}, "record 'bad': document is None, not text"),
        ({"ids": ["ok", 7]}, "record 7: id is of type int, not a string"),
        ({"ids": ["same", "same"]}, "unique"),
        ({"ids": ["ok", "ok\x00"]}, "are the same id 'ok' once NUL characters are removed"),
        ({"documents": ["only one"]}, "does not match"),
        ({"embeddings": None}, "explicit embeddings"),
        ({"embeddings": [[], []]}, "non-empty"),
    ],
)
def test_bad_batches_write_nothing(make_collection, overrides, match):
    col = make_collection()
    col.add(ids=["existing"], documents=["kept"], metadatas=[{"wing": "w"}], embeddings=[[1.0, 1.0]])
    for method in (col.add, col.upsert):
        with pytest.raises(ValueError, match=match):
            method(**_one(col, **overrides))
    assert col.get().ids == ["existing"]
    assert col.get(ids=["existing"]).documents == ["kept"]


def test_wrong_dimension_in_one_batch_and_across_batches(make_collection):
    col = make_collection()
    with pytest.raises(DimensionMismatchError, match="different widths"):
        col.add(
            ids=["a", "b"], documents=["a", "b"], metadatas=[{}, {}], embeddings=[[1.0, 0.0], [1.0, 0.0, 0.0]]
        )
    col.add(ids=["a"], documents=["a"], metadatas=[{}], embeddings=[[1.0, 0.0]])
    with pytest.raises(DimensionMismatchError, match="2-dimension"):
        col.upsert(ids=["a", "c"], documents=["a", "c"], metadatas=[{}, {}], embeddings=[[1.0, 0.0, 0.0]] * 2)
    with pytest.raises(DimensionMismatchError):
        col.update(ids=["a"], embeddings=[[1.0, 0.0, 0.0]])
    assert col.get(ids=["a"], include=["embeddings"]).embeddings == [[1.0, 0.0]]


def test_nan_query_vector(make_collection):
    col = make_collection()
    col.add(ids=["a"], documents=["a"], metadatas=[{}], embeddings=[[1.0, 0.0]])
    with pytest.raises(ValueError, match="NaN"):
        col.query(query_embeddings=[[math.nan, 0.0]])


def test_query_row_counts_any_size(make_collection):
    col = make_collection()
    col.add(
        ids=["a", "b"],
        documents=["a", "b"],
        metadatas=[{"wing": "w"}] * 2,
        embeddings=[[1.0, 0.0], [0.0, 1.0]],
    )
    for n in (1, 2, 10**12):  # larger than the statement may spell: capped, every record returned
        got = col.query(query_embeddings=[[1.0, 0.1]], n_results=n, where={"wing": "w"})
        assert got.ids == [["a", "b"][:n]]


def test_quotes_and_sql_metacharacters_are_stored_verbatim(make_collection):
    col = make_collection()
    nasty = "Robert'); DROP TABLE records;-- $1 %s %(x)s \\ \" ' $$ {}"
    col.add(
        ids=[nasty], documents=[nasty], metadatas=[{nasty: nasty, "wing": nasty}], embeddings=[[1.0, 0.0]]
    )
    got = col.get(ids=[nasty], include=["documents", "metadatas"])
    assert (
        got.ids == [nasty] and got.documents == [nasty] and got.metadatas == [{nasty: nasty, "wing": nasty}]
    )
    assert col.get(where={nasty: nasty}, include=[]).ids == [nasty]
    assert [h.id for h in col.lexical_search(query=nasty, n_results=3).hits] == [nasty]


def test_missing_extension_names_the_package(pg_dsn):
    from mempalace_pg.db.schema import require_extension

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        major = conn.info.server_version // 10000
        with pytest.raises(ExtensionMissingError) as info:
            require_extension(
                conn, "no_such_ext_xyz", "postgresql-{major}-no-such-ext", "https://example.invalid"
            )
    assert f"postgresql-{major}-no-such-ext" in str(info.value)


def test_current_server_accepted(pg_dsn):
    # the version parsing it relies on: tests/unit/db/test_schema.py
    from mempalace_pg.db.schema import MIN_PGVECTOR, MIN_POSTGRES, check_server, server_major, version_tuple

    with psycopg.connect(pg_dsn) as conn:
        assert check_server(conn) is None  # the test servers (PG 17/18, pgvector 0.8.x) are new enough
        assert server_major(conn) >= MIN_POSTGRES
        pgvector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert pgvector is not None and version_tuple(pgvector[0]) >= MIN_PGVECTOR
