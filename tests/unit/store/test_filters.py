"""MemPalace filters compiled to SQL (mempalace_pg.store.filters), read without a database: what the SQL
says, that every value is bound, and what is refused. tests/integration/test_filters.py runs the SQL
against MemPalace's own evaluator."""

from __future__ import annotations

import re

import pytest
from mempalace.backends.base import UnsupportedFilterError
from psycopg import sql

from mempalace_pg.store.filters import compile_filters, wing_room_equalities

#: A named placeholder as psycopg writes it in statement text.
PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def compiled(where=None, where_document=None, **options) -> tuple[str, dict]:
    """The filter's SQL text (psycopg >= 3.2 renders identifiers without a connection) and parameters,
    checked to hold a value for every placeholder and no value the text does not use."""
    condition, params = compile_filters(where, where_document, **options)
    text = condition.as_string(None)
    assert set(PLACEHOLDER.findall(text)) == set(params), (text, params)
    return text, params


def inline(where=None, where_document=None, **options) -> str:
    """The filter's SQL with each bound value written in as a literal: what the server evaluates."""
    text, params = compiled(where, where_document, **options)
    return PLACEHOLDER.sub(lambda m: sql.Literal(params[m.group(1)]).as_string(None), text)


@pytest.mark.parametrize(
    "where, expected",
    [
        (None, {}),
        ({}, {}),
        ({"wing": "a"}, {"wing": "a"}),
        ({"wing": "a", "room": "b"}, {"wing": "a", "room": "b"}),
        ({"$and": [{"wing": "a"}, {"room": {"$eq": "b"}}]}, {"wing": "a", "room": "b"}),
        ({"$and": [{"wing": "a"}, {"wing": "b"}]}, None),
        ({"wing": 1}, None),
        ({"wing": {"$ne": "a"}}, None),
        ({"$or": [{"wing": "a"}]}, None),
        ({"source_file": "x"}, None),
    ],
)
def test_wing_room_equalities(where, expected):
    assert wing_room_equalities(where) == expected


@pytest.mark.parametrize(
    "where, expected",
    [
        (
            {"$and": [{"wing": "a"}, {"$and": [{"room": "b"}, {"wing": {"$eq": "a"}}]}]},
            {"wing": "a", "room": "b"},
        ),
        ({"wing": "a\x00"}, {"wing": "a"}),  # compared as it was stored
        ({"wing": {"$eq": "a", "$ne": "b"}}, None),
        ({"$and": ["not a dict"]}, None),
        ({"$and": {"wing": "a"}}, None),
        (["wing"], None),
    ],
)
def test_wing_room_equalities_nested_and_odd_shapes(where, expected):
    assert wing_room_equalities(where) == expected


def test_no_filter_is_true_with_no_parameters():
    for where, where_document in ((None, None), ({}, None), (None, {}), ({}, {})):
        assert compiled(where, where_document) == ("TRUE", {})


def test_values_and_field_names_are_bound_never_written_into_the_text():
    evil = "'; DROP TABLE records; --"
    text, params = compiled({evil: evil, "wing": evil, "n": {"$in": [evil, 3]}}, {"$contains": evil})
    assert evil not in text and "DROP" not in text
    assert list(params.values()).count(evil) >= 4
    assert any(
        evil in v for v in params.values() if isinstance(v, str) and v != evil
    )  # in the containment JSON


def test_each_value_has_its_own_name_in_order_with_the_prefix_asked_for():
    _, params = compiled({"wing": "a", "topic": "b"}, {"$contains": "c"}, prefix="w")
    assert list(params) == [f"w{i}" for i in range(len(params))]
    assert list(params.values())[-1] == "c"


def test_a_string_column_is_compared_through_its_index_prefix():
    short, long = "w" * 256, "w" * 300
    assert inline({"wing": long}) == (
        f'(left("wing", 256) = \'{short}\'::text AND "wing" = \'{long}\'::text AND "wing" IS NOT NULL)'
    )
    assert inline({"source_file": {"$in": ["b" * 700, "a"]}}) == (
        f"(left(\"source_file\", 600) = ANY('{{a,{'b' * 600}}}'::text[]) "
        f'AND "source_file" = ANY(\'{{{"b" * 700},a}}\'::text[]) AND "source_file" IS NOT NULL)'
    )


def test_other_fields_are_read_from_the_metadata_column():
    assert inline({"topic": "x"}) == (
        """("metadata" @> '{"topic": "x"}'::jsonb AND ("metadata" -> 'topic') = '"x"'::jsonb)"""
    )


def test_the_columns_can_be_named():
    text = inline(
        {"topic": 1},
        {"$contains": "y"},
        metadata_column=sql.Identifier("r", "meta"),
        document_column=sql.Identifier("r", "doc"),
    )
    assert text == (
        """((("r"."meta" -> 'topic') = ANY('{1,true}'::jsonb[])) IS TRUE """
        """AND (strpos("r"."doc", 'y'::text) > 0))"""
    )


def test_numbers_match_booleans_as_python_does():
    assert inline({"n": 1}) == """(("metadata" -> 'n') = ANY('{1,true}'::jsonb[])) IS TRUE"""  # True == 1
    assert inline({"n": False}) == """(("metadata" -> 'n') = ANY('{0,false}'::jsonb[])) IS TRUE"""


@pytest.mark.parametrize(
    "where",
    [
        {"n": float("nan")},
        {"n": float("inf")},
        {"n": {"$in": []}},
        {"$or": []},
        {"n": {"$gt": float("nan")}},
        {"n": {"$lt": None}},
    ],
)
def test_what_nothing_can_match_is_false(where):
    assert compiled(where)[0] == "FALSE"


def test_an_empty_and_is_true():
    assert compiled({"$and": []}) == ("TRUE", {})


def test_compared_values_are_made_storable_as_written_values_are():
    _, params = compiled({"wing": "a\x00b", "topic\udc80": "c"}, {"$contains": "d\x00"})
    values = list(params.values())
    assert "ab" in values and "topic\ufffd" in values and "d" in values
    assert not any("\x00" in v for v in values if isinstance(v, str))


def test_logic_nests_with_parentheses():
    text, _ = compiled({"$or": [{"wing": "a"}, {"$and": [{"room": "b"}, {"n": {"$gte": 2}}]}]})
    assert text.startswith("((left(") and " OR ((left(" in text and ") AND ((CASE jsonb_typeof(" in text


@pytest.mark.parametrize(
    "where, where_document",
    [
        ({"wing": {"$regex": "x"}}, None),
        ({"$nor": [{"wing": "a"}]}, None),
        ({"wing": {"$in": "not-a-list"}}, None),
        ({"$and": {"wing": "a"}}, None),
        ({1: "a"}, None),
        ("wing", None),
        (None, {"$not_contains": "x"}),
        (None, "text"),
        (None, {"$and": "x"}),
        ({"n": {"$eq": {1, 2}}}, None),  # a set has no JSON form
    ],
)
def test_unsupported_filters_raise(where, where_document):
    with pytest.raises(UnsupportedFilterError):
        compile_filters(where, where_document)
