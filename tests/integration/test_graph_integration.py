"""The AGE knowledge graph beyond MemPalace's semantics: bad input, concurrent writers, a
non-superuser role, `mempalace-pg kg import`, and the official AGE driver reading our graph."""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

CLI = str(Path(sys.executable).with_name("mempalace-pg"))


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"valid_from": "2024-13-01"},
        {"valid_from": "2024-02-30"},
        {"valid_to": "yesterday"},
        {"valid_from": "2024-01-01T10:00:00"},
        {"valid_from": "2024-01-01T10:00:00+02:00"},
        {"valid_from": "2024-01-01 10:00:00"},
        {"valid_from": "2024-01"},
        {"valid_from": 20240101},
    ],
)
def test_malformed_dates_are_refused_like_mempalace(age_kg, sqlite_kg, kwargs):
    with pytest.raises(ValueError) as ours:
        age_kg.add_triple("A", "p", "B", **kwargs)
    with pytest.raises(ValueError) as theirs:
        sqlite_kg.add_triple("A", "p", "B", **kwargs)
    assert str(ours.value) == str(theirs.value)
    assert age_kg.stats()["triples"] == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda kg: kg.add_triple(None, "p", "B"),
        lambda kg: kg.add_triple("A", 5, "B"),
        lambda kg: kg.add_entity(None),
        lambda kg: kg.add_triple("A", "p", "B", source_file=b"bytes"),
        lambda kg: kg.add_triple("A", "p", "B", confidence=math.nan),
        lambda kg: kg.add_triple("A", "p", "B", confidence="high"),
        lambda kg: kg.add_triple("A", "p", "B", confidence=math.inf),
        lambda kg: kg.query_entity("x", as_of="soon"),
        lambda kg: kg.invalidate("A", "p", "B", ended="2024-02-30"),
        lambda kg: kg.supersede("A", "p", "B", "C", at="never"),
    ],
)
def test_bad_input_is_a_clear_value_error_and_writes_nothing(age_kg, call):
    with pytest.raises(ValueError) as err:
        call(age_kg)
    assert str(err.value)
    assert age_kg.stats() == {
        "entities": 0,
        "triples": 0,
        "current_facts": 0,
        "expired_facts": 0,
        "relationship_types": [],
    }


def test_palaces_are_isolated(pg_env):
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    one = AgeKnowledgeGraph(palace_key=f"iso-{uuid.uuid4().hex}")
    two = AgeKnowledgeGraph(palace_key=f"iso-{uuid.uuid4().hex}")
    other_ns = AgeKnowledgeGraph(palace_key=one.palace_key, namespace="tenant-b")
    one.add_triple("Shared Name", "p", "X")
    assert two.query_entity("Shared Name") == [] and two.stats()["triples"] == 0
    assert other_ns.query_entity("Shared Name") == [] and other_ns.timeline() == []
    two.add_triple("Shared Name", "p", "Y")
    assert [r["object"] for r in one.query_entity("Shared Name")] == ["X"]
    assert [r["object"] for r in two.query_entity("Shared Name")] == ["Y"]


# -- concurrency -------------------------------------------------------------------------------


def _writer(dsn, schema, palace_key, barrier, rounds):
    os.environ["MEMPALACE_PG_DSN"], os.environ["MEMPALACE_PG_SCHEMA"] = dsn, schema
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    kg = AgeKnowledgeGraph(palace_key=palace_key)
    kg.stats()  # connect before the race
    barrier.wait()
    ids = set()
    for i in range(rounds):
        ids.add(kg.add_triple("Racer", "holds", "Trophy"))
        ids.add(kg.add_triple("Racer", "lap", f"L{i}"))
        kg.supersede("Racer", "ranked", f"#{i % 3}", f"#{(i + 1) % 3}", at="2024-06-01T00:00:00Z")
    return ids


def test_concurrent_processes_leave_one_open_fact(pg_dsn, pg_schema, pg_env):
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    palace_key = f"race-{uuid.uuid4().hex}"
    AgeKnowledgeGraph(palace_key=palace_key).stats()  # schema and palace exist before the race
    ctx = multiprocessing.get_context("spawn")
    workers = 4
    with ctx.Manager() as manager:
        barrier = manager.Barrier(workers)
        with ctx.Pool(workers) as pool:
            results = pool.starmap(_writer, [(pg_dsn, pg_schema, palace_key, barrier, 15)] * workers)
    ids = set().union(*results)
    assert len(ids) == 1 + 15  # every process got the same facts back
    kg = AgeKnowledgeGraph(palace_key=palace_key)
    holds = kg.query_relationship("holds")
    assert len(holds) == 1 and holds[0]["current"]
    laps = kg.query_relationship("lap")
    assert sorted(r["object"] for r in laps) == sorted(f"L{i}" for i in range(15))
    ranked_open = [r for r in kg.query_relationship("ranked") if r["current"]]
    assert len({r["object"] for r in ranked_open}) == len(ranked_open)  # never two open copies of one fact


# -- a role that is not a superuser ------------------------------------------------------------


def test_non_superuser_role_reads_and_writes(pg_dsn, pg_admin_dsn, pg_schema, pg_env):
    """A second role, given only the grants below, reads and writes the graph the test role owns."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from mempalace_pg.config import Settings
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    AgeKnowledgeGraph(palace_key="owner-setup").stats()  # the test role applied the schema and owns it
    role, password = f"kg_app_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    graph = f"{pg_schema}_kg"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:  # only a superuser may create roles
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}' NOSUPERUSER")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # the grants come from the owner
        for schema in (pg_schema, graph):
            conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO {role}')
            conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "{schema}" TO {role}')
            conn.execute(f'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA "{schema}" TO {role}')
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f"GRANT USAGE ON SCHEMA ag_catalog TO {role}")
    try:
        params = conninfo_to_dict(pg_dsn)
        params.update(user=role, password=password)
        params.pop("passfile", None)
        dsn = make_conninfo(**params)
        kg = AgeKnowledgeGraph(palace_key=f"app-{uuid.uuid4().hex}", settings=Settings.load({"dsn": dsn}))
        kg.add_triple("Quinn", "maintains", "Server", valid_from="2024-01-01")
        kg.supersede("Quinn", "maintains", "Server", "Cluster", at="2025-01-01")
        assert [r["object"] for r in kg.query_entity("Quinn", as_of="2025-06-01")] == ["Cluster"]
        with psycopg.connect(dsn, autocommit=True) as conn:  # Cypher too, loading AGE as a non-superuser
            assert not conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[
                0
            ]
            conn.execute("LOAD '$libdir/plugins/age'")
            conn.execute('SET search_path = ag_catalog, "$user", public')
            rows = conn.execute(
                f"SELECT * FROM cypher('{graph}', $$ MATCH (s:Entity {{entity_id: 'quinn'}})-[f:Fact]->(o) "
                "RETURN o.name ORDER BY o.name $$) AS (o agtype)"
            ).fetchall()
        assert rows == [('"Cluster"',), ('"Server"',)]
    finally:
        from mempalace_pg.db import pool

        pool.close_all()
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


# -- mempalace-pg kg import --------------------------------------------------------------------


def _sqlite_graph(path):
    from mempalace_pg.graph.routing import sqlite_class

    kg = sqlite_class()(str(path))
    for i in range(1200):
        kg.add_triple(
            f"Person {i % 300}",
            f"rel {i % 7}",
            f"Thing {i % 450}",
            valid_from=f"20{10 + i % 15}-0{1 + i % 9}-1{i % 10}",
            source_drawer_id=f"d{i}",
        )
    for i in range(0, 1200, 13):
        kg.invalidate(f"Person {i % 300}", f"rel {i % 7}", f"Thing {i % 450}", ended="2026-01-01")
    kg.add_entity("Person 1", "person", {"nick": "P1"})
    kg.apply_row(
        "triples", {"id": "t_orphan_x_y_000000000000", "subject": "orphan", "predicate": "x", "object": "y"}
    )  # a fact whose entities were never created
    kg.close()


def test_kg_import_is_idempotent_and_verified(tmp_path, pg_env):
    from mempalace_pg.graph.kg import AgeKnowledgeGraph
    from mempalace_pg.graph.routing import sqlite_class

    source = tmp_path / "knowledge_graph.sqlite3"
    _sqlite_graph(source)
    before = source.read_bytes()
    key = f"import-{uuid.uuid4().hex}"

    def run():
        proc = subprocess.run(
            [CLI, "kg", "import", str(source), "--palace-key", key, "--json", "--batch", "200"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    first = run()
    assert first["ok"] and first["source_counts"] == {"entities": 750, "triples": 1201}
    assert first["written"]["triples"]["inserted"] == 1201 and first["verified"]["triples"] == 1201
    second = run()
    assert second["written"]["entities"] == {"inserted": 0, "updated": 0, "unchanged": 750}
    assert second["written"]["triples"] == {"inserted": 0, "updated": 0, "unchanged": 1201}
    assert source.read_bytes() == before  # the source is never changed

    ref = sqlite_class()(str(source))
    age = AgeKnowledgeGraph(palace_key=key)
    try:
        assert age.stats() == ref.stats()
        assert age.timeline(limit=500) == ref.timeline(limit=500)
        for name in ("Person 1", "Thing 7", "orphan", "y", "person"):
            assert age.query_entity(name, direction="both") == ref.query_entity(name, direction="both")
            assert age.query_entity(name, as_of="2020-05-15") == ref.query_entity(name, as_of="2020-05-15")
        assert age.timeline_total("orphan") == ref.timeline_total("orphan") == 1
    finally:
        ref.close()


def test_kg_import_refuses_what_it_cannot_use(tmp_path, pg_env):
    not_kg = tmp_path / "other.sqlite3"
    import sqlite3

    sqlite3.connect(not_kg).execute("CREATE TABLE x (a)").connection.close()
    for args, message in (
        ([str(not_kg), "--palace-key", "k"], "not a MemPalace knowledge graph"),
        ([str(tmp_path / "missing.sqlite3"), "--palace-key", "k"], "no such file"),
        ([str(not_kg), "--palace", str(tmp_path)], "no postgres palace"),
    ):
        proc = subprocess.run([CLI, "kg", "import", *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_kg_query_and_stats_commands(tmp_path, pg_env):
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    key = f"cli-{uuid.uuid4().hex}"
    kg = AgeKnowledgeGraph(palace_key=key)
    kg.add_triple("Max", "child_of", "Alice", valid_from="2015-04-01")
    out = subprocess.run(
        [CLI, "kg", "query", "Max", "--palace-key", key], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "Max —child_of→ Alice" in out.stdout
    out = subprocess.run(
        [CLI, "kg", "stats", "--palace-key", key, "--json"], capture_output=True, text=True, timeout=120
    )
    assert json.loads(out.stdout)["triples"] == 1


# -- the official Apache AGE driver reads our graph --------------------------------------------


def _age_driver_connection(dsn: str, graph: str):
    """The official driver's connection to ``graph``, over the whole DSN (TLS and passfile included).

    ``age.connect`` runs ``LOAD 'age'``, which only a superuser may: a role that is not one (the homelab
    stack's application role) gets ``access to library "age" is not allowed``. For such a role this does the
    driver's own set-up (``age.age.setUpAge``) by hand, loading AGE from ``$libdir/plugins`` instead, and
    hands that connection to the driver's ``Age``: the driver's Cypher and agtype parsing are what is tested.
    """
    import age  # apache-age-python (the optional extra "age-driver")
    import psycopg2
    from psycopg2 import extensions

    try:
        return age.connect(dsn=dsn, graph=graph)
    except psycopg2.errors.InsufficientPrivilege as exc:
        assert 'access to library "age" is not allowed' in str(exc)
    conn = psycopg2.connect(dsn)
    with conn.cursor() as cursor:
        cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
        assert not cursor.fetchone()[0]
        cursor.execute("LOAD '$libdir/plugins/age'")
        cursor.execute("SET search_path = ag_catalog, '$user', public")
        cursor.execute("SELECT typelem FROM pg_type WHERE typname = '_agtype'")
        oid = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM ag_graph WHERE name = %s", (graph,))
        assert cursor.fetchone()[0] == 1
    extensions.register_type(extensions.new_type((oid,), "AGETYPE", age.age.parseAgeValue))
    driver = age.Age()
    driver.connection, driver.graphName = conn, graph
    return driver


def test_official_age_driver_reads_the_graph(pg_dsn, pg_schema, age_kg):
    age_kg.add_triple("Max", "child_of", "Alice", valid_from="2015-04-01", source_drawer_id="drawer_1")
    age_kg.add_entity("Alice", "person", {"born": 1980})
    conn = _age_driver_connection(pg_dsn, f"{pg_schema}_kg")
    try:
        cursor = conn.execCypher(
            "MATCH (s:Entity)-[f:Fact]->(o:Entity) WHERE s.palace = %s RETURN s, f, o",
            cols=["s", "f", "o"],
            params=(age_kg.palace_pk(),),
        )
        rows = cursor.fetchall()
        conn.commit()
    finally:
        conn.close()
    assert len(rows) == 1
    s, f, o = rows[0]
    assert (s.label, f.label, o.label) == ("Entity", "Fact", "Entity")
    assert s["name"] == "Max" and o["name"] == "Alice" and o["type"] == "person"
    # the driver's ANTLR parser hands string values back with their JSON escapes still in place
    assert json.loads(o["attributes"].replace('\\"', '"')) == {"born": 1980}
    assert (
        f["predicate"] == "child_of"
        and f["valid_from"] == "2015-04-01"
        and f["source_drawer_id"] == "drawer_1"
    )
    assert f.start_id == s.id and f.end_id == o.id
