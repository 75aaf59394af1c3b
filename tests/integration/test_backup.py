"""`mempalace-pg backup` / `restore`: pg_dump of the schema and its AGE graph, and the fix-up that makes
the graph work after pg_restore (AGE's catalog is keyed by OIDs). Backs up, drops, restores (in place and
into an empty database) and asks the same questions of both."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from run_cli import run_cli
from server_tools import server_tool

from mempalace_pg.engine.builds import shared_workers
from mempalace_pg.engine.indexing import BUILD_MEMORY, BUILD_WORKERS


def password_of(dsn: str) -> str:
    """The password libpq used for ``dsn``: the DSN's, or the passfile's (PGPASSFILE, passfile=)."""
    with psycopg.connect(dsn) as conn:
        password = conn.info.password
    assert password, "the test role connects without a password: nothing to look for in the output"
    return password


def cli(*args, env):
    return run_cli(*args, env={**os.environ, **env}, timeout=600)


def answers(env: dict, palace: str) -> dict:
    """The same questions, asked through a fresh process (its own pool) against ``env``'s database."""
    code = f"""
import json, numpy as np
from mempalace_pg.atomic import open_drawers
from mempalace_pg.retrieval import PalaceSearch
import psycopg, os
drawers, kg = open_drawers(palace_key={palace!r}, create=False)
q = np.random.default_rng(5).normal(size=16).tolist()
out = {{
  "count": drawers.count(),
  "query": drawers.query(query_embeddings=[q], n_results=5).ids,
  "wing": drawers.query(query_embeddings=[q], n_results=5, where={{"wing": "w1"}}).ids,
  "lexical": [h.id for h in drawers.lexical_search(query="basil", n_results=5).hits],
  "facts": kg.query_entity("Alice", direction="both"),
  "as_of": kg.query_entity("Alice", as_of="2024-06-01"),
  "stats": kg.stats(),
  "around": [h["id"] for h in PalaceSearch(palace_key={palace!r}).around_entity("Alice", q, hops=2)["hits"]],
}}
with psycopg.connect(os.environ["MEMPALACE_PG_DSN"], autocommit=True) as conn:
    try:
        conn.execute("LOAD 'age'")
    except psycopg.errors.InsufficientPrivilege:  # no superuser: AGE from $libdir/plugins
        conn.execute("LOAD '$libdir/plugins/age'")
    conn.execute("SET search_path = ag_catalog, public")
    g = os.environ["MEMPALACE_PG_SCHEMA"] + "_kg"
    out["cypher"] = conn.execute(
        "SELECT * FROM cypher('" + g + "', $$ MATCH (s:Entity)-[f:Fact]->(o:Entity) "
        "RETURN s.name, f.predicate, o.name ORDER BY s.name, f.predicate, o.name $$) "
        "AS (s agtype, p agtype, o agtype)").fetchall()
print(json.dumps(out))
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture
def seeded(pg_dsn):
    schema = f"bk_{uuid.uuid4().hex[:8]}"
    env = {"MEMPALACE_PG_DSN": pg_dsn, "MEMPALACE_PG_SCHEMA": schema}
    code = """
import numpy as np
from mempalace_pg import unit_of_work
v = np.random.default_rng(2).normal(size=(500, 16))
with unit_of_work(palace_key="home") as uow:
    uow.add_drawers(
        ids=[f"d{i}" for i in range(500)], embeddings=v.tolist(),
        documents=[("basil and tomatoes " if i % 50 == 0 else "") + f"note {i}" for i in range(500)],
        metadatas=[{"wing": f"w{i % 3}", "room": "r"} for i in range(500)])
    uow.add_triple("Alice", "grows", "Basil", valid_from="2020-01-01", source_drawer_id="d0")
    uow.add_triple("Basil", "needs", "Water", source_drawer_id="d50")
    uow.add_triple("Alice", "lives_in", "Porto", valid_from="2019-01-01", valid_to="2023-12-31",
                   source_drawer_id="d100")
    uow.supersede("Alice", "lives_in", "Porto", "Lisbon", at="2024-01-01")
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    yield env
    # as a user drops it, waiting for the folder's build of the 500 rows, which may have just started: a
    # raw DROP SCHEMA beside it deadlocked with its CREATE INDEX CONCURRENTLY (seen in the docker tier)
    drop_palace(env)


def with_dbname(dsn: str, dbname: str) -> str:
    return make_conninfo(**{**conninfo_to_dict(dsn), "dbname": dbname})


def drop_palace(env: dict) -> None:
    """The palace's schema and graph dropped as a user drops them: `mempalace-pg db drop`, which waits for
    a running index build (a raw DROP SCHEMA beside the palace's folder can deadlock with its CREATE
    INDEX CONCURRENTLY)."""
    proc = cli("db", "drop", "--yes", env=env)
    assert proc.returncode == 0, proc.stderr


def pg_restore_wrapper(tmp_path, pg_dsn: str, *, before: str = "", after: str = "") -> str:
    """A ``pg_restore`` for ``restore --pg-restore``: shell lines ``before`` the server's own pg_restore
    runs, which then runs with restore's arguments, then lines ``after`` it (only if it succeeded)."""
    wrapper = tmp_path / "pg_restore"
    run = server_tool(pg_dsn, "pg_restore")
    call = f'{run} "$@" || exit $?\n{after}' if after else f'exec {run} "$@"\n'
    wrapper.write_text(f"#!/bin/sh\n{before}{call}")
    wrapper.chmod(0o700)
    return str(wrapper)


def parallel_builds_safe(pg_dsn: str) -> bool:
    """Whether the server's pgvector builds HNSW in parallel safely (0.8.2 and newer, CVE-2026-3172)."""
    with psycopg.connect(pg_dsn) as conn:
        version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    return tuple(int(p) for p in version.split(".")[:3]) >= (0, 8, 2)


def test_backup_drop_restore_in_place(seeded, pg_dsn, tmp_path):
    before = answers(seeded, "home")
    assert before["facts"] and before["around"] and before["cypher"] and before["lexical"]
    path = tmp_path / "palace.dump"
    proc = cli("backup", str(path), "--pg-dump", server_tool(pg_dsn, "pg_dump"), "--json", env=seeded)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["labels"] == 4 and path.stat().st_size > 0
    # the provisioned servers are 16 or newer: zstd, not pg_dump's slow default of gzip at level 6
    assert json.loads(proc.stdout)["compression"] == "zstd:1"
    assert password_of(pg_dsn) not in proc.stdout + proc.stderr
    drop_palace(seeded)
    proc = cli("restore", str(path), "--pg-restore", server_tool(pg_dsn, "pg_restore"), "--json", env=seeded)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["facts_seen_by_cypher"] == 4
    # one session: its builds get the folder's workers, where the server's pgvector builds in parallel safely
    assert json.loads(proc.stdout)["build_workers"] == (BUILD_WORKERS if parallel_builds_safe(pg_dsn) else 0)
    assert answers(seeded, "home") == before
    # restoring over an existing palace is refused, and says why
    proc = cli("restore", str(path), "--pg-restore", server_tool(pg_dsn, "pg_restore"), env=seeded)
    assert proc.returncode == 2 and "already exist" in proc.stderr


def test_restore_into_an_empty_database(seeded, pg_dsn, pg_admin_dsn, tmp_path):
    """Into a new database, as the homelab's application role would restore: a superuser creates the
    database, its extensions and the role's grants there (`mempalace-pg db bootstrap --app-role`, with the
    role's own password); the role restores."""
    before = answers(seeded, "home")
    path = tmp_path / "palace.dump"
    assert cli("backup", str(path), "--pg-dump", server_tool(pg_dsn, "pg_dump"), env=seeded).returncode == 0
    name = f"restore_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    target = {**seeded, "MEMPALACE_PG_DSN": with_dbname(pg_dsn, name)}
    admin = {**seeded, "MEMPALACE_PG_DSN": with_dbname(pg_admin_dsn, name)}
    try:
        proc = cli("restore", str(path), "--pg-restore", server_tool(pg_dsn, "pg_restore"), env=target)
        assert proc.returncode == 2 and "mempalace-pg db bootstrap" in proc.stderr  # no extensions yet
        with psycopg.connect(pg_dsn) as conn:
            role, superuser = conn.execute(
                "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user"
            ).fetchone()
        if superuser:
            assert cli("db", "bootstrap", env=admin).returncode == 0
        else:  # as docs/backup.md says for the application role: the bootstrap grants it the new database
            let_in = {**admin, "MEMPALACE_APP_PASSWORD": password_of(pg_dsn)}
            proc = cli("db", "bootstrap", "--app-role", role, env=let_in)
            assert proc.returncode == 0, proc.stderr
        proc = cli("restore", str(path), "--pg-restore", server_tool(pg_dsn, "pg_restore"), env=target)
        assert proc.returncode == 0, proc.stderr
        assert answers(target, "home") == before
        # and the restored palace takes writes: a new fact through the write functions, seen by Cypher
        code = (
            "from mempalace_pg.graph.kg import AgeKnowledgeGraph\n"
            "kg = AgeKnowledgeGraph(palace_key='home'); kg.add_triple('Alice', 'knows', 'Bob')\n"
            "print(kg.stats()['triples'])"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **target}
        )
        assert out.returncode == 0 and out.stdout.strip() == "5", out.stderr[-2000:]
    finally:
        with psycopg.connect(pg_admin_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def test_backup_errors_are_clear(seeded, pg_dsn, tmp_path):
    proc = cli("backup", str(tmp_path / "x.dump"), "--pg-dump", "no-such-pg-dump", env=seeded)
    assert proc.returncode == 2 and "not found" in proc.stderr and not (tmp_path / "x.dump").exists()
    proc = cli(
        "backup",
        str(tmp_path / "y.dump"),
        "--pg-dump",
        server_tool(pg_dsn, "pg_dump"),
        env={**seeded, "MEMPALACE_PG_SCHEMA": "no_palace_here"},
    )
    assert proc.returncode == 2 and "nothing to back up" in proc.stderr
    proc = cli("restore", str(tmp_path / "missing.dump"), env=seeded)
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_a_restore_in_parallel_sessions_answers_the_same(seeded, pg_dsn, tmp_path):
    """`restore --jobs 2`: pg_restore's sessions side by side, each building indexes with the palace's
    build memory and a share of the parallel workers one build gets (none where this server's pgvector
    does not build in parallel safely); the restored palace answers as before and its tables have planner
    statistics."""

    before = answers(seeded, "home")
    path = tmp_path / "palace.dump"
    assert cli("backup", str(path), "--pg-dump", server_tool(pg_dsn, "pg_dump"), env=seeded).returncode == 0
    drop_palace(seeded)
    # the server's own pg_restore, run by a script that first notes the settings its sessions get and
    # which backend holds the restore's lock (through the libpq variables restore gives pg_restore), then
    # idles past the idle-in-transaction timeout the DSN gives every session (the lock's transaction is
    # open and idle for as long as the restore runs: it must not be ended half-way)
    seen, holder = tmp_path / "pgoptions", tmp_path / "holder"
    params = conninfo_to_dict(seeded["MEMPALACE_PG_DSN"])
    params["options"] = f"{params.get('options', '')} -c idle_in_transaction_session_timeout=1000".strip()
    impatient = {**seeded, "MEMPALACE_PG_DSN": make_conninfo(**params)}
    who = (
        "import psycopg; from mempalace_pg.db import locks; c = psycopg.connect(''); "
        f"print(locks.holder(c, locks.restore_key({seeded['MEMPALACE_PG_SCHEMA']!r})))"
    )
    wrapper = pg_restore_wrapper(
        tmp_path,
        pg_dsn,
        before=f'printf "%s\\n" "$PGOPTIONS" >> {seen}\n{sys.executable} -c "{who}" > {holder}\nsleep 2\n',
    )
    proc = cli("restore", str(path), "--jobs", "2", "--pg-restore", wrapper, "--json", env=impatient)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["jobs"] == 2 and json.loads(proc.stdout)["facts_seen_by_cypher"] == 4
    assert json.loads(proc.stdout)["not_analyzed"] == []
    assert answers(seeded, "home") == before
    with psycopg.connect(pg_dsn) as conn:
        # every table analyzed by the restore (an empty one too: its statistics say it is empty); not
        # "has statistics", which a table the folder fills after the restore would lack
        unanalyzed = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid "
            "WHERE n.nspname = %s AND c.relkind = 'r' AND NOT c.relispartition AND s.last_analyze IS NULL",
            (seeded["MEMPALACE_PG_SCHEMA"],),
        ).fetchall()
    assert unanalyzed == [], f"tables the restore did not analyze: {unanalyzed}"
    # two sessions building at once share the processes one build runs: with the default two workers, a
    # build's backend each and no worker (on a server whose pgvector builds serially, none anyway)
    each = shared_workers(BUILD_WORKERS, 2) if parallel_builds_safe(pg_dsn) else 0
    assert BUILD_WORKERS != 2 or each == 0
    options = seen.read_text()
    assert f"-c maintenance_work_mem={BUILD_MEMORY}" in options
    assert f"-c max_parallel_maintenance_workers={each}" in options, options
    assert json.loads(proc.stdout)["build_workers"] == each
    # while pg_restore ran, a session of the restore held the lock that keeps folders from building on
    # the palace (their CREATE INDEX CONCURRENTLY beside its post-data statements deadlocks)
    assert holder.read_text().strip().isdigit(), holder.read_text()


def test_a_restore_analyzes_a_partition_another_session_locks(seeded, pg_dsn, tmp_path):
    """The statistics a restore gathers reach every partition: one that another session (autovacuum,
    which takes up a freshly loaded table at once) holds locked when pg_restore is done is waited for and
    analyzed once the lock goes."""
    schema = seeded["MEMPALACE_PG_SCHEMA"]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        (partition,) = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' AND c.relispartition AND c.relname LIKE 'records_c%%'",
            (schema,),
        ).fetchone()
    path = tmp_path / "palace.dump"
    assert cli("backup", str(path), "--pg-dump", server_tool(pg_dsn, "pg_dump"), env=seeded).returncode == 0
    drop_palace(seeded)
    # the server's own pg_restore, then a session that locks the restored partition for 3 s (through the
    # libpq variables restore gives pg_restore), started before the wrapper returns
    locked = tmp_path / "locked"
    lock = (
        "import psycopg, time; from psycopg import sql; c = psycopg.connect(''); "
        f"c.execute(sql.SQL('LOCK TABLE {{}} IN SHARE UPDATE EXCLUSIVE MODE').format("
        f"sql.Identifier({schema!r}, {partition!r}))); "
        f"open({str(locked)!r}, 'w').write(str(time.time())); time.sleep(3); c.commit()"
    )
    wrapper = pg_restore_wrapper(
        tmp_path,
        pg_dsn,
        after=f'{sys.executable} -c "{lock}" &\n'
        # the lock taken within 30 s, else the restore fails at once (not after the test's timeout)
        f"for i in $(seq 300); do [ -s {locked} ] && exit 0; sleep 0.1; done; exit 1\n",
    )
    proc = cli("restore", str(path), "--pg-restore", wrapper, "--json", env=seeded)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["not_analyzed"] == []
    with psycopg.connect(pg_dsn) as conn:
        analyzed, times = conn.execute(
            "SELECT extract(epoch FROM last_analyze), analyze_count FROM pg_stat_all_tables "
            "WHERE schemaname = %s AND relname = %s",
            (schema, partition),
        ).fetchone()
        # the partitioned table has the statistics of the whole (those its partitions' rows make)
        whole = conn.execute(
            "SELECT count(*) FROM pg_stats WHERE schemaname = %s AND tablename = 'records' AND inherited",
            (schema,),
        ).fetchone()[0]
        recursing = conn.info.server_version < 180000  # PostgreSQL 18 has ANALYZE ONLY for the parent
    # analyzed once the lock was let go, not before (nor never), and once where it can be
    assert analyzed is not None and float(analyzed) >= float(locked.read_text()) + 2.5, partition
    assert times == (2 if recursing else 1), times
    assert whole > 0


def damaged_in_its_data(path, tool: str, out):
    """``path`` with 64 bytes zeroed inside a compressed table's data, found by asking the server's
    pg_restore to read the damaged file (its table of contents intact, its data not): written to
    ``out``."""
    data = path.read_bytes()
    for at in range(30, 98, 2):  # where the data lies in the file differs from dump to dump
        i = len(data) * at // 100
        out.write_bytes(data[:i] + bytes(64) + data[i + 64 :])
        check = subprocess.run(
            [*shlex.split(tool), "-f", "/dev/null", str(out)], capture_output=True, text=True, timeout=120
        )
        if check.returncode != 0 and "compress data" in check.stderr:
            return out
    raise AssertionError(f"no damage inside {path}'s data made pg_restore fail")


def test_a_parallel_restore_that_fails_leaves_nothing(seeded, pg_dsn, tmp_path):
    """Sessions side by side are not one transaction: when pg_restore fails half-way (here on a table's
    data damaged in the file, after it made the schema), what it had restored is dropped, and the same
    database takes a whole restore after it."""
    path = tmp_path / "palace.dump"
    assert cli("backup", str(path), "--pg-dump", server_tool(pg_dsn, "pg_dump"), env=seeded).returncode == 0
    before = answers(seeded, "home")
    drop_palace(seeded)
    tool = server_tool(pg_dsn, "pg_restore")
    damaged = damaged_in_its_data(path, tool, tmp_path / "damaged.dump")
    proc = cli("restore", str(damaged), "--jobs", "2", "--pg-restore", tool, env=seeded)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    for said in ("pg_restore failed", "compress data", "was dropped"):
        assert said in proc.stderr, proc.stderr
    assert password_of(pg_dsn) not in proc.stdout + proc.stderr
    schema = seeded["MEMPALACE_PG_SCHEMA"]
    with psycopg.connect(pg_dsn) as conn:
        left = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname IN (%s, %s)", (schema, f"{schema}_kg")
        ).fetchall()
    assert left == []
    proc = cli("restore", str(path), "--jobs", "2", "--pg-restore", tool, env=seeded)
    assert proc.returncode == 0, proc.stderr
    assert answers(seeded, "home") == before
    proc = cli("restore", str(path), "--jobs", "0", env=seeded)
    assert proc.returncode == 2 and "--jobs 0" in proc.stderr
