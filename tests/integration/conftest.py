"""Test fixtures: a real PostgreSQL with pgvector (and AGE), never a mock.

The database comes from MEMPALACE_PG_TEST_DSN, which scripts/test.sh sets after provisioning the
server. Without it the tests fail at once: they never skip for want of a database.
Each test session works in a schema of its own, dropped at the end.

The code under test connects with MEMPALACE_PG_TEST_DSN, which may be a role that is no superuser (the
homelab stack's application role: scripts/docker-stack.sh test). What only a superuser can set up (a
database, a role, the extensions in a new database) goes through ``pg_admin_dsn``:
MEMPALACE_PG_TEST_ADMIN_DSN, a superuser connection to the same server, by default MEMPALACE_PG_TEST_DSN
itself. Give it a password through a passfile (``passfile=`` in the DSN or PGPASSFILE), not in the DSN:
pytest prints a failing test's fixture values.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The construction search the tests' vector index segments are built with, unless a test asks for the
#: full settings (the ``full_index_settings`` fixture) or the run sets MEMPALACE_PG_EF_CONSTRUCTION itself.
#: Most tests do not measure the index, and its builds at the default were much of the server's CPU in
#: a run (docs/testing.md); the folders and CLIs the tests start inherit the setting.
TEST_EF_CONSTRUCTION = "64"
os.environ.setdefault("MEMPALACE_PG_EF_CONSTRUCTION", TEST_EF_CONSTRUCTION)
# The helpers the integration tests share (palace_pair, real_text, _backend_conformance) live in tests/.
sys.path.insert(0, str(ROOT / "tests"))


def _test_dsn() -> str:
    dsn = os.environ.get("MEMPALACE_PG_TEST_DSN", "").strip()
    if not dsn:
        pytest.fail(
            "MEMPALACE_PG_TEST_DSN is not set. Run the suite with scripts/test.sh, which provisions "
            "PostgreSQL with pgvector and AGE and sets it, or point it at such a server yourself.",
            pytrace=False,
        )
    return dsn


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    dsn = _test_dsn()
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        pytest.fail(f"the test database at MEMPALACE_PG_TEST_DSN is unreachable: {exc}", pytrace=False)
    return dsn


@pytest.fixture(scope="session")
def pg_admin_dsn(pg_dsn) -> str:
    """A superuser connection to the test server, for set-up only (creating databases and roles):
    MEMPALACE_PG_TEST_ADMIN_DSN, else MEMPALACE_PG_TEST_DSN. A test that needs it fails, never skips, when
    neither is a superuser."""
    given = os.environ.get("MEMPALACE_PG_TEST_ADMIN_DSN", "").strip()
    dsn = given or pg_dsn
    source = "MEMPALACE_PG_TEST_ADMIN_DSN" if given else "MEMPALACE_PG_TEST_DSN (no admin DSN given)"
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()[
                0
            ]
    except psycopg.OperationalError as exc:
        pytest.fail(f"the admin database at {source} is unreachable: {exc}", pytrace=False)
    if not superuser:
        pytest.fail(
            f"{source} is not a superuser: this test sets up a database or a role. Set "
            "MEMPALACE_PG_TEST_ADMIN_DSN to a superuser connection to the same server.",
            pytrace=False,
        )
    return dsn


@pytest.fixture
def full_index_settings(monkeypatch):
    """The vector index built as a user's is, at the default construction search (for a test that
    measures the index: what it is built with, what a build interrupted at full length leaves)."""
    monkeypatch.delenv("MEMPALACE_PG_EF_CONSTRUCTION", raising=False)


def stop_folders(conn, schema: str) -> None:
    """End the vector index folders of the palace in ``schema`` (a running build holds locks a DROP of the
    schema needs), and no other palace's: another test run may share the server. Only those this role may
    signal (its own, or any for a superuser), so that no role fails here."""
    from mempalace_pg.engine.indexing import folder_application_name

    conn.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = %s AND pid <> pg_backend_pid() AND pg_has_role(usesysid, 'USAGE')",
        (folder_application_name(schema),),
    )


@pytest.fixture(scope="session")
def pg_schema(pg_dsn):
    """A schema for this test session, dropped afterwards."""
    name = f"t_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    yield name
    from mempalace_pg import registries
    from mempalace_pg.config import Settings
    from mempalace_pg.db import schema

    registries.reset()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        # A drop waits for a running build to end: the tests' folders are stopped instead.
        stop_folders(conn, name)
    # as `mempalace-pg db drop` does it (on a new server, before any AGE graph, too)
    schema.drop(Settings.load({"dsn": pg_dsn, "schema": name}))


@pytest.fixture
def builtin_pgvector_dsn(pg_dsn):
    """The DSN for MemPalace's own pgvector backend (the reference some tests compare with, or a palace to
    migrate from): the test database with a schema of its own first in the search path, dropped
    afterwards. That backend makes its tables in current_schema(), which for a role with no schema of its
    name is public, where only a superuser (or the database owner) may create since PostgreSQL 15."""
    from psycopg.conninfo import make_conninfo

    name = f"builtin_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    yield make_conninfo(pg_dsn, options=f"-c search_path={name},public")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.fixture(scope="session")
def pg_session_dsn(pg_dsn) -> str:
    """Where work that needs a session of its own goes (a build's advisory locks, a folder): behind a
    pooler (the PgBouncer tier of scripts/test.sh) the server itself, MEMPALACE_PG_TEST_SESSION_DSN, as
    the plugin does; a lock taken through transaction pooling can be released on another server
    connection and outlive the test. Elsewhere pg_dsn."""
    return os.environ.get("MEMPALACE_PG_TEST_SESSION_DSN", "").strip() or pg_dsn


@pytest.fixture(autouse=True)
def pg_env(pg_dsn, pg_session_dsn, pg_schema, monkeypatch, tmp_path_factory):
    """Point the plugin (and MemPalace) at the test database and a private config directory."""
    monkeypatch.setenv("MEMPALACE_PG_DSN", pg_dsn)
    if pg_session_dsn != pg_dsn:
        monkeypatch.setenv("MEMPALACE_PG_SESSION_DSN", pg_session_dsn)
    else:
        monkeypatch.delenv("MEMPALACE_PG_SESSION_DSN", raising=False)
    monkeypatch.setenv("MEMPALACE_PG_SCHEMA", pg_schema)
    monkeypatch.delenv("MEMPALACE_PG_NAMESPACE", raising=False)
    monkeypatch.setenv("MEMPALACE_CONFIG_DIR", str(tmp_path_factory.mktemp("mpconfig")))
    yield


@pytest.fixture
def backend():
    from mempalace_pg.store.backend import PostgresBackend

    b = PostgresBackend()
    yield b
    b.close()


@pytest.fixture
def make_collection(backend, tmp_path):
    """make_collection(name="palace", collection="mempalace_drawers", namespace=None, create=True)."""
    from mempalace.backends import PalaceRef

    def make(name="palace", collection="mempalace_drawers", namespace=None, create=True, options=None):
        path = tmp_path / name
        ref = PalaceRef(id=str(path), local_path=str(path), namespace=namespace)
        return backend.get_collection(palace=ref, collection_name=collection, create=create, options=options)

    return make


@pytest.fixture
def age_kg(pg_env):
    """A fresh AGE knowledge graph (its own palace) in the session schema."""
    from mempalace_pg.graph.kg import AgeKnowledgeGraph

    kg = AgeKnowledgeGraph(palace_key=f"kg-{uuid.uuid4().hex}")
    yield kg
    kg.close()


@pytest.fixture
def sqlite_kg(tmp_path):
    """MemPalace's own SQLite knowledge graph, the reference."""
    from mempalace_pg.graph.routing import sqlite_class

    kg = sqlite_class()(str(tmp_path / "reference" / "knowledge_graph.sqlite3"))
    yield kg
    kg.close()


@pytest.fixture(scope="session")
def embedding_url(tmp_path_factory):
    """scripts/embedding_server.py serving MemPalace's deterministic hash embedder (and the rule that
    answers ``kg normalize``'s plan request), as MemPalace's ``openai-compat`` setting reaches it."""
    port_file = tmp_path_factory.mktemp("emb") / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "scripts" / "embedding_server.py"),
            "--model",
            "hash",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 60
    while not (port_file.exists() and port_file.read_text().strip()):
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"embedding server did not start: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port_file.read_text().strip()}"
    proc.terminate()
    proc.wait(timeout=10)
