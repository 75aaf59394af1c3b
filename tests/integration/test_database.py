"""The pool, reconnects, concurrent processes and the versioned schema, on the real server."""

from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import subprocess

import psycopg
import pytest
from mempalace.backends import PalaceRef
from psycopg import sql
from run_cli import run_cli

from mempalace_pg import registries
from mempalace_pg.config import Settings
from mempalace_pg.db import pool
from mempalace_pg.db.schema import current_revision, head_revision
from mempalace_pg.errors import SchemaVersionError
from mempalace_pg.store.backend import PostgresBackend
from tests.integration.test_overview import listing_keys_and_records


def test_one_pool_per_dsn_shared_by_backends(make_collection, tmp_path):
    col = make_collection()
    other = PostgresBackend()
    try:
        ref = PalaceRef(id=str(tmp_path / "second"), local_path=str(tmp_path / "second"))
        col2 = other.get_collection(palace=ref, collection_name="mempalace_drawers", create=True)
        assert col._db.pool is col2._db.pool
    finally:
        other.close()


def _break_connections(pg_dsn):
    """Restart the server when the test runner says how; otherwise cut every other session of the plugin
    in this database that this role may end (all of them for a superuser; its own for the application role,
    which may not signal a superuser's, and has no business with another test run's)."""
    restart = os.environ.get("MEMPALACE_PG_TEST_RESTART")
    if restart:
        subprocess.run(shlex.split(restart), check=True, capture_output=True, timeout=120)
        return "restart"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND application_name = 'mempalace-pg' "
            "AND datname = current_database() AND pg_has_role(usesysid, 'USAGE')"
        )
    return "terminate"


def test_reconnects_after_server_restart(make_collection, pg_dsn):
    col = make_collection()
    col.add(ids=["a"], documents=["before"], metadatas=[{}], embeddings=[[1.0, 0.0]])
    assert col.count() == 1
    _break_connections(pg_dsn)
    # the pooled connections are dead now: the next calls retry once on fresh ones
    col.add(ids=["b"], documents=["after"], metadatas=[{}], embeddings=[[0.0, 1.0]])
    assert col.count() == 2
    assert col.query(query_embeddings=[[0.0, 1.0]], n_results=1).ids == [["b"]]


def test_statement_errors_are_not_retried(make_collection, monkeypatch):
    col = make_collection()
    col.add(ids=["a"], documents=["x"], metadatas=[{}], embeddings=[[1.0, 0.0]])
    calls = []

    def failing(conn):
        calls.append(1)
        conn.execute("SELECT 1/0")

    with pytest.raises(psycopg.errors.DivisionByZero):
        col._db.run(failing)
    assert calls == [1]


def _writer(args):
    dsn, schema, config_dir, palace, worker, n = args
    os.environ.update(MEMPALACE_PG_DSN=dsn, MEMPALACE_PG_SCHEMA=schema, MEMPALACE_CONFIG_DIR=config_dir)
    backend = PostgresBackend()
    col = backend.get_collection(
        palace=PalaceRef(id=palace, local_path=palace), collection_name="mempalace_drawers", create=True
    )
    for i in range(n):
        col.upsert(
            ids=[f"w{worker}-{i}", "shared"],
            documents=[f"row {i} of {worker}", f"last by {worker}"],
            metadatas=[{"worker": worker}, {"worker": worker}],
            embeddings=[[1.0, i / 10], [0.5, 0.5]],
        )
    backend.close()
    return worker


def test_concurrent_writers_from_several_processes(pg_dsn, pg_schema, tmp_path):
    palace = str(tmp_path / "busy")
    ctx = multiprocessing.get_context("spawn")
    jobs = [(pg_dsn, pg_schema, os.environ["MEMPALACE_CONFIG_DIR"], palace, w, 20) for w in range(4)]
    with ctx.Pool(4) as pool:
        assert sorted(pool.map(_writer, jobs)) == [0, 1, 2, 3]
    col = PostgresBackend().get_collection(
        palace=PalaceRef(id=palace, local_path=palace), collection_name="mempalace_drawers"
    )
    assert col.count() == 4 * 20 + 1
    assert col.facet_counts("worker").keys() <= {"0", "1", "2", "3"}


def _first_use(args):
    dsn, schema = args
    os.environ.update(MEMPALACE_PG_DSN=dsn, MEMPALACE_PG_SCHEMA=schema)
    return pool.Database.get(Settings.load()).schema_revision


def test_fresh_schema_created_once_by_concurrent_first_users(pg_dsn):
    schema = f"fresh_{os.getpid()}"
    try:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(3) as pool:
            assert pool.map(_first_use, [(pg_dsn, schema)] * 3) == [head_revision()] * 3
        with psycopg.connect(pg_dsn) as conn:
            assert current_revision(conn, schema) == head_revision()
            assert conn.execute(f"SELECT count(*) FROM {schema}.alembic_version").fetchone()[0] == 1
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(
                "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
                (f"{schema}_kg",),
            )


@pytest.fixture
def scratch_schema(pg_dsn, monkeypatch):
    schema = f"scratch_{os.getpid()}"
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", schema)
    registries.reset()
    yield schema
    registries.reset()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(
            "SELECT ag_catalog.drop_graph(name, true) FROM ag_catalog.ag_graph WHERE name = %s",
            (f"{schema}_kg",),
        )


def test_schema_newer_than_code_is_refused(pg_dsn, scratch_schema):
    pool.Database.get(Settings.load())
    pool.close_all()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {scratch_schema}.alembic_version SET version_num = '9999_from_the_future'")
    with pytest.raises(SchemaVersionError, match="newer than this mempalace-pg"):
        pool.Database.get(Settings.load())


def test_schema_behind_code_without_auto_upgrade_names_the_command(pg_dsn, scratch_schema, monkeypatch):
    pool.Database.get(Settings.load())
    pool.close_all()
    # pretend the database predates the current head by recording an older (known) revision
    from alembic.script import ScriptDirectory

    from mempalace_pg.db.schema import migrations_dir

    revisions = [r.revision for r in ScriptDirectory(str(migrations_dir())).walk_revisions()]
    older = revisions[1] if len(revisions) > 1 else None
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        if older is None:
            conn.execute(f"DROP TABLE {scratch_schema}.alembic_version")
            conn.execute(f"DROP SCHEMA {scratch_schema} CASCADE")
            conn.execute(f"CREATE SCHEMA {scratch_schema}")
            conn.execute(
                f"CREATE TABLE {scratch_schema}.alembic_version (version_num varchar(32) PRIMARY KEY)"
            )
            conn.execute(f"INSERT INTO {scratch_schema}.alembic_version VALUES ('0000_before_mempalace_pg')")
        else:
            conn.execute(f"UPDATE {scratch_schema}.alembic_version SET version_num = %s", (older,))
    monkeypatch.setenv("MEMPALACE_PG_AUTO_UPGRADE", "0")
    with pytest.raises(SchemaVersionError) as info:
        pool.Database.get(Settings.load())
    assert "mempalace-pg db upgrade" in str(info.value) or "newer" in str(info.value)


def test_cli_db_upgrade_and_current(pg_dsn, scratch_schema):
    env = dict(os.environ)

    def run(*a):
        return run_cli(*a, env=env)

    before = run("db", "current", "--json")
    assert before.returncode == 1 and json.loads(before.stdout)["current"] is None
    up = run("db", "upgrade")
    assert up.returncode == 0, up.stderr
    assert head_revision() in up.stdout
    after = run("db", "current")
    assert after.returncode == 0 and "up to date" in after.stdout
    with psycopg.connect(pg_dsn) as conn:  # the DSN's password, or its passfile's
        password = conn.info.password
    assert password and password not in up.stdout + after.stdout


def test_schema_is_documented_for_psql_users(make_collection, pg_dsn, pg_schema):
    make_collection().add(
        ids=["a"], documents=["psql reads"], metadatas=[{"wing": "w", "room": "r"}], embeddings=[[1.0, 0.0]]
    )
    with psycopg.connect(pg_dsn) as conn:
        undocumented = conn.execute(
            "SELECT c.relname || '.' || a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname IN "
            "('palaces', 'collections', 'records') AND a.attnum > 0 AND NOT a.attisdropped "
            "AND col_description(c.oid, a.attnum) IS NULL "
            "AND a.attname NOT IN ('created_at', 'collection_pk', 'palace_pk', 'name', 'namespace', "
            "'embedder_recorded_at')",
            (pg_schema,),
        ).fetchall()
        assert undocumented == []
        row = conn.execute(
            f"SELECT wing, room, document FROM {pg_schema}.drawers WHERE document = 'psql reads'"
        ).fetchone()
        assert row == ("w", "r", "psql reads")


def test_upgrade_from_0003_replaces_the_graph_write_helpers(pg_dsn, scratch_schema):
    """A database at revision 0003 upgrades to head: the SQL-language write helpers become PL/pgSQL
    (planned once per session) and the graph's writes keep their results."""
    from mempalace_pg.db.schema import upgrade
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    settings = Settings.load()
    assert upgrade(settings, "0003_graph_and_drawers") == "0003_graph_and_drawers"
    languages = (
        "SELECT p.proname, l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
        "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = %s AND p.proname IN "
        "('kg_find_vertex', 'kg_add_entity', 'kg_mark_drawers_deleted') ORDER BY 1"
    )
    with psycopg.connect(pg_dsn) as conn:
        assert {lang for _, lang in conn.execute(languages, (scratch_schema,)).fetchall()} == {"sql"}
    kg = AgeKnowledgeGraph(palace_key="upgrade-test", settings=settings)  # first use upgrades to head
    try:
        kg.add_entity("Ann", "person", {"k": "v"})
        kg.add_triple("Ann", "likes", "Tea", valid_from="2024-01-01")
        kg.add_triple("Ann", "drinks", "Coffee", valid_from="2024-06-01")
        kg.invalidate("Ann", "likes", "Tea", ended="2025-01-01")
        with pytest.raises(ValueError, match="before valid_from"):
            kg.invalidate("Ann", "drinks", "Coffee", ended="2024-01-01")  # would invert the interval
        facts = {f["object"]: f["valid_to"] for f in kg.query_entity("Ann")}
        assert facts == {"Tea": "2025-01-01", "Coffee": None}
        assert kg.stats()["entities"] == 3
    finally:
        kg.close()
    with psycopg.connect(pg_dsn) as conn:
        assert current_revision(conn, scratch_schema) == head_revision()
        assert dict(conn.execute(languages, (scratch_schema,)).fetchall()) == {
            "kg_add_entity": "plpgsql",
            "kg_find_vertex": "plpgsql",
            "kg_mark_drawers_deleted": "plpgsql",
        }


def _collection_by_sql(conn, schema: str, palace_key: str, setup: str) -> tuple[int, int]:
    """A palace, its drawers collection (3 dimensions) and the collection's records partition, made by SQL
    as an older release made them (``conn``'s search path on ``schema``); ``setup``, the partition's setup
    function at that revision, attaches its triggers. Returns (palace_pk, collection_pk)."""
    palace = conn.execute(
        "INSERT INTO palaces (namespace, palace_key) VALUES ('', %s) RETURNING palace_pk", (palace_key,)
    ).fetchone()[0]
    pk = conn.execute(
        "INSERT INTO collections (palace_pk, name, dimension) VALUES (%s, 'mempalace_drawers', 3) "
        "RETURNING collection_pk",
        (palace,),
    ).fetchone()[0]
    conn.execute(f"CREATE TABLE records_c{pk} PARTITION OF records FOR VALUES IN ({pk})")
    conn.execute(
        sql.SQL("SELECT {}(%s::regclass)").format(sql.Identifier(setup)), (f"{schema}.records_c{pk}",)
    )
    return palace, pk


def _records_by_sql(conn, pk: int, rows) -> None:
    """Records (id, document, metadata) written into ``records_c{pk}`` by SQL, as an older release wrote
    them; row i gets the vector [i + 1, 1, 0]."""
    for i, (rid, doc, meta) in enumerate(rows):
        conn.execute(
            f"INSERT INTO records_c{pk} (collection_pk, id, document, metadata, embedding) "
            "VALUES (%s, %s, %s, %s::jsonb, %s::vector)",
            (pk, rid, doc, json.dumps(meta), f"[{i + 1}, 1, 0]"),
        )


def test_upgrade_from_0004_keeps_every_record_and_fact_and_reindexes_words(pg_dsn, scratch_schema):
    """A palace written at revision 0004 (by SQL, as that release wrote it) upgrades to head: records,
    embeddings, facet counts and facts unchanged; words inside paths found; long values now storable."""
    from mempalace_pg.db.schema import upgrade
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    settings = Settings.load()
    assert upgrade(settings, "0004_planned_once") == "0004_planned_once"
    s = scratch_schema
    docs = {
        "d1": "See docs/bash/README.Debian first.",
        "d2": "Mail jdoe@example.org today.",
        "d3": "plain words",
    }
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path = {s}, public, ag_catalog")
        palace, pk = _collection_by_sql(conn, s, "up-0004", "records_attach_triggers")
        _records_by_sql(
            conn,
            pk,
            [(rid, doc, {"wing": "w", "room": f"r{i % 2}"}) for i, (rid, doc) in enumerate(docs.items())],
        )
        conn.execute(
            "SELECT kg_add_triple(%s, 'ann', 'Ann', 'likes', 'tea', 'Tea', 't_ann_likes_tea_1', "
            "'2024-01-01', NULL, 1.0, NULL, NULL, 'd1', NULL)",
            (palace,),
        )
    pool.close_all()
    ref = PalaceRef(id="up-0004", local_path=None)
    col = PostgresBackend().get_collection(palace=ref, collection_name="mempalace_drawers")  # upgrades
    got = col.get(ids=list(docs), include=["documents", "metadatas", "embeddings"])
    assert dict(zip(got.ids, got.documents)) == docs
    assert [e for e in got.embeddings] == [[1.0, 1.0, 0.0], [2.0, 1.0, 0.0], [3.0, 1.0, 0.0]]
    assert col.facet_counts("room") == {"r0": 2, "r1": 1} and col.count() == 3
    assert [h.id for h in col.lexical_search(query="bash").hits] == ["d1"]
    assert [h.id for h in col.lexical_search(query="jdoe").hits] == ["d2"]
    long_id = "drawer_" + "x" * 4000
    col.upsert(
        ids=[long_id], documents=["long"], metadatas=[{"wing": "w" * 3000}], embeddings=[[1.0, 0.0, 0.0]]
    )
    assert col.get(ids=[long_id]).documents == ["long"] and col.count() == 4
    kg = AgeKnowledgeGraph(palace_key="up-0004", settings=settings)
    try:
        assert [(f["predicate"], f["object"]) for f in kg.query_entity("Ann")] == [("likes", "Tea")]
        kg.add_triple("Ann" * 1000, "likes", "Tea")
        assert kg.stats()["triples"] == 2
    finally:
        kg.close()
    with psycopg.connect(pg_dsn) as conn:
        assert current_revision(conn, scratch_schema) == head_revision()
        # revision 0008 gave the partition made at 0004 its wing/room statistics, and filled them
        stats = conn.execute(
            "SELECT stxkind FROM pg_statistic_ext WHERE stxname = %s AND stxnamespace = %s::regnamespace",
            (f"records_c{pk}_wing_room", scratch_schema),
        ).fetchone()
        assert stats and set(stats[0]) == {"d", "f", "m"}
        assert conn.execute(
            "SELECT n_distinct FROM pg_stats_ext WHERE statistics_name = %s AND statistics_schemaname = %s",
            (f"records_c{pk}_wing_room", scratch_schema),
        ).fetchone()
        # revision 0011 counted the words of the records already there (for BM25's average length): 6 + 2
        # in room r0, 5 in r1; the long record added since has one
        tokens = conn.execute(
            f"SELECT room #>> '{{}}', tokens FROM {scratch_schema}.facet_counts WHERE collection_pk = %s",
            (pk,),
        ).fetchall()
        assert sorted(tokens, key=str) == sorted([("r0", 8), ("r1", 5), (None, 1)], key=str), tokens


def test_one_caller_at_a_time_keeps_one_warm_backend():
    """The pool hands out the connection returned last: calls made one after another run on one server
    backend, not alternately on each of the pool's connections, and the idle one is still there."""
    settings = Settings.load({"pool_min_size": 2, "pool_max_size": 2, "statement_timeout_ms": 29_999})
    db = pool.Database.get(settings)
    db.pool.wait(timeout=30)
    assert db.pool.get_stats()["pool_size"] == 2

    def pid(conn):
        return conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    with db.pool.connection() as first, db.pool.connection() as second:
        both = {pid(first), pid(second)}
    assert len(both) == 2
    pids = [db.run(pid) for _ in range(6)]
    assert len(set(pids)) == 1 and pids[0] in both
    assert db.pool.get_stats()["pool_available"] == 2


def test_upgrade_to_0016_gives_every_folded_row_its_sign_bits(pg_dsn, scratch_schema):
    """A palace at revision 0015 whose folder had taken the folded rows' entries out of vector_tail
    upgrades in place: the table is vector_bits, every row has its entry again, the partition's
    triggers keep it (under their new names), and a wing's search through its own rows answers."""
    from mempalace_pg.db.schema import upgrade

    settings = Settings.load()
    assert upgrade(settings, "0015_lock_order") == "0015_lock_order"
    s = scratch_schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path = {s}, public, ag_catalog")
        _, pk = _collection_by_sql(conn, s, "up-0015", "records_partition_setup")
        _records_by_sql(conn, pk, [(f"d{i}", f"doc {i}", {"wing": "w" if i < 4 else "v"}) for i in range(6)])
        # as 0015's folder left a palace: the entries of rows in segments gone, the tail's kept
        seqs = [r[0] for r in conn.execute(f"SELECT vector_seq FROM records_c{pk} ORDER BY vector_seq")]
        conn.execute("DELETE FROM vector_tail WHERE vector_seq <= %s", (seqs[3],))
        assert conn.execute("SELECT count(*) FROM vector_tail").fetchone()[0] == 2
    pool.close_all()
    ref = PalaceRef(id="up-0015", local_path=None)
    col = PostgresBackend().get_collection(palace=ref, collection_name="mempalace_drawers")  # upgrades
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert current_revision(conn, scratch_schema) == head_revision()
        entries = lambda: conn.execute(  # noqa: E731
            f"SELECT count(*), count(DISTINCT vector_seq) FROM {s}.vector_bits WHERE collection_pk = %s",
            (pk,),
        ).fetchone()
        assert entries() == (6, 6)
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname LIKE 'note\\_%%' "
            "AND tgname NOT LIKE 'note\\_keys%%' ORDER BY 1",
            (f"{s}.records_c{pk}",),
        ).fetchall()
        assert [t[0] for t in triggers] == ["note_bits_delete", "note_bits_insert", "note_bits_update"]
        assert conn.execute("SELECT to_regclass(%s)", (f"{s}.vector_tail",)).fetchone()[0] is None
    col.upsert(ids=["d6"], documents=["doc 6"], metadatas=[{"wing": "w"}], embeddings=[[0.0, 1.0, 0.0]])
    col.delete(ids=["d0"])
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert entries() == (6, 6)
    got = col.query(query_embeddings=[[0.0, 1.0, 0.0]], n_results=3, where={"wing": "w"})
    assert got.ids == [["d6", "d1", "d2"]]


def test_upgrade_to_0017_lists_every_drawer_from_listing_keys(pg_dsn, scratch_schema):
    """A palace at revision 0016 upgrades in place: every record gets its listing entry, the partition's
    triggers keep them, records_listing_wing is gone, and pages of a wing come out as before."""
    from mempalace_pg.db.schema import upgrade
    from mempalace_pg.store.listing import logical_page

    settings = Settings.load()
    assert upgrade(settings, "0016_vector_bits") == "0016_vector_bits"
    s = scratch_schema
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"SET search_path = {s}, public, ag_catalog")
        _, pk = _collection_by_sql(conn, s, "up-0016", "records_partition_setup")
        metas = [{"wing": "w" if i % 2 else "v", "room": f"r{i % 3}"} for i in range(8)]
        metas[7]["parent_drawer_id"] = "d0"  # a chunk of d0's logical drawer
        _records_by_sql(conn, pk, [(f"d{i}", f"doc {i}", meta) for i, meta in enumerate(metas)])
    pool.close_all()
    ref = PalaceRef(id="up-0016", local_path=None)
    col = PostgresBackend().get_collection(palace=ref, collection_name="mempalace_drawers")  # upgrades

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert current_revision(conn, scratch_schema) == head_revision()
        kept, wanted = listing_keys_and_records(col)
        assert kept == wanted and len(kept) == 8
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname LIKE 'note\\_keys%%' "
            "ORDER BY 1",
            (f"{s}.records_c{pk}",),
        ).fetchall()
        assert [t[0] for t in triggers] == ["note_keys_delete", "note_keys_insert", "note_keys_update"]
        assert conn.execute("SELECT to_regclass(%s)", (f"{s}.records_listing_wing",)).fetchone()[0] is None
    col.upsert(
        ids=["d8", "d1"],
        documents=["doc 8", "doc 1"],
        metadatas=[{"wing": "w"}, {"wing": "v"}],
        embeddings=[[0.0, 1.0, 0.0]] * 2,
    )
    col.delete(ids=["d3"])
    kept, wanted = listing_keys_and_records(col)
    assert kept == wanted and len(kept) == 8
    # wing w: d5, d8 of their own (d1 moved to v, d3 deleted), and d0's logical drawer through its chunk d7
    page, total = logical_page(col.partition, wing="w", limit=10, offset=0)
    assert (sorted(page), total) == (["d5", "d7", "d8"], 3)
    page, total = logical_page(col.partition, wing="w", limit=1, offset=1)
    assert total == 3 and page == ["d5"]
