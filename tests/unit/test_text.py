"""Text as PostgreSQL can hold it (mempalace_pg.text): the rule MemPalace's own pgvector backend applies,
NUL removed and lone surrogates replaced, and nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mempalace.backends.pgvector import _strip_nul  # noqa: PLC2701 - MemPalace's rule is the reference
from mempalace.config import strip_lone_surrogates

from mempalace_pg.text import storable, storable_any


@pytest.mark.parametrize(
    "raw, stored",
    [
        ("plain", "plain"),
        ("", ""),
        ("a\x00b\x00", "ab"),
        ("\x00", ""),
        ("bad \udc80 name", "bad \ufffd name"),
        ("\ud800\udc00", "\ufffd\ufffd"),  # a surrogate pair in a Python str is two lone surrogates
        ("\x00\udfff", "\ufffd"),
        ("emoji \U0001f600 and é", "emoji \U0001f600 and é"),  # real astral characters are kept
    ],
)
def test_storable(raw, stored):
    assert storable(raw) == stored
    assert storable(stored) == stored  # once is enough
    stored.encode("utf-8")  # and UTF-8 can encode it


def test_a_clean_string_comes_back_as_the_same_object():
    text = "nothing to change " * 10
    assert storable(text) is text


#: Any text, NUL and lone surrogates included (st.text leaves surrogates out, whatever its alphabet).
ANY_TEXT = st.lists(
    st.one_of(st.characters(exclude_categories=()), st.sampled_from(["\x00", "\ud800", "\udfff"]))
).map("".join)


@given(ANY_TEXT)
def test_storable_is_what_mempalaces_pgvector_backend_stores(text):
    assert storable(text) == strip_lone_surrogates(_strip_nul(text))


def test_storable_any_reaches_every_string_inside():
    value = {"k\x00": ["a\x00", ("t\udc80", 1)], 2: {"inner": "x\x00"}, "n": None, "f": 1.5, True: False}
    assert storable_any(value) == {
        "k": ["a", ["t\ufffd", 1]],
        2: {"inner": "x"},
        "n": None,
        "f": 1.5,
        True: False,
    }


@pytest.mark.parametrize("value", [None, 0, 1.5, True, b"bytes\x00"])
def test_storable_any_leaves_other_values_alone(value):
    assert storable_any(value) is value


def test_storable_any_makes_tuples_lists_as_json_does():
    assert storable_any(("a", ("b",))) == ["a", ["b"]]
