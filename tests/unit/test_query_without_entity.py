"""The query that ranks drawers around an entity leaves the entity's name out."""

from __future__ import annotations

import pytest

from mempalace_pg.retrieval.around import query_without_entity


@pytest.mark.parametrize(
    ("query", "entity", "expected"),
    [
        (
            "Which command related to CREATE INDEX rebuilds indexes?",
            "CREATE INDEX",
            "Which command related to rebuilds indexes?",
        ),
        ("What did tomás  reyes's team decide?", "Tomás Reyes", "What did team decide?"),
        ("Alice’s garden, and Alice", "alice", "garden, and"),
        ("O'Brien's plan", "O'Brien", "plan"),
        # a longer word that merely starts with the name is not the name
        ("Alicea said so", "Alice", "Alicea said so"),
        ("pg_dump_all flags", "pg_dump", "pg_dump_all flags"),
        # nothing left but the name: rank by the query as written
        ("Alice", "alice", "Alice"),
        ("  Alice's ? ", "Alice", "  Alice's ? "),
        ("no mention here", "Alice", "no mention here"),
    ],
)
def test_the_name_is_taken_out(query, entity, expected):
    assert query_without_entity(query, entity) == expected
