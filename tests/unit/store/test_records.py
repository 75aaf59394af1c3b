"""Records before they are written (mempalace_pg.store.records): what clean_batch stores for a batch, and
the batches it refuses, naming the record, the field and what to do."""

from __future__ import annotations

import math

import numpy as np
import pytest
from mempalace.backends import DimensionMismatchError

from mempalace_pg.errors import InvalidRecordError
from mempalace_pg.store.records import clean_batch, clean_lookup_ids

NOTHING_WRITTEN = "(nothing in this batch was written)"


def batch(**overrides):
    kwargs = dict(
        ids=["ok", "bad"],
        documents=["fine", "fine too"],
        metadatas=[{}, {}],
        embeddings=[[1.0, 0.0], [0.0, 1.0]],
    )
    kwargs.update(overrides)
    return kwargs


def test_a_good_batch_as_it_is_stored():
    got = clean_batch(
        ids=["a\x00", "b\udc80"],
        documents=["doc\x00", ""],
        metadatas=[{"wing": "w\x00", 2: (1, "x"), True: None, None: 1.5, "nested": {"k\x00": [True]}}, None],
        embeddings=np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float64),
    )
    assert got.ids == ["a", "b\ufffd"]
    assert got.documents == ["doc", ""]
    # metadata as json.dumps writes it: keys as JSON spells them, tuples as lists, strings storable
    assert got.metadatas == [
        {"wing": "w", "2": [1, "x"], "true": None, "null": 1.5, "nested": {"k": [True]}},
        {},
    ]
    assert got.matrix.dtype == np.float32 and got.matrix.shape == (2, 3) and got.dimension == 3
    assert got.matrix.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_metadatas_may_be_left_out():
    assert clean_batch(["a"], ["d"], None, [[0.5]]).metadatas == [{}]


def test_an_empty_batch_is_refused_for_want_of_vectors():
    with pytest.raises(InvalidRecordError, match="non-empty"):
        clean_batch([], [], [], [])


@pytest.mark.parametrize(
    "overrides, error, match",
    [
        (
            {"embeddings": [[1.0, 0.0], [math.nan, 1.0]]},
            InvalidRecordError,
            r"record\(s\) \['bad'\] contain NaN",
        ),
        ({"embeddings": [[1.0, 0.0], [math.inf, 1.0]]}, InvalidRecordError, "NaN or infinity"),
        ({"embeddings": [[1.0, 0.0], [1e39, 1.0]]}, InvalidRecordError, "too large for a 32-bit float"),
        ({"embeddings": [[1.0, 0.0], [1.0, 0.0, 0.0]]}, DimensionMismatchError, r"different widths \[2, 3\]"),
        ({"embeddings": [[1.0, 0.0], ["x", 1.0]]}, InvalidRecordError, "must be a list of numbers"),
        ({"embeddings": [[], []]}, InvalidRecordError, "non-empty"),
        ({"embeddings": [1.0, 2.0]}, InvalidRecordError, "non-empty list of numbers"),
        ({"embeddings": [[1.0]]}, ValueError, "embeddings length 1 does not match ids length 2"),
        ({"embeddings": None}, ValueError, "explicit embeddings"),
        ({"documents": None}, ValueError, "documents are required"),
        ({"documents": ["only one"]}, ValueError, "documents length 1 does not match ids length 2"),
        ({"metadatas": [{}]}, ValueError, "metadatas length 1 does not match ids length 2"),
        ({"metadatas": [{}, {"score": math.nan}]}, InvalidRecordError, "record 'bad': metadata.score is nan"),
        (
            {"metadatas": [{}, {"a": {"b": [1, math.inf]}}]},
            InvalidRecordError,
            r"record 'bad': metadata\.a\.b\[1\] is inf",
        ),
        (
            {"metadatas": [{}, {"when": object()}]},
            InvalidRecordError,
            "record 'bad': metadata.when is of type object, which has no JSON form",
        ),
        ({"metadatas": [{}, {("tuple", "key"): 1}]}, InvalidRecordError, "record 'bad': metadata key"),
        ({"metadatas": [{}, {math.nan: 1}]}, InvalidRecordError, "is not a finite number; use a string key"),
        (
            {"metadatas": [{}, "not a dict"]},
            InvalidRecordError,
            "record 'bad': metadata is of type str; pass a dict",
        ),
        ({"documents": ["fine", None]}, InvalidRecordError, "record 'bad': document is None, not text"),
        (
            {"documents": ["fine", b"bytes"]},
            InvalidRecordError,
            "record 'bad': document is of type bytes, not text",
        ),
        ({"ids": ["ok", 7]}, InvalidRecordError, "record 7: id is of type int, not a string"),
        ({"ids": ["same", "same"]}, InvalidRecordError, r"unique within a batch; repeated: \['same'\]"),
        (
            {"ids": ["ok", "ok\x00"]},
            InvalidRecordError,
            "are the same id 'ok' once NUL characters are removed",
        ),
        ({"ids": ["\udc80", "\ufffd"]}, InvalidRecordError, "and lone surrogates replaced"),
    ],
)
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # numpy, on 1e39
def test_bad_batches_are_refused_before_anything_is_written(overrides, error, match):
    with pytest.raises(error, match=match) as info:
        clean_batch(**batch(**overrides))
    if isinstance(info.value, InvalidRecordError):
        assert str(info.value).endswith(NOTHING_WRITTEN)


def test_ids_to_look_up_are_made_storable_as_written_ids():
    assert clean_lookup_ids(None) is None
    assert clean_lookup_ids(("a\x00", "b\udc80", 3)) == ["a", "b\ufffd", 3]
