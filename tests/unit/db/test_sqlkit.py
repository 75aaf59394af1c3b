"""SQL helpers (mempalace_pg.db.sqlkit): row counts written into statement text, and the statement cache."""

from __future__ import annotations

import numpy as np
import pytest
from psycopg import sql

from mempalace_pg.db import sqlkit
from mempalace_pg.db.sqlkit import (
    MAX_ROW_COUNT,
    Kept,
    StatementCache,
    checked_row_count,
    clamped_row_count,
    row_count,
)


@pytest.mark.parametrize("count", ["10", "10; DROP TABLE records", True, -1, 10.0, 2**31])
def test_row_counts_in_statement_text_are_plain_ints_only(count):
    """Row counts are the one thing written into statement text; anything but an int in range is refused."""
    with pytest.raises(ValueError, match="row count"):
        row_count(count)


@pytest.mark.parametrize("count", [0, 1, 10, MAX_ROW_COUNT])
def test_a_row_count_in_range_is_written_as_a_number(count):
    assert checked_row_count(count) == count
    statement = sql.SQL("SELECT id FROM t LIMIT {}").format(row_count(count))
    assert statement.as_string(None) == f"SELECT id FROM t LIMIT {count}"


@pytest.mark.parametrize("count", [False, np.int64(5), MAX_ROW_COUNT + 1, None, "5"])
def test_checked_row_count_refuses_what_is_not_exactly_an_int(count):
    with pytest.raises(ValueError, match=f"a row count must be an int between 0 and {MAX_ROW_COUNT}"):
        checked_row_count(count)


@pytest.mark.parametrize(
    "value, lowest, clamped",
    [
        (5, 0, 5),
        (-3, 0, 0),
        (0, 1, 1),
        (10**12, 0, MAX_ROW_COUNT),
        ("7", 0, 7),
        (3.9, 0, 3),
        (np.int64(4), 1, 4),
        (True, 0, 1),
    ],
)
def test_clamped_row_count(value, lowest, clamped):
    got = clamped_row_count(value, lowest)
    assert got == clamped and type(got) is int


def test_statement_cache_builds_once_per_key():
    cache = StatementCache()
    builds = []

    def build():
        builds.append(1)
        return Kept(sql.SQL("SELECT %(k)s"), {"k": 1})

    first = cache.get(("k", 1), build)
    assert cache.get(("k", 1), build) is first and len(builds) == 1
    assert first == Kept(sql.SQL("SELECT %(k)s"), {"k": 1})
    cache.get(None, build)
    cache.get(None, build)
    assert len(builds) == 3  # a None key is built every time and never kept


def test_statement_cache_drops_the_oldest_when_full(monkeypatch):
    monkeypatch.setattr(sqlkit, "STATEMENT_CACHE_SIZE", 3)
    cache = StatementCache()
    entries = {k: cache.get(k, lambda k=k: Kept(sql.SQL(f"SELECT {k}"), {})) for k in range(3)}
    cache.get(3, lambda: Kept(sql.SQL("SELECT 3"), {}))
    assert cache.get(0, lambda: Kept("rebuilt", {})).statement == "rebuilt"  # the oldest went first
    assert cache.get(2, lambda: Kept("rebuilt", {})) is entries[2]
