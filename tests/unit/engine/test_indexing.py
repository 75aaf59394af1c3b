"""The vector index's pure parts (mempalace_pg.engine.indexing): how wide a search over segments walks, and
the SQL that names a segment. tests/integration/test_indexing.py runs the index on the server."""

from __future__ import annotations

import pytest
from psycopg import sql

from mempalace_pg.engine import indexing


def test_breadth_narrows_with_the_share_of_the_largest_segment():
    one = indexing.Layout(((-1, 100),), 100)
    four = indexing.Layout(
        ((-1, 34), (34, 64), (64, 86), (86, 100)), 100, indexing.largest_share([34, 30, 22, 14])
    )
    two = indexing.Layout(((-1, 74), (74, 100)), 100, indexing.largest_share([74, 26]))
    assert indexing.search_breadth(one, 150) == 150
    assert indexing.search_breadth(four, 150) == indexing.MIN_SEARCH_BREADTH
    assert indexing.search_breadth(two, 150) == 105  # share 0.7
    assert indexing.search_breadth(four, 40) == 40  # never wider than configured


@pytest.mark.parametrize(
    "rows, share",
    [
        ([], 1.0),
        ([500], 1.0),
        ([0, 0], 1.0),  # one segment (or no rows): its walk covers everything
        ([50, 50], 0.5),
        ([74, 26], 0.7),
        ([76, 24], 0.8),  # rounded to a tenth
        ([1] * 30, 0.1),  # never below a tenth
        (("3", 1), 0.8),  # counts as the database may return them
    ],
)
def test_largest_share(rows, share):
    assert indexing.largest_share(rows) == share


def test_a_layout_with_a_young_segment_is_searched_at_the_configured_breadth():
    # A young graph (built with YOUNG_EF_CONSTRUCTION) finds its share of the nearest rows only at the
    # full breadth; the narrower walk over segments is for graphs built at full settings.
    segments = ((-1, 34), (34, 64), (64, 86), (86, 100))
    share = indexing.largest_share([34, 30, 22, 14])
    assert indexing.search_breadth(indexing.Layout(segments, 100, share, young=True), 150) == 150
    assert indexing.search_breadth(indexing.Layout(segments, 100, share), 150) == indexing.MIN_SEARCH_BREADTH
    assert indexing.search_breadth(indexing.Layout(segments, 100, share, young=True), 40) == 40


def test_breadth_is_the_configured_one_without_segments_and_never_below_the_floor():
    assert indexing.search_breadth(indexing.Layout((), -1), 150) == 150
    assert indexing.search_breadth(indexing.Layout(((-1, 5), (5, 9)), 9, 0.5), 1000) == 500
    assert (
        indexing.search_breadth(indexing.Layout(((-1, 5), (5, 9)), 9, 0.1), 150)
        == indexing.MIN_SEARCH_BREADTH
    )


def test_layout_top_and_tail():
    empty = indexing.Layout((), -1)
    assert empty.top == -1 and not empty.has_tail
    assert indexing.Layout((), 10).has_tail  # rows, no segment yet
    built = indexing.Layout(((-1, 40), (40, 90)), 90)
    assert built.top == 90 and not built.has_tail
    assert indexing.Layout(((-1, 40),), 41).has_tail


def test_segment_sql_is_the_same_text_in_index_and_queries():
    assert indexing.segment_condition(40, 90).as_string(None) == "vector_seq > 40 AND vector_seq <= 90"
    assert indexing.tail_condition(indexing.Layout(((-1, 40),), 99)).as_string(None) == "vector_seq > 40"
    assert indexing.half_type(384).as_string(None) == "halfvec(384)"
    ddl = indexing.segment_ddl(
        "records_c7_vec_90_abc", sql.Identifier("s", "records_c7"), 384, 40, 90, concurrently=True
    ).as_string(None)
    assert ddl == (
        'CREATE INDEX CONCURRENTLY "records_c7_vec_90_abc" ON "s"."records_c7" USING hnsw '
        "((embedding::halfvec(384)) halfvec_cosine_ops) WITH (m = 16, ef_construction = 256) "
        "WHERE vector_seq > 40 AND vector_seq <= 90"
    )


def test_segment_names_are_fresh_and_lock_keys_per_collection():
    a, b = indexing.segment_name(7, 90), indexing.segment_name(7, 90)
    assert a != b and a.startswith("records_c7_vec_90_") and len(a) == len("records_c7_vec_90_") + 6
    assert indexing.lock_keys("s", 7) == ("mempalace_pg:folder:s:7", "mempalace_pg:segments:s:7")


def test_the_construction_search_is_a_setting_and_young_segments_stay_narrow(monkeypatch):
    def rendered(options) -> str:
        return options.as_string(None)

    monkeypatch.delenv("MEMPALACE_PG_EF_CONSTRUCTION", raising=False)
    assert rendered(indexing.hnsw_options()) == "m = 16, ef_construction = 256"
    assert rendered(indexing.hnsw_options(young=True)) == "m = 16, ef_construction = 64"
    monkeypatch.setenv("MEMPALACE_PG_EF_CONSTRUCTION", "40")
    assert rendered(indexing.hnsw_options()) == "m = 16, ef_construction = 40"
    assert rendered(indexing.hnsw_options(young=True)) == "m = 16, ef_construction = 40"
