"""The MCP tools' argument checks, without a database: MemPalace's own sanitizers, our messages."""

from __future__ import annotations

import pytest

from mempalace_pg.mcp_tools import filing
from mempalace_pg.mcp_tools.arguments import (
    MAX_RESULTS,
    ToolInputError,
    choice,
    date,
    entity_name,
    name,
    optional_name,
    query_text,
    whole_number,
)


def test_names_are_checked_as_mempalace_checks_them():
    assert name("  kitchen ", "wing") == "kitchen"
    assert optional_name(None, "room") is None and optional_name("", "room") is None
    for bad, message in (("../etc", "invalid path characters"), ("", "non-empty"), (3, "non-empty")):
        with pytest.raises(ToolInputError, match=f"wing .*{message}|wing must be a {message}"):
            name(bad, "wing")
    assert entity_name("O'Brien, Jr. (ops)") == "O'Brien, Jr. (ops)"
    assert entity_name("lone \ud800 half") == "lone \ufffd half"  # stored as MemPalace stores it
    with pytest.raises(ToolInputError, match="entity must be a non-empty string"):
        entity_name("   ")


def test_dates_and_queries():
    assert (
        date("2026-05-01", "as_of") == "2026-05-01" and date(None, "as_of") is None and date("", "x") is None
    )
    for bad in ("2026-13-45", "May 2026", "2026-05-01 10:00"):
        with pytest.raises(ToolInputError, match="as_of"):
            date(bad, "as_of")
    with pytest.raises(ToolInputError, match="as_of must be a date string"):
        date(20260501, "as_of")
    assert query_text("basil planting") == "basil planting"
    with pytest.raises(ToolInputError, match="query must be a non-empty string"):
        query_text(" ")
    # a system prompt pasted before the question is cut away, as mempalace_search does
    pasted = "You are a helpful assistant. " * 40 + "\nwhen should basil be planted?"
    assert query_text(pasted) == "when should basil be planted?"


def test_numbers_and_choices():
    assert whole_number("7", "limit", 1, MAX_RESULTS, clamp=True) == 7
    assert whole_number(1000, "limit", 1, MAX_RESULTS, clamp=True) == MAX_RESULTS
    assert whole_number(0, "limit", 1, MAX_RESULTS, clamp=True) == 1
    assert whole_number(3.0, "hops", 1, 6, clamp=False) == 3
    for bad in (True, 2.5, "many", None, [1]):
        with pytest.raises(ToolInputError, match="hops must be a whole number"):
            whole_number(bad, "hops", 1, 6, clamp=False)
    with pytest.raises(ToolInputError, match="hops must be between 1 and 6, not 7"):
        whole_number(7, "hops", 1, 6, clamp=False)
    assert choice("boost", "mode", ("restrict", "boost")) == "boost"
    with pytest.raises(ToolInputError, match="mode must be one of restrict, boost, not 'up'"):
        choice("up", "mode", ("restrict", "boost"))


def _memory(**changes):
    args = {
        "wing": "team",
        "room": "notes",
        "content": "text",
        "facts": [],
        "source_file": None,
        "added_by": "mcp",
    }
    return filing.Memory.checked(**{**args, **changes})


def test_a_memory_and_its_facts_are_checked_before_anything_is_embedded():
    memory = _memory(
        facts=[{"subject": "Ann", "predicate": "lives in", "object": "Oslo", "valid_from": "2026-01-02"}]
    )
    assert memory.facts[0].predicate == "lives in" and memory.facts[0].valid_to is None
    cases = [
        ({"content": "  "}, "content must be a non-empty string"),
        ({"facts": {"subject": "A"}}, "facts must be a list"),
        ({"facts": ["Ann lives in Oslo"]}, r"facts\[0\] must be an object"),
        ({"facts": [{"subject": "A", "predicate": "p"}]}, r"facts\[0\]\.object must be a non-empty string"),
        ({"facts": [{"subject": "A", "predicate": "p/q", "object": "B"}]}, r"facts\[0\]\.predicate"),
        ({"facts": [{"subject": "A", "predicate": "p", "object": "B", "when": "x"}]}, "unknown field"),
        (
            {"facts": [{"subject": "A", "predicate": "p", "object": "B", "valid_to": "soon"}]},
            r"facts\[0\]\.valid_to",
        ),
        ({"facts": [{"subject": "A", "predicate": "p", "object": "B"}] * (filing.MAX_FACTS + 1)}, "at most"),
        ({"added_by": ""}, "added_by"),
        ({"source_file": 7}, "source_file must be a string"),
    ]
    for changes, message in cases:
        with pytest.raises(ToolInputError, match=message):
            _memory(**changes)


def test_drawers_are_made_as_mempalace_add_drawer_makes_them(monkeypatch, tmp_path):
    from mempalace.ids import make_drawer_id_from_content

    monkeypatch.setenv("MEMPALACE_CONFIG_DIR", str(tmp_path))
    short = _memory(content="Ann moved to Oslo.")
    drawer_id, ids, documents, metadatas = filing.drawers_of(short)
    assert drawer_id == make_drawer_id_from_content("team", "notes", "Ann moved to Oslo.") and ids == [
        drawer_id
    ]
    assert (
        metadatas[0]["chunk_index"] == 0
        and metadatas[0]["wing"] == "team"
        and metadatas[0]["added_by"] == "mcp"
    )
    from mempalace.config import MempalaceConfig

    size = MempalaceConfig().chunk_size
    long = _memory(content="x" * (2 * size + 1))
    drawer_id, ids, documents, metadatas = filing.drawers_of(long)
    assert ids == [f"{drawer_id}_chunk_{i:06d}" for i in range(3)]
    assert "".join(documents) == long.content and all(m["parent_drawer_id"] == drawer_id for m in metadatas)
