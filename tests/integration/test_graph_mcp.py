"""MemPalace's MCP server, over its JSON-RPC stdio interface, writing and reading the AGE graph.

The server is MemPalace's own (``python -m mempalace.mcp_server --palace DIR``); nothing of it is
patched. The palace is on the ``postgres`` backend, so its knowledge graph must land in AGE (and no
SQLite file appear), while a palace on MemPalace's default backend keeps its SQLite graph.
"""

from __future__ import annotations

import json
import os
import sqlite3

import psycopg
import pytest

from palace_pair import McpServer


def _server_env(tmp_path):
    env = dict(os.environ)
    env.update(HOME=str(tmp_path / "home"), MEMPALACE_CONFIG_DIR=str(tmp_path / "config"), NO_COLOR="1")
    return env


def _postgres_palace(tmp_path):
    from mempalace.backends import PalaceRef

    from mempalace_pg.store.backend import PostgresBackend

    palace = tmp_path / "palace"
    backend = PostgresBackend()
    backend.get_collection(
        palace=PalaceRef(id=str(palace), local_path=str(palace)),
        collection_name="mempalace_drawers",
        create=True,
    )
    backend.close()
    return palace


def test_mcp_kg_tools_land_in_age(tmp_path, pg_dsn, pg_schema):
    palace = _postgres_palace(tmp_path)
    server = McpServer(["--palace", str(palace)], _server_env(tmp_path))
    try:
        added = server.tool(
            "mempalace_kg_add",
            subject="Max",
            predicate="child_of",
            object="Alice",
            valid_from="2015-04-01",
            source_closet="closet_1",
            source_drawer_id="drawer_9",
        )
        assert added.get("success") is True, added
        server.tool(
            "mempalace_kg_add", subject="Max", predicate="loves", object="Chess", valid_from="2025-10-01"
        )
        server.tool(
            "mempalace_kg_add", subject='O\'Brien "x"); DROP TABLE y;--', predicate="knows", object="Max"
        )
        queried = server.tool("mempalace_kg_query", entity="Max")
        assert queried["count"] == 3
        assert {(f["predicate"], f["object"]) for f in queried["facts"] if f["direction"] == "outgoing"} == {
            ("child_of", "Alice"),
            ("loves", "Chess"),
        }
        assert [f["subject"] for f in queried["facts"] if f["direction"] == "incoming"] == [
            'O\'Brien "x"); DROP TABLE y;--'
        ]
        inv = server.tool(
            "mempalace_kg_invalidate", subject="Max", predicate="loves", object="Chess", ended="2026-01-01"
        )
        assert inv.get("success") is True, inv
        as_of = server.tool("mempalace_kg_query", entity="Max", as_of="2026-06-01", direction="outgoing")
        assert [f["object"] for f in as_of["facts"]] == ["Alice"]
        timeline = server.tool("mempalace_kg_timeline", entity="Max")
        assert timeline["total"] == 3
        assert [t["valid_from"] for t in timeline["timeline"]] == ["2015-04-01", "2025-10-01", None]
        stats = server.tool("mempalace_kg_stats")
        assert stats["triples"] == 3 and stats["current_facts"] == 2 and stats["entities"] == 4
        fuzzy = server.tool("mempalace_kg_query", entity="ches")
        assert fuzzy["count"] == 0
    finally:
        server.close()

    # It is in AGE: Cypher in the session schema's graph sees the facts with their provenance ...
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        palace_pk = conn.execute(
            f'SELECT palace_pk FROM "{pg_schema}".palaces WHERE palace_key = %s', (str(palace),)
        ).fetchone()[0]
        try:
            conn.execute("LOAD 'age'")
        except psycopg.errors.InsufficientPrivilege:  # no superuser: AGE from $libdir/plugins
            conn.execute("LOAD '$libdir/plugins/age'")
        conn.execute('SET search_path = ag_catalog, "$user", public')
        rows = conn.execute(
            f"SELECT * FROM cypher('{pg_schema}_kg', $$ MATCH (s:Entity)-[f:Fact]->(o:Entity) "
            "WHERE s.entity_id = 'max' AND s.palace = $palace RETURN o.name, f.predicate, f.valid_to, "
            "f.source_drawer_id ORDER BY f.predicate $$, %s) AS (o agtype, p agtype, vt agtype, d agtype)",
            (json.dumps({"palace": palace_pk}),),
        ).fetchall()
    assert rows == [
        ('"Alice"', '"child_of"', None, '"drawer_9"'),
        ('"Chess"', '"loves"', '"2026-01-01"', None),
    ]
    # ... and MemPalace did not fall back to a SQLite file anywhere.
    assert not (palace / "knowledge_graph.sqlite3").exists()
    assert not (tmp_path / "home" / ".mempalace" / "knowledge_graph.sqlite3").exists()


def test_sqlite_palaces_keep_their_sqlite_graph(tmp_path):
    """With mempalace-pg installed, a palace that is not on the postgres backend is untouched."""
    palace = tmp_path / "plain_palace"
    palace.mkdir()
    server = McpServer(["--palace", str(palace)], _server_env(tmp_path))
    try:
        server.tool("mempalace_kg_add", subject="Ann", predicate="likes", object="Tea")
        assert server.tool("mempalace_kg_stats")["triples"] == 1
    finally:
        server.close()
    assert (palace / "knowledge_graph.sqlite3").exists()


def test_routing_in_process(tmp_path):
    import mempalace.knowledge_graph as kgm

    import mempalace_pg  # noqa: F401 - installs the routing
    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.graph.routing import sqlite_class

    palace = _postgres_palace(tmp_path)
    kg = kgm.KnowledgeGraph(db_path=str(palace / "knowledge_graph.sqlite3"))
    assert isinstance(kg, AgeKnowledgeGraph)
    kg.add_triple("A", "b", "C")
    kg.close()
    kg.close()  # idempotent
    assert kg.query_entity("A")[0]["object"] == "C"  # and usable again after close
    other = kgm.KnowledgeGraph(db_path=str(tmp_path / "elsewhere" / "knowledge_graph.sqlite3"))
    assert type(other) is sqlite_class()
    other.close()
    # raw SQLite access reads a read-only snapshot in MemPalace's own schema
    snapshot = kg._conn()
    row = snapshot.execute("SELECT subject, predicate, object FROM triples").fetchone()
    assert tuple(row) == ("a", "b", "c")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        snapshot.execute("DELETE FROM triples")
    kg.close()
    with pytest.raises(sqlite3.ProgrammingError):
        snapshot.execute("SELECT 1")
